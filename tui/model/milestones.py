"""Milestone pushes: which run of a watched box to push now, unasked, and why. Pure.

`[box.push] every_epochs = N` pushes each `weights/epoch_<k>.pt` with k a multiple
of N (LibreYOLO numbers these files from 1, like status.json), `on_best` pushes
best.pt when it changed since its last verified push and the run's best (epoch,
metric) moved with it, `on_complete` pushes a run LibreYOLO marked completed
whose weights are not the very files last pushed. What counts as pushed is the
journal's verified pushes, so a push made by hand, by `gpurent-tui push` or by
another panel answers a milestone too.

Each thing that calls for a push is a trigger with a key naming exactly that
version (the epoch file, best.pt's size/mtime/inode): a trigger answered by a
verified push is never pushed again, and one whose push failed waits out a
growing backoff, so a box that keeps failing gets no burst of pushes of the
same file. One push per box at a time: the caller asks again when it is free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tui.model.box import BoxState, Connection
from tui.model.config import PushTarget
from tui.model.fields import epoch_of
from tui.model.guard import (
    PushRecord,
    destination_writers,
    last_verified_pushes,
    overwriter,
    unpushed_weights,
)
from tui.model.retry import backoff_delay
from tui.model.runs import Health, RunState, WeightFile

RETRY_BASE_SECONDS = 30.0
RETRY_CAP_SECONDS = 1800.0
MAX_EPOCHS_PER_PUSH = 32


@dataclass(frozen=True)
class Wish:
    """One push the policy asks for: a run, the epoch files to include, and why."""

    box: str
    run: str
    run_path: str
    epochs: tuple[int, ...]
    keys: frozenset[str]  # the triggers this push answers
    why: str


@dataclass(frozen=True)
class Attempt:
    failures: int
    retry_at: float
    error: str = ""


@dataclass(frozen=True)
class Milestones:
    """What the policy remembers between looks: triggers a verified push answered in this
    process (the journal may not be writable) and the failed ones' backoff."""

    done: frozenset[str] = frozenset()
    attempts: Mapping[str, Attempt] = field(default_factory=dict)


def pushed_epochs(entries: Iterable[Mapping[str, Any]], box: str) -> dict[str, set[int]]:
    """Per run path, the epoch_<k>.pt files some verified push of `box` holds."""
    found: dict[str, set[int]] = {}
    for entry in entries:
        if (entry.get("box") != box or entry.get("action") != "push"
                or entry.get("outcome") != "done" or entry.get("verified") is not True
                or not isinstance(entry.get("run_path"), str)):
            continue
        rows = entry.get("files")
        for row in rows if isinstance(rows, list) else ():
            name = row.get("name") if isinstance(row, Mapping) else None
            epoch = epoch_of(name.removeprefix("weights/")) \
                if isinstance(name, str) and name.startswith("weights/") else None
            if epoch is not None:
                found.setdefault(entry["run_path"], set()).add(epoch)
    return found


def _identity(weight: WeightFile) -> str:
    return f"{weight.size}:{weight.mtime_ns if weight.mtime_ns is not None else weight.mtime}" \
           f":{weight.inode}"


def triggers(push: PushTarget, run: RunState, record: PushRecord | None,
             epochs_pushed: set[int]) -> list[tuple[str, str, int | None]]:
    """(key, words, epoch file to include) for each milestone `run` has reached unpushed."""
    found: list[tuple[str, str, int | None]] = []
    if run.weights_error:
        return found
    weights = {w.name: w for w in run.weights}
    if push.every_epochs:
        for weight in weights.values():
            k = weight.epoch
            if k is not None and k > 0 and k % push.every_epochs == 0 and k not in epochs_pushed:
                found.append((f"epoch:{run.path}:{k}:{_identity(weight)}", f"epoch {k}", k))
    best = weights.get("best.pt")
    if push.on_best and best is not None:
        pushed = record.files.get("weights/best.pt") if record is not None else None
        now = (best.size, best.mtime_ns, best.inode)
        moved = record is None or record.best_epoch is None or \
            (run.best_epoch, run.best_metric) != (record.best_epoch, record.best_metric)
        if pushed != now and moved and run.best_epoch is not None:
            metric = f" ({run.best_metric_name or 'metric'} {run.best_metric:.4g})" \
                if run.best_metric is not None else ""
            found.append((f"best:{run.path}:{_identity(best)}",
                          f"best.pt improved at epoch {run.best_epoch}{metric}", None))
    if push.on_complete and run.health is Health.COMPLETED and weights and \
            unpushed_weights([run], {run.path: record} if record else {}):
        last = weights.get("last.pt") or best or next(iter(weights.values()))
        found.append((f"complete:{run.path}:{_identity(last)}", "run completed", None))
    return found


@dataclass(frozen=True)
class Pushed:
    """What the journal says was pushed from one box, verified: each run's last push and
    the epoch files any push held (folded once per journal version, not per look)."""

    records: Mapping[str, PushRecord]
    epochs: Mapping[str, set[int]]


def pushed_from(entries: Iterable[Mapping[str, Any]], box: str) -> Pushed:
    entries = list(entries)
    return Pushed(last_verified_pushes(entries, box), pushed_epochs(entries, box))


def pushed_by_box(entries: Iterable[Mapping[str, Any]], boxes: Iterable[str],
                  before: Mapping[str, Pushed] | None = None) -> dict[str, Pushed]:
    """pushed_from() for every box in one pass over the journal, not one per box.

    With `before` (the fold of the journal's earlier lines), `entries` are only the
    lines appended since: a box they do not touch keeps its very Pushed object, so a
    look that compares it finds nothing changed."""
    mine: dict[str, list[Mapping[str, Any]]] = {name: [] for name in boxes}
    for entry in entries:
        if entry.get("action") == "push":
            rows = mine.get(entry.get("box"))  # type: ignore[arg-type]
            if rows is not None:
                rows.append(entry)
    folded = {}
    for name, rows in mine.items():
        old = (before or {}).get(name)
        if old is not None and not rows:
            folded[name] = old
            continue
        new = pushed_from(rows, name)
        if old is None:
            folded[name] = new
            continue
        records = dict(old.records)
        for path, record in new.records.items():
            if path not in records or records[path].at <= record.at:  # as one pass would
                records[path] = record
        writers = destination_writers(rows)  # another run's push over a held one voids it
        for path, record in list(records.items()):
            who = "" if record.overwritten else \
                overwriter(writers, record.destination, name, path, record.at)
            if who:
                records[path] = replace(record, files={}, overwritten=who)
        epochs = {path: set(nums) for path, nums in old.epochs.items()}
        for path, nums in new.epochs.items():
            epochs.setdefault(path, set()).update(nums)
        folded[name] = Pushed(records, epochs)
    return folded


def plan(push: PushTarget | None, state: BoxState, pushed: Pushed | Iterable[Mapping[str, Any]],
         memory: Milestones, now: float, *, busy: bool = False) -> Wish | None:
    """The one push to make on this box now, or None (nothing due, busy, or unseen).
    `pushed`: the journal's entries, or what pushed_from() folded of them."""
    if push is None or not push.milestones or busy or state.connection is not Connection.OK:
        return None
    if not isinstance(pushed, Pushed):
        pushed = pushed_from(pushed, state.name)
    records, epochs = pushed.records, pushed.epochs
    for run in state.runs:
        due = []
        for key, words, epoch in triggers(push, run, records.get(run.path),
                                          epochs.get(run.path, set())):
            attempt = memory.attempts.get(key)
            if key in memory.done or (attempt is not None and attempt.retry_at > now):
                continue
            due.append((key, words, epoch))
        epochs_due = sorted((e, key) for key, _, e in due if e is not None)
        if len(epochs_due) > MAX_EPOCHS_PER_PUSH:  # a box listing thousands: a few at a time
            later = {key for _, key in epochs_due[MAX_EPOCHS_PER_PUSH:]}
            due = [d for d in due if d[0] not in later]
        if due:
            return Wish(state.name, run.name, run.path,
                        tuple(sorted(e for _, _, e in due if e is not None)),
                        frozenset(k for k, _, _ in due), ", ".join(w for _, w, _ in due))
    return None


def settle(memory: Milestones, wish: Wish, ok: bool, now: float, jitter: float = 0.5,
           error: str = "", base: float = RETRY_BASE_SECONDS) -> Milestones:
    """After the wish's push: answered for good when verified, else retried after a
    backoff that doubles from `base` up to RETRY_CAP_SECONDS."""
    attempts = dict(memory.attempts)
    if ok:
        for key in wish.keys:
            attempts.pop(key, None)
        return replace(memory, done=memory.done | wish.keys, attempts=attempts)
    for key in wish.keys:
        failures = attempts[key].failures + 1 if key in attempts else 1
        delay = backoff_delay(failures, jitter, base=base, cap=RETRY_CAP_SECONDS)
        attempts[key] = Attempt(failures, now + delay, error)
    return replace(memory, attempts=attempts)


def push_details(run: RunState) -> dict[str, Any]:
    """What a push journals about its run, so later looks can count what is unpushed."""
    return {"epoch": run.current_epoch, "best_epoch": run.best_epoch,
            "best_metric": run.best_metric}
