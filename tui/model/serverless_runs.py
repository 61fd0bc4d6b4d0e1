"""A serverless entry's picture: its app's state and each run read from the volume, folded
by the same code as an SSH box's runs (tui.model.runs.fold_run: status.json checked,
cleaned, judged). Pure: the runtime reads the CLI; this only folds what it read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tui.model.runs import Health, RunState, fold_run
from tui.model.serverless import AppState, VolumeEntry

MAX_RUNS = 16  # runs read per poll: the latest by their folder's time
STATUS_LIMIT = 1 << 20  # status.json bytes read at most (LibreYOLO's is a few KiB)


@dataclass(frozen=True)
class VolumeRead:
    """What one poll read of one run folder on the volume."""

    path: str  # the run's folder on the volume, '/'-separated
    status: bytes | None = None  # status.json's bytes; None: not there, or see `error`
    status_error: str | None = None  # the CLI's failure reading it, in words
    weights: tuple[VolumeEntry, ...] = ()
    weights_error: str | None = None


@dataclass(frozen=True)
class ServerlessState:
    """One [[serverless]] entry as last polled: the app, its runs, and what went wrong."""

    name: str
    provider: str
    app: AppState | None = None  # None: never read yet
    runs: tuple[RunState, ...] = ()
    error: str | None = None  # the last poll's failure (the CLI's words, cleaned)
    error_kind: str | None = None  # one of CLI_ERRORS
    checked_at: float | None = None  # when the last poll ended (answered or not)
    ok_at: float | None = None  # when the CLI last answered
    runs_error: str | None = None  # the runs root could not be listed
    # What the CLI answered but is wrong: the app or the volume is not there. Said as a
    # problem (red, `status` exits 1), unlike runs_error (a runs root not made yet).
    problem: str | None = None
    # (shown path, the path the CLI printed) for each run folder whose name was cleaned
    raw_paths: tuple[tuple[str, str], ...] = ()

    def volume_path(self, path: str) -> str:
        """The path to ask the CLI for a run shown at `path` (its raw name, if cleaned)."""
        return dict(self.raw_paths).get(path, path)


AT_REST = "not listed any more (its runs ended)"
ENDED = (Health.COMPLETED, Health.FAILED, Health.DEAD)
CLAIMS_LIVE = (Health.RUNNING, Health.STALLED)


def app_problem(app: AppState, runs: Sequence[RunState] = ()) -> str | None:
    """Whether a missing app is a problem, judged by its runs as their own status.json
    says (folded, before settle_runs marks live ones dead). A provider lists a stopped
    app only for a while (`modal run` makes a temporary app), so one missing with every
    run ended is at rest, not a problem; one missing with a run that still claims to
    train is (nothing runs it), and one missing with no run ended is not found at all
    (a misnamed app). A run whose status.json cannot be read claims nothing either way."""
    if app.state != "missing":
        return None
    live = [r for r in runs if r.health in CLAIMS_LIVE]
    if live:
        where = app.detail or "not in its app list"
        return (f"{app.provider} app {app.app} is missing ({where}) but run "
                f"{live[0].name} still says it trains: nothing runs it, so it was killed "
                "or its status.json was never updated")
    if any(r.health in ENDED for r in runs):
        return None
    return f"{app.provider} app {app.app} is missing: {app.detail or 'not in its app list'}"


def at_rest(app: AppState, runs: Sequence[RunState]) -> AppState:
    """The app as the row says it: a missing app whose runs all ended reads at rest."""
    if app.state != "missing" or app_problem(app, runs) is not None:
        return app
    return replace(app, detail=AT_REST)


def run_folders(entries: Sequence[VolumeEntry], limit: int = MAX_RUNS) -> list[VolumeEntry]:
    """The runs root's folders, latest first (by the listing's time), at most `limit`."""
    folders = [e for e in entries if e.is_dir]
    folders.sort(key=lambda e: (e.mtime or 0.0, e.path), reverse=True)
    return folders[:limit]


def _raw(read: VolumeRead, root: str) -> dict[str, Any]:
    """The probe's shape for one run (tui.model.runs.fold_run reads this)."""
    name = read.path.rstrip("/").rsplit("/", 1)[-1]
    raw: dict[str, Any] = {"path": read.path, "name": name, "root": root, "w_sig": "volume",
                           "weights": [[e.path.rsplit("/", 1)[-1], e.size or 0, e.mtime or 0.0]
                                       for e in read.weights if not e.is_dir]}
    if read.weights_error:
        raw["w_error"] = read.weights_error
    if read.status_error is not None:
        raw["status_error"] = read.status_error
    elif read.status is None:
        raw["status_missing"] = True
    else:
        try:
            raw["status"] = json.loads(read.status[:STATUS_LIMIT].decode("utf-8", "replace"))
        except (ValueError, RecursionError) as exc:
            raw["status_error"] = f"not JSON ({type(exc).__name__})"
    return raw


def fold_runs(previous: Sequence[RunState], reads: Sequence[VolumeRead], root: str,
              now: float) -> tuple[RunState, ...]:
    """Each run read this poll, folded onto its last state (a status.json that stopped
    parsing keeps the last good one on screen, marked unreadable, as on a box). `now`
    stands for the box's clock: a status.json not updated for 3 epochs reads stalled."""
    before = {r.path: r for r in previous}
    return tuple(fold_run(before.get(read.path), _raw(read, root), now) for read in reads)
