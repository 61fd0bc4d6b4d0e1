"""The unpushed-weights guard: which checkpoints on a box a destroy would lose. Pure.

A checkpoint counts as safe only when the journal holds a verified push of
that very file (same size and mtime as on the box now); anything written
since, or never pushed, blocks a destroy until the user pushes or overrides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tui.model.runs import RunState

GUARDED = ("best.pt", "last.pt")
MTIME_SLACK = 1.0


@dataclass(frozen=True)
class Unpushed:
    run: str
    run_path: str
    files: tuple[str, ...]   # weights/<name>
    reason: str


@dataclass(frozen=True)
class PushRecord:
    """The files of the last verified push of one run, as the journal has them."""

    at: float
    files: Mapping[str, tuple[int, float]]  # "weights/best.pt" -> (size, mtime)


def last_verified_pushes(entries: Iterable[Mapping[str, Any]], box: str
                         ) -> dict[str, PushRecord]:
    """Per run path, the latest push of `box` that was done and verified."""
    found: dict[str, PushRecord] = {}
    for entry in entries:
        if (entry.get("box") != box or entry.get("action") != "push"
                or entry.get("outcome") != "done" or not entry.get("verified")):
            continue
        files = {}
        for f in entry.get("files") or []:
            try:
                files[str(f["name"])] = (int(f["size"]), float(f["mtime"]))
            except (KeyError, TypeError, ValueError):
                continue
        run_path = str(entry.get("run_path") or "")
        try:
            at = float(entry.get("time") or 0.0)
        except (TypeError, ValueError):
            continue  # a hand-edited or foreign line: not a push we can vouch for
        if run_path and (run_path not in found or found[run_path].at <= at):
            found[run_path] = PushRecord(at, files)
    return found


def unpushed_weights(runs: Iterable[RunState], pushes: Mapping[str, PushRecord]
                     ) -> list[Unpushed]:
    """Every run whose best.pt/last.pt on the box is newer than its last verified push."""
    out = []
    for run in runs:
        weights = [w for w in run.weights if w.name in GUARDED]
        if not weights:
            continue
        record = pushes.get(run.path)
        if record is None:
            out.append(Unpushed(run.name, run.path,
                                tuple(f"weights/{w.name}" for w in weights), "never pushed"))
            continue
        changed = []
        for weight in weights:
            pushed = record.files.get(f"weights/{weight.name}")
            if pushed is None or pushed[0] != weight.size or \
                    abs(pushed[1] - weight.mtime) > MTIME_SLACK:
                changed.append(f"weights/{weight.name}")
        if changed:
            names = ", ".join(c.removeprefix("weights/") for c in changed)
            out.append(Unpushed(run.name, run.path, tuple(changed),
                                f"{names} changed since the last verified push"))
    return out


def push_note(run: RunState, pushes: Mapping[str, PushRecord], now: float) -> str | None:
    """`pushed 3m ago, verified` or `best.pt changed since last push`, for the run's row."""
    from tui.model.runs import format_age

    record = pushes.get(run.path)
    if record is None:
        return None
    stale = unpushed_weights([run], pushes)
    if stale:
        return stale[0].reason
    return f"pushed {format_age(now - record.at)} ago, verified"
