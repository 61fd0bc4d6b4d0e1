"""The destroy guard: what a destroy would lose, and whether the panel can even tell. Pure.

It fails closed. A checkpoint counts as safe only when the journal holds a
verified push of that very version of the file: the same size, mtime to the
nanosecond and inode as on the box now (a checkpoint rewritten at the same
size is a new one). And the guard refuses when its picture of the box is
incomplete: a runs root missing or unreadable (an unmounted volume), a search
cut short, a weights folder that could not be listed, runs or checkpoints the
search saw but could not look into, a folder inside a run's weights/ (no push takes
what it holds). Each refusal says why; only a typed override goes past it, and a
forced destroy journals exactly what was lost.

Epoch snapshots (epoch_<N>.pt) that a run's verified push left out (a push
without --epochs) are a refusal of their own: LibreYOLO saves one every ten
epochs, so most runs have them, and they are the one loss a user may give up
without overriding anything else (destroy --without-snapshots).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.model.box import BoxState, Connection
from tui.model.fields import epoch_of
from tui.model.runs import Health, RunState, WeightFile, finite, folder_words, format_age, whole
from tui.model.sizing import human_bytes
from tui.model.text import clean

GUARDED = ("best.pt", "last.pt")
PICTURE = "picture incomplete"

FileId = tuple[int, int, int]  # size, mtime_ns, inode


@dataclass(frozen=True)
class Unpushed:
    """One reason a destroy is refused: a run's unpushed files, or a gap in the picture
    (then `run` is PICTURE and `files` names the place the panel could not see, or `run`
    is the run whose weights/ holds the folders in `files`)."""

    run: str
    run_path: str
    files: tuple[str, ...]   # weights/<name>, or the unseen place
    reason: str
    # Every file is an epoch_<N>.pt that the run's last verified push left out: what
    # --without-snapshots gives up, and nothing else is.
    snapshots: bool = False
    size: int = 0  # bytes of `files` as the box listed them (snapshots only)

    @property
    def keys(self) -> frozenset[tuple[str, str]]:
        """What this refusal is about, so a typed override covers exactly what was shown."""
        return frozenset((self.run_path, f) for f in self.files)


@dataclass(frozen=True)
class PushRecord:
    """The files of the last verified push of one run, as the journal has them."""

    at: float
    files: Mapping[str, FileId | None]  # "weights/best.pt" -> identity (None: not exact)
    # The run as the push found it (None where the journal line predates these fields):
    # what "unpushed: 7 epochs" counts from, and whether best.pt improved since.
    epoch: int | None = None
    best_epoch: int | None = None
    best_metric: float | None = None
    destination: str | None = None
    # Set when every verified push of the run was written over since by another run's push
    # to the same destination (runs of one name): who did, and the files vouch for nothing.
    overwritten: str = ""


@dataclass(frozen=True)
class Verdict:
    """What a destroy of one box, looked at now, would lose."""

    unpushed: tuple[Unpushed, ...]
    gaps: tuple[Unpushed, ...]
    live: tuple[str, ...]  # runs whose process lives: their weights will change

    @property
    def blockers(self) -> list[Unpushed]:
        return [*self.gaps, *self.unpushed]

    @property
    def refused(self) -> bool:
        return bool(self.unpushed or self.gaps)

    @property
    def snapshots(self) -> list[Unpushed]:
        """The never-pushed epoch snapshots among the refusals."""
        return [u for u in self.unpushed if u.snapshots]

    @property
    def only_snapshots(self) -> bool:
        """Refused, and for nothing but never-pushed epoch snapshots: best.pt, last.pt and
        the history of every run are the very files of a verified push, the picture whole."""
        return self.refused and not self.gaps and all(u.snapshots for u in self.unpushed)

    def beyond(self, accepted: Iterable[Unpushed]) -> list[Unpushed]:
        """The blockers the user was not shown (and so did not accept losing)."""
        seen: set[tuple[str, str]] = set()
        for item in accepted:
            seen |= item.keys
        return [b for b in self.blockers if not b.keys <= seen]


def _identity(row: Mapping[str, Any]) -> FileId | None:
    size, mtime_ns, inode = (_count(row.get(k)) for k in ("size", "mtime_ns", "inode"))
    if size is None or mtime_ns is None or inode is None:
        return None
    return size, mtime_ns, inode


def _count(value: object) -> int | None:
    """A JSON integer >= 0 as it was written (no float, no bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _when(entry: Mapping[str, Any]) -> float | None:
    at = entry.get("time")
    return None if isinstance(at, bool) or not isinstance(at, int | float) else float(at)


def destination_writers(entries: Iterable[Mapping[str, Any]]
                        ) -> dict[str, list[tuple[float, object, object]]]:
    """Per destination, every push that may have written there: (time, box, run path).

    Any outcome counts once the box listed files (a failed push may have put some of
    them in place); a push that listed nothing wrote nothing."""
    writers: dict[str, list[tuple[float, object, object]]] = {}
    for entry in entries:
        dest, at = entry.get("destination"), _when(entry)
        if entry.get("action") == "push" and isinstance(dest, str) and at is not None \
                and entry.get("files"):
            writers.setdefault(dest, []).append((at, entry.get("box"), entry.get("run_path")))
    return writers


def overwriter(writers: Mapping[str, list[tuple[float, object, object]]], dest: object,
               box: str, run_path: str, at: float) -> str:
    """Who wrote over this run's push at `dest` since `at` ("" when nobody did)."""
    for when, other_box, other_path in writers.get(dest, ()) if isinstance(dest, str) else ():
        if when >= at and (other_box, other_path) != (box, run_path):
            return f"run {other_path} of box {other_box}"
    return ""


def last_verified_pushes(entries: Iterable[Mapping[str, Any]], box: str
                         ) -> dict[str, PushRecord]:
    """Per run path, the latest push of `box` that was done and verified and that no
    other run's push has written over since (runs of one name pushed to one place)."""
    entries = list(entries)
    writers = destination_writers(entries)
    found: dict[str, PushRecord] = {}
    for entry in entries:
        if (entry.get("box") != box or entry.get("action") != "push"
                or entry.get("outcome") != "done" or entry.get("verified") is not True):
            continue
        files: dict[str, FileId | None] = {}
        rows = entry.get("files")
        for f in rows if isinstance(rows, list) else ():
            if isinstance(f, Mapping) and isinstance(f.get("name"), str):
                files[f["name"]] = _identity(f)
        run_path = entry.get("run_path")
        at = _when(entry)
        if at is None or not isinstance(run_path, str) or not run_path:
            continue  # a hand-edited or foreign line: not a push we can vouch for
        dest = entry.get("destination")
        record = PushRecord(at, files, whole(entry.get("epoch")),
                            whole(entry.get("best_epoch")), finite(entry.get("best_metric")),
                            dest if isinstance(dest, str) else None,
                            overwriter(writers, dest, box, run_path, at))
        held = found.get(run_path)
        # A push still in place beats any overwritten one; else the latest wins.
        if held is None or (not record.overwritten, record.at) >= \
                (not held.overwritten, held.at):
            found[run_path] = record
    for run_path, record in found.items():
        if record.overwritten:
            found[run_path] = dataclasses.replace(record, files={})
    return found


def _alive(run: RunState) -> bool:
    return run.pid_alive is True and run.health in (Health.RUNNING, Health.STALLED)


def guarded_files(run: RunState) -> list[tuple[str, WeightFile]]:
    """Every file of the run a destroy would lose and a push keeps, by its name in the
    run: best.pt and last.pt, the run's history (status.json, metrics.jsonl, train.log,
    train_config.yaml, results.csv, summary.json), then every epoch_<N>.pt."""
    epochs = sorted((w for w in run.weights if w.epoch is not None),
                    key=lambda w: (w.epoch, w.name))
    return [*((f"weights/{w.name}", w) for w in run.weights if w.name in GUARDED),
            *((f.name, f) for f in run.files),
            *((f"weights/{w.name}", w) for w in epochs)]


def _short(names: Iterable[str]) -> str:
    """`last.pt, status.json and 7 epoch snapshots`: epoch_<N>.pt files counted, not named
    (a run's row naming each ran over three lines; the refusal's file list names them)."""
    names = [n.removeprefix("weights/") for n in names]
    epochs = [n for n in names if epoch_of(n) is not None]
    if len(epochs) < 2:
        return ", ".join(names)
    others = [n for n in names if epoch_of(n) is None]
    counted = f"{len(epochs)} epoch snapshots"
    return f"{', '.join(others)} and {counted}" if others else counted


def unpushed_weights(runs: Iterable[RunState], pushes: Mapping[str, PushRecord]
                     ) -> list[Unpushed]:
    """Every run with a file (checkpoint or history) on the box that is not the very file
    of its last verified push."""
    out = []
    for run in runs:
        live = (": its training process is alive, so they will change again"
                if _alive(run) else "")
        taken = {id(w) for _, w in guarded_files(run)}
        stray = tuple(f"weights/{w.name}" for w in run.weights if id(w) not in taken)
        if stray:  # best_ema.pt, model.pt: lost with the box, and no push can save them
            out.append(Unpushed(run.name, run.path, stray,
                                "no push takes these (only best.pt, last.pt and "
                                "epoch_<N>.pt): copy them into a run's weights under one of "
                                f"those names, or they are lost with the box{live}"))
        files = guarded_files(run)
        if not files:
            continue
        names = tuple(name for name, _ in files)
        record = pushes.get(run.path)
        if record is None:
            out.append(Unpushed(run.name, run.path, names, f"never pushed{live}"))
            continue
        if record.overwritten:
            out.append(Unpushed(run.name, run.path, names,
                                f"its verified push to {clean(record.destination or '')} "
                                f"was since overwritten by a push of "
                                f"{clean(record.overwritten)}: push again{live}"))
            continue
        missing, changed, inexact = [], [], []
        for name, file in files:
            if name not in record.files:
                missing.append(name)
                continue
            pushed = record.files[name]
            now = (file.size, file.mtime_ns, file.inode)
            if pushed is None or file.mtime_ns is None or file.inode is None:
                inexact.append(name)
            elif pushed != now:
                changed.append(name)
        snapshots = [n for n in missing if n.startswith("weights/epoch_")]
        missing = [n for n in missing if n not in snapshots]
        if missing or changed or inexact:
            words = []
            if changed:
                words.append(f"{_short(changed)} changed since the last verified push")
            if missing:
                words.append(f"{_short(missing)} not in the last verified push")
            if inexact:
                words.append(f"{_short(inexact)}: the push on record or the box's listing "
                             "lacks the file's exact identity (size, mtime_ns, inode): push "
                             "again")
            out.append(Unpushed(run.name, run.path, tuple(changed + missing + inexact),
                                "; ".join(words) + live))
        if snapshots:
            sizes = dict(files)
            out.append(Unpushed(run.name, run.path, tuple(snapshots),
                                f"never pushed: epoch snapshots go with push --epochs{live}",
                                snapshots=True, size=sum(sizes[n].size for n in snapshots)))
    return out


def picture_gaps(state: BoxState) -> list[Unpushed]:
    """Why the panel's look at the box cannot be trusted to show every checkpoint."""
    gaps: list[Unpushed] = []

    def gap(place: str, why: str, run_path: str = "") -> None:
        gaps.append(Unpushed(PICTURE, run_path, (place,), why))

    if state.connection is not Connection.OK and state.rest is not None:
        # Put to rest on purpose: said as its header says it, never "unreachable".
        gap("the box", f"the box is {state.rest.words()}: what its disk holds cannot be "
                       "seen until it is started again")
        return gaps
    if state.connection is not Connection.OK:
        gap("the box", f"the box cannot be seen now ({state.connection}: {state.error})")
        return gaps
    for problem in state.root_problems:
        root, _, why = problem.partition(": ")
        gap(root, f"{why or problem} (an unmounted volume? runs there would be lost unseen)")
    if state.truncated:
        gap("the search", "the search for runs was cut short (more runs or folders than the "
                          "probe visits): runs past the cut are not seen")
    for hidden in state.hidden:
        place, _, why = hidden.partition(": ")
        gap(place, why or "not searched")
    for run in state.runs:
        if run.weights_error:
            gap(f"{run.name}/weights", f"the weights folder could not be listed "
                                       f"({run.weights_error})", run.path)
        folders = weight_folders(run)
        if folders:
            gaps.append(Unpushed(run.name, run.path, folders, FOLDER_GAP))
    return gaps


FOLDER_GAP = ("a folder in weights/ no push takes, nor the panel looks into: a destroy would "
              "lose what it holds; move its checkpoints out of it, or remove it")


def weight_folders(run: RunState) -> tuple[str, ...]:
    """`weights/old/` for each folder in the run's weights/, then `N more folders in
    weights/` for those the box only counted: the places a forced destroy journals."""
    more = (f"{run.weight_dirs_more} more folder{'' if run.weight_dirs_more == 1 else 's'} "
            "in weights/",) if run.weight_dirs_more else ()
    return (*(f"weights/{name}/" for name in run.weight_dirs), *more)


def verdict(state: BoxState, pushes: Mapping[str, PushRecord]) -> Verdict:
    """The guard's answer for one fresh look at a box."""
    return Verdict(tuple(unpushed_weights(state.runs, pushes)), tuple(picture_gaps(state)),
                   tuple(run.name for run in state.runs if _alive(run)))


def snapshot_count(snapshots: Sequence[Unpushed]) -> str:
    """`2 epoch snapshots (1.3 GB)`: what --without-snapshots gives up."""
    count = sum(len(u.files) for u in snapshots)
    size = human_bytes(sum(u.size for u in snapshots))
    return f"{count} epoch snapshot{'' if count == 1 else 's'} ({size})"


def snapshot_words(snapshots: Sequence[Unpushed]) -> str:
    """`2 epoch snapshots (1.3 GB) were never pushed`."""
    one = sum(len(u.files) for u in snapshots) == 1
    return f"{snapshot_count(snapshots)} {'was' if one else 'were'} never pushed"


def describe(blockers: Sequence[Unpushed]) -> str:
    """The refusals on one line each, for a report or the journal."""
    return "; ".join(f"{b.run}: {', '.join(b.files)} ({b.reason})" for b in blockers)


def push_note(run: RunState, pushes: Mapping[str, PushRecord], now: float) -> str | None:
    """`pushed 3m ago, verified` or `best.pt changed since last push`, for the run's row,
    then the folders in its weights/ that no push takes, if any."""
    words = [w for w in (_push_words(run, pushes, now),
                         folder_words(run.weight_dirs, run.weight_dirs_more)) if w]
    return "; ".join(words) or None


def _push_words(run: RunState, pushes: Mapping[str, PushRecord], now: float) -> str | None:
    record = pushes.get(run.path)
    if record is None:
        return None
    stale = unpushed_weights([run], pushes)
    if stale and not stale[0].snapshots:
        return stale[0].reason
    note = f"pushed {format_age(now - record.at)} ago, verified"
    if stale:  # best.pt, last.pt and the history are verified; the snapshots were left out
        count = len(stale[0].files)
        return f"{note}; {count} epoch snapshot{'' if count == 1 else 's'} never pushed"
    return note
