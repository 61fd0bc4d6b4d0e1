"""One training run: parse what the probe sent, fold it into an immutable state, judge health.

Pure: no I/O. A run's truth comes from its own files (status.json,
metrics.jsonl, train.log, weights/) and from the box (its clock, whether the
pid lives); nothing here is guessed. Anything malformed marks this run, with
the reason, and never raises.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from tui.model.busy import BusyIntegral
from tui.model.fields import MAX_COUNT, brief, epoch_of, finite, items, seconds, size, text, whole
from tui.model.text import clean, clean_data

HISTORY_LIMIT = 5000
LOG_TAIL_LINES = 400
STALL_FLOOR_SECONDS = 600.0
STALL_EPOCHS = 3.0
SCHEMA_VERSION = 1
PACE_WINDOW = 10      # recent epochs the ETA is estimated from
PACE_OUTLIER = 3.0    # an epoch slower than this x the window's median was a pause
PACE_AGREE = 0.2      # LibreYOLO's own ETA is shown when within 20% (or a minute) of ours
PACE_MIN_EPOCHS = 3


class Health(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STALLED = "stalled"
    DEAD = "dead"
    UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class EpochPoint:
    """One finished epoch from metrics.jsonl: what the charts and sparklines draw."""

    epoch: int
    loss: float | None
    metric: float | None = None
    metric_name: str | None = None
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class WeightFile:
    """A checkpoint as the box lists it; `mtime_ns` and `inode` identify this very version
    (None from a box that did not say: then no push can vouch for it)."""

    name: str
    size: int
    mtime: float
    mtime_ns: int | None = None
    inode: int | None = None
    # N of `epoch_<N>.pt`, parsed once here and bounded (fields.epoch_of): the guard, the
    # sizing and the milestones read this, never the box's digits again. None: no epoch file.
    epoch: int | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epoch", epoch_of(self.name))


@dataclass(frozen=True)
class Cursor:
    """What the client already holds of a run, sent back so the probe skips it."""

    status_sig: str | None = None    # status.json's (size, mtime) as the probe saw it
    weights_sig: str | None = None   # the weights folder's listing, likewise
    hist_sig: str | None = None      # the run's history files' listing, likewise
    dataset_sig: str | None = None   # train_config.yaml as the probe counted its data set
    metrics_offset: int | None = None  # metrics.jsonl read up to here ...
    metrics_id: str | None = None      # ... of this file (inode) ...
    metrics_head: str | None = None    # ... whose first bytes hash to this (not rewritten)
    log_offset: int | None = None      # train.log, likewise
    log_id: str | None = None
    log_head: str | None = None
    pid: int | None = None
    started_at: str | None = None

    def to_request(self) -> dict[str, Any]:
        """The cursor in the probe's short wire keys (every refresh sends one per run)."""
        return {WIRE_KEYS[k]: v for k, v in self.__dict__.items() if v is not None}


# Cursor field -> the key the probe (tui/onbox/probe.py) reads.
WIRE_KEYS = {"status_sig": "s_sig", "weights_sig": "w_sig", "hist_sig": "h_sig",
             "dataset_sig": "d_sig", "metrics_offset": "m_off",
             "metrics_id": "m_id", "metrics_head": "m_head", "log_offset": "l_off",
             "log_id": "l_id", "log_head": "l_head", "pid": "pid", "started_at": "started_at"}


# --- tolerant readers of LibreYOLO's fields ---------------------------------


def parse_time(value: object) -> float | None:
    """Epoch seconds of an ISO 8601 timestamp (LibreYOLO writes UTC with an offset)."""
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None
    return stamp.timestamp()


@dataclass(frozen=True)
class Pace:
    """Seconds per remaining epoch, the ETA it gives, and how they were estimated (in words)."""

    epoch_seconds: float | None
    eta_seconds: float | None
    method: str


def estimate_pace(history: tuple[EpochPoint, ...], status: Mapping[str, Any] | None,
                  remaining: int | None) -> Pace:
    """Time per epoch from the recent epochs, robust to a pause: the mean of the last
    PACE_WINDOW epoch times, leaving out any over PACE_OUTLIER x their median (one
    paused epoch must not poison the ETA or the cost to finish). LibreYOLO's own
    `eta_seconds` (its mean over every epoch x epochs left) is preferred only when
    it agrees with that."""
    theirs = finite(status.get("eta_seconds")) if status else None
    theirs = seconds(max(theirs, 0.0)) if theirs is not None else None  # overdue: 0
    their_mean = seconds(status.get("mean_epoch_seconds")) if status else None
    times = [p.seconds for p in history[-PACE_WINDOW:] if p.seconds is not None and p.seconds > 0]
    if len(times) < PACE_MIN_EPOCHS:
        if theirs is not None:
            return Pace(their_mean, theirs, "LibreYOLO's (too few epochs to check it)")
        if times:
            each = sum(times) / len(times)
            eta = each * remaining if remaining is not None else None
            return Pace(each, eta, f"mean of the {len(times)} epoch(s) so far ({each:.1f} s)")
        return Pace(their_mean, None, "no epoch finished yet")
    ordered = sorted(times)
    half = len(ordered) // 2
    median = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
    kept = [t for t in times if t <= PACE_OUTLIER * median]
    each = sum(kept) / len(kept)
    method = f"mean of last {len(kept)} epochs ({each:.1f} s)"
    if len(kept) < len(times):
        method += f", {len(times) - len(kept)} paused one(s) left out"
    if remaining is None:  # no total_epochs: LibreYOLO's own figure is all there is
        return Pace(each, theirs, "LibreYOLO's (total epochs unknown)" if theirs is not None
                    else method)
    ours = each * remaining
    if theirs is not None and abs(theirs - ours) <= max(PACE_AGREE * ours, 60.0):
        return Pace(each, theirs, f"LibreYOLO's, agrees with {method}")
    if theirs is not None:
        method += f"; LibreYOLO says {format_age(theirs)}"
    return Pace(each, ours, method)


def check_status(raw: object) -> tuple[Mapping[str, Any] | None, str | None]:
    """Accept a parsed status.json or say why it cannot be used."""
    if not isinstance(raw, dict):
        return None, f"status.json is not a JSON object (got {type(raw).__name__})"
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        return None, f"status.json schema_version {brief(version)} is not supported (expected 1)"
    state = raw.get("state")
    if state not in ("running", "completed", "failed"):
        return None, f"status.json has an unknown state {brief(state)}"
    return raw, None


def parse_metrics(chunk: str) -> tuple[list[EpochPoint], dict[str, Any] | None, list[str]]:
    """Complete metrics.jsonl lines into epoch points, the last whole record, and what
    could not be read (bad lines are reported, not fatal).

    Each line becomes its point as it is read and its parsed record is let go at once
    (the last one is kept): a long history then leaves no thousands of half-freed dicts
    behind, only the points, packed where the records were."""
    points: list[EpochPoint] = []
    last: dict[str, Any] | None = None
    problems: list[str] = []
    for number, line in enumerate(chunk.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:  # "[[[[..." nests past the stack
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            problems.append(f"metrics.jsonl line {number} of this read is not JSON ({why})")
            continue
        if not isinstance(record, dict) or whole(record.get("epoch")) is None:
            problems.append(f"metrics.jsonl line {number} of this read has no epoch")
            continue
        points.append(epoch_point(record))
        last = record
    return points, last, problems


def epoch_point(record: Mapping[str, Any]) -> EpochPoint:
    name = text(record.get("current_metric_name"))
    return EpochPoint(
        epoch=whole(record.get("epoch")) or 0,
        loss=finite(record.get("train/loss")),
        metric=finite(record.get("current_metric")),
        # One string for the thousands of epochs that repeat the same name.
        metric_name=sys.intern(clean(name)) if name is not None else None,
        seconds=seconds(record.get("time")),
    )


def weight_file(row: list[Any]) -> WeightFile:
    """[name, size, mtime] or [name, size, mtime, mtime_ns, inode] from the probe."""
    exact = len(row) == 5 and all(isinstance(v, int) and not isinstance(v, bool)
                                  and 0 <= v <= MAX_COUNT for v in row[3:])
    return WeightFile(clean(str(row[0])), size(row[1]) or 0, finite(row[2]) or 0.0,
                      row[3] if exact else None, row[4] if exact else None)


def odd_checkpoints(weights: tuple[WeightFile, ...]) -> list[str]:
    """Checkpoints named like `epoch_<N>.pt` whose N is no epoch (5000 digits, a sign, a
    non-ASCII digit): named as odd, since no push takes them and no figure counts them."""
    return [f"odd checkpoint weights/{_cut(w.name)}: its epoch number is not 1 to 9 ASCII "
            "digits, so no push takes it" for w in weights
            if w.epoch is None and w.name.startswith("epoch_") and w.name.endswith(".pt")]


MAX_WEIGHT_DIRS = 16  # folders in weights/ a run keeps by name (the probe sends no more)
WEIGHT_DIR_NAME = 48  # characters of such a folder's name kept for display


def weight_dirs_of(raw: Mapping[str, Any]) -> tuple[tuple[str, ...], int]:
    """The folders a weights listing names (`w_dirs`) and the count of the rest (`w_more`):
    at most MAX_WEIGHT_DIRS short, cleaned names, whatever a box claims."""
    names = [n for n in items(raw.get("w_dirs")) if isinstance(n, str)]
    kept = tuple(_short_name(clean(n)) for n in names[:MAX_WEIGHT_DIRS])
    more = (size(raw.get("w_more")) or 0) + len(names) - len(kept)
    return kept, max(more, 0)


def _short_name(name: str) -> str:
    return name if len(name) <= WEIGHT_DIR_NAME else name[:WEIGHT_DIR_NAME - 3] + "..."


def folder_words(dirs: tuple[str, ...], more: int) -> str | None:
    """`weights/old/: a folder in weights/ no push takes` (three names at most, then a
    count), or None when a run's weights/ holds no folder."""
    shown = [f"weights/{name}/" for name in dirs[:3]]
    more += len(dirs) - len(shown)
    if not shown and not more:
        return None
    names = ", ".join(shown) + (f" and {more} more" if more else "")
    one = len(shown) + more == 1
    return f"{names}: {'a folder' if one else 'folders'} in weights/ no push takes"


def _cut(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else f"{name[:limit - 8]}...{name[-3:]} ({len(name)} " \
        "characters)"


def short_metric_name(name: str | None) -> str | None:
    """'metrics/mAP50-95' reads as 'mAP50-95'."""
    if name is None:
        return None
    return name.removeprefix("metrics/")


DATASET_MAX_IMAGES = 10**9  # more training images than any data set a box counts


@dataclass(frozen=True)
class Dataset:
    """What the probe read of a run's training data set (train_config.yaml and its data
    yaml): the training images one epoch goes through, or why that is unknown."""

    images: int | None = None
    imgsz: int | None = None
    batch: int | None = None
    name: str | None = None
    unknown: str | None = None


def dataset_of(raw: object) -> Dataset:
    """The probe's `dataset` part, bounded and cleaned; anything odd reads as unknown."""
    if not isinstance(raw, Mapping):
        return Dataset(unknown="the box sent no readable data set count")
    images = whole(raw.get("images"))
    if images is not None and not 0 < images <= DATASET_MAX_IMAGES:
        images = None
    why = raw.get("unknown")
    unknown = clean(str(why))[:120] if why is not None else None
    if images is None and unknown is None:
        unknown = "no training images counted"
    name = raw.get("data")
    return Dataset(images=images if unknown is None else None,
                   imgsz=_small(raw.get("imgsz")), batch=_small(raw.get("batch")),
                   name=clean(name)[:80] if isinstance(name, str) else None, unknown=unknown)


def _small(value: object) -> int | None:
    number = whole(value)
    return number if number is not None and 0 < number < 100000 else None


# --- the run ----------------------------------------------------------------


@dataclass(frozen=True)
class RunState:
    """Everything known about one run at one refresh; derived figures are properties."""

    path: str
    name: str
    root: str
    health: Health = Health.UNREADABLE
    reason: str = "not read yet"
    status: Mapping[str, Any] | None = None
    status_problem: str | None = None
    last_record: Mapping[str, Any] | None = None
    history: tuple[EpochPoint, ...] = ()
    log_tail: tuple[str, ...] = ()
    weights: tuple[WeightFile, ...] = ()
    weights_error: str | None = None  # the weights folder could not be listed (whole)
    # Folders in weights/ (weights/old/, a link to one), bounded and cleaned, and how many
    # more the box counted: no push takes what they hold, so the destroy guard refuses.
    weight_dirs: tuple[str, ...] = ()
    weight_dirs_more: int = 0
    files: tuple[WeightFile, ...] = ()  # the run's history files (status.json, train.log...)
    pid_alive: bool | None = None
    dataset: Dataset | None = None  # None: the box has not said (no train_config.yaml yet)
    problems: tuple[str, ...] = ()
    restarts: int = 0
    box_time: float | None = None
    cursor: Cursor = field(default_factory=Cursor)
    busy: BusyIntegral = field(default_factory=BusyIntegral)  # GPUs while it progressed
    # The path as shown when the real one holds a secret the panel holds (None: the same).
    path_redacted: str | None = None

    @property
    def shown_path(self) -> str:
        """The path as any reader shows it: `path` is the address, sent back to the box
        only; a path that holds a held secret is shown with *** instead."""
        return self.path_redacted if self.path_redacted is not None else self.path

    def _field(self, key: str) -> object:
        """A status.json field, else the last metrics.jsonl record's.

        Completed and failed runs drop some fields from status.json."""
        if self.status is not None and self.status.get(key) is not None:
            return self.status.get(key)
        if self.last_record is not None:
            return self.last_record.get(key)
        return None

    @property
    def state(self) -> str | None:
        return text(self.status.get("state")) if self.status else None

    @property
    def current_epoch(self) -> int | None:
        if self.status is not None and whole(self.status.get("current_epoch")) is not None:
            return whole(self.status.get("current_epoch"))
        if self.status is not None and whole(self.status.get("completed_epochs")) is not None:
            return whole(self.status.get("completed_epochs"))
        if self.last_record is not None:
            return whole(self.last_record.get("epoch"))
        return None

    @property
    def total_epochs(self) -> int | None:
        return whole(self.status.get("total_epochs")) if self.status else None

    @cached_property
    def pace(self) -> Pace:
        """Seconds per epoch and the ETA, estimated robustly (see estimate_pace)."""
        total, done = self.total_epochs, self.current_epoch
        remaining = max(total - (done or 0), 0) if total is not None else None
        return estimate_pace(self.history, self.status, remaining)

    @property
    def eta_seconds(self) -> float | None:
        if self.health is not Health.RUNNING or self.status is None:
            return None
        return self.pace.eta_seconds

    @property
    def epoch_seconds(self) -> float | None:
        """A typical epoch's seconds now (what cost per epoch uses): robust to a pause."""
        return self.pace.epoch_seconds

    @property
    def mean_epoch_seconds(self) -> float | None:
        mean = seconds(self.status.get("mean_epoch_seconds")) if self.status else None
        if mean is None and self.history:
            times = [p.seconds for p in self.history if p.seconds is not None]
            mean = sum(times) / len(times) if times else None
        return mean

    @property
    def train_loss(self) -> float | None:
        loss = finite(self.status.get("train_loss")) if self.status else None
        if loss is None and self.last_record is not None:
            loss = finite(self.last_record.get("train/loss"))
        return loss

    @property
    def best_metric(self) -> float | None:
        return finite(self._field("best_metric"))

    @property
    def best_metric_name(self) -> str | None:
        return short_metric_name(text(self._field("best_metric_name")))

    @property
    def best_epoch(self) -> int | None:
        return whole(self._field("best_epoch"))

    @property
    def updated_at(self) -> str | None:
        return text(self.status.get("updated_at")) if self.status else None

    @property
    def pid(self) -> int | None:
        return whole(self.status.get("pid")) if self.status else None

    @property
    def error(self) -> dict[str, str] | None:
        """The failure LibreYOLO recorded, as {type, message}."""
        if self.status is None or not isinstance(self.status.get("error"), dict):
            return None
        err = self.status["error"]
        return {"type": str(err.get("type") or "Error"), "message": str(err.get("message") or "")}

    @property
    def loss_history(self) -> list[float]:
        return [p.loss for p in self.history if p.loss is not None]


def judge(run: RunState) -> tuple[Health, str]:
    """Health and the reason for it, from the run's files and the box's clock only."""
    if run.status_problem is not None:
        return Health.UNREADABLE, run.status_problem
    if run.status is None:
        return Health.UNREADABLE, "no status.json in this run directory"
    state = run.state
    epoch, total = run.current_epoch, run.total_epochs
    where = f"epoch {epoch if epoch is not None else '-'}/{total if total is not None else '?'}"
    if state == "completed":
        return Health.COMPLETED, f"finished {where}"
    if state == "failed":
        err = run.error
        what = f"{err['type']}: {err['message']}" if err else "no error recorded"
        return Health.FAILED, f"failed at {where}: {what}"
    if run.pid_alive is False:
        return Health.DEAD, (
            f"status says running but pid {run.pid} is gone on the box "
            "(killed, OOM, preempted or rebooted)")
    updated = parse_time(run.status.get("updated_at"))
    if run.box_time is not None and updated is not None:
        age = run.box_time - updated
        mean = seconds(run.status.get("mean_epoch_seconds"))
        limit = max(STALL_EPOCHS * mean if mean else 0.0, STALL_FLOOR_SECONDS)
        if age > limit:
            return Health.STALLED, (
                f"no update for {format_age(age)} at {where} "
                f"(limit {format_age(limit)}: 3 x mean epoch, at least 10 min)")
    return Health.RUNNING, where


def format_age(duration: float) -> str:
    """A short duration: 45s, 14m, 3h05m, 2d04h ("?" for no number: NaN, infinity)."""
    if not math.isfinite(duration):
        return "?"
    whole_s = max(0, int(min(duration, 1e15)))
    if whole_s < 60:
        return f"{whole_s}s"
    if whole_s < 3600:
        return f"{whole_s // 60}m"
    if whole_s < 86400:
        return f"{whole_s // 3600}h{whole_s % 3600 // 60:02d}m"
    return f"{whole_s // 86400}d{whole_s % 86400 // 3600:02d}h"


def fold_run(prev: RunState | None, raw: Mapping[str, Any], box_time: float) -> RunState:
    """Fold the probe's answer for one run into the next immutable RunState."""
    path = str(raw.get("path"))
    # The path stays as the box spelled it (it is sent back to the box); every text
    # shown to a person is cleaned of control sequences here, where it enters.
    # A path holding a secret comes with `path_shown` (tui.model.box_redact): shown instead.
    shown = raw.get("path_shown")
    run = prev or RunState(path=path, name=clean(str(raw.get("name") or shown or path)),
                           root=clean(str(raw.get("root") or "")),
                           path_redacted=clean(shown) if isinstance(shown, str) else None)
    cursor = run.cursor
    problems: list[str] = [clean(str(p)) for p in raw.get("errors") or []]
    status, status_problem, last_record = run.status, run.status_problem, run.last_record
    history, log_tail, restarts = run.history, run.log_tail, run.restarts

    if "s_sig" in raw:
        cursor = replace(cursor, status_sig=str(raw["s_sig"]))
    if "status" in raw:
        status, status_problem = check_status(raw["status"])
        if status is not None:
            status = clean_data(status)
        else:
            status = run.status  # keep the last good one on screen, marked unreadable
            cursor = replace(cursor, status_sig=None)
    elif "status_error" in raw:
        status_problem = f"status.json could not be read: {clean(str(raw['status_error']))}"
        cursor = replace(cursor, status_sig=None)
    elif raw.get("status_missing") and not raw.get("vanished"):
        status, status_problem = None, None  # (a vanished run keeps its last status)
    if status is not None:
        cursor = replace(cursor, pid=whole(status.get("pid")),
                         started_at=text(status.get("started_at")))

    metrics = raw.get("metrics")
    if isinstance(metrics, Mapping):
        if metrics.get("reset"):
            history, last_record = (), None
            restarts += 1
            problems.append("metrics.jsonl started over (a new run in the same directory)")
        points, record, bad = parse_metrics(str(metrics.get("text") or ""))
        problems.extend(bad)
        if metrics.get("error"):
            problems.append(f"metrics.jsonl: {clean(str(metrics['error']))}")
        if record is not None:
            history = (history + tuple(points))[-HISTORY_LIMIT:]
            last_record = clean_data(record)
        cursor = replace(cursor, metrics_offset=whole(metrics.get("off")),
                         metrics_id=text(metrics.get("id")),
                         metrics_head=text(metrics.get("head")))

    log = raw.get("log")
    if isinstance(log, Mapping):
        if log.get("reset"):
            log_tail = ()
        lines = [clean(line) for line in str(log.get("text") or "").splitlines()]
        if log.get("skipped"):
            lines.insert(0, f"[... {log['skipped']} bytes of train.log not shown ...]")
        log_tail = (log_tail + tuple(lines))[-LOG_TAIL_LINES:]
        cursor = replace(cursor, log_offset=whole(log.get("off")), log_id=text(log.get("id")),
                         log_head=text(log.get("head")))

    weights, weights_error = run.weights, run.weights_error
    dirs, dirs_more = run.weight_dirs, run.weight_dirs_more
    if "w_sig" in raw:
        cursor = replace(cursor, weights_sig=str(raw["w_sig"]))
        weights_error = clean(str(raw["w_error"])) if raw.get("w_error") else None
    if isinstance(raw.get("weights"), list):
        weights = tuple(weight_file(w) for w in raw["weights"]
                        if isinstance(w, list) and len(w) in (3, 5))
        dirs, dirs_more = weight_dirs_of(raw)  # sent with every listing: none sent, none left
    dataset = run.dataset
    if "d_sig" in raw:
        cursor = replace(cursor, dataset_sig=str(raw["d_sig"]))
    if "dataset" in raw:
        dataset = dataset_of(raw["dataset"])
    files = run.files
    if "h_sig" in raw:
        cursor = replace(cursor, hist_sig=str(raw["h_sig"]))
    if isinstance(raw.get("hist"), list):
        files = tuple(weight_file(w) for w in raw["hist"]
                      if isinstance(w, list) and len(w) in (3, 5))

    problems.extend(odd_checkpoints(weights))
    folders = folder_words(dirs, dirs_more)
    if folders:
        problems.append(f"{folders}: a destroy would lose what it holds")
    alive = raw.get("pid_alive")
    pid_alive = alive if isinstance(alive, bool) else None
    if raw.get("vanished"):
        status_problem = "run directory vanished while it was being read"

    folded = replace(
        run, status=status, status_problem=status_problem, last_record=last_record,
        history=history, log_tail=log_tail, weights=weights, weights_error=weights_error,
        weight_dirs=dirs, weight_dirs_more=dirs_more, files=files,
        pid_alive=pid_alive, dataset=dataset,
        problems=tuple(problems), restarts=restarts, box_time=box_time, cursor=cursor)
    health, reason = judge(folded)
    return replace(folded, health=health, reason=reason)
