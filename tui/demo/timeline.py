"""Re-timing a recorded run onto the demo's clock: pure functions, no I/O.

A recording keeps LibreYOLO's own bytes; only what depends on when and where
the run happened is rewritten: started_at, updated_at, elapsed, epoch times,
mean and ETA (from a seeded, jittered schedule), the pid, and the paths. Every
time is a plain float (epoch seconds) passed in, so tests drive these with any
clock they like.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from tui.demo.recording import Recording

JITTER = 0.2  # each epoch takes its recorded share of the pace, +-20%
RATIO_BOUNDS = (0.5, 2.0)  # an epoch lasts 0.5x to 2x the pace (the first one is slow)
_LOG_STAMP = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)
# Columns of a metrics.jsonl row that are not a loss item, a learning rate or a metric.
ROW_KEYS = ("epoch", "time", "train/loss", "validated", "is_best", "current_metric",
            "current_metric_name", "best_metric", "best_metric_name", "best_epoch")


@dataclass(frozen=True)
class Timing:
    """When each phase of one replayed run happens on the demo clock."""

    started: float
    times: tuple[float, ...]  # one per phase: status.json written
    epoch_seconds: tuple[float, ...]  # epoch N lasted epoch_seconds[N - 1]
    scale: float  # demo seconds per recorded second (for gaps between epochs)

    def shifted(self, delta: float) -> Timing:
        return replace(self, started=self.started + delta,
                       times=tuple(t + delta for t in self.times))

    def since_start(self, index: int) -> float:
        return self.times[index] - self.started


def plan_timing(rec: Recording, started: float, pace: float, seed: int) -> Timing:
    """A schedule with a mean of `pace` seconds an epoch that keeps the recording's shape.

    Slow epochs (the first, the validating ones) stay slower than the rest,
    within RATIO_BOUNDS, and a seeded jitter keeps two replays of one
    recording from moving in lockstep. The same seed gives the same schedule.
    """
    recorded = rec.epoch_times
    mean = sum(recorded) / len(recorded)
    scale = pace / mean
    rng = random.Random(seed)
    low, high = RATIO_BOUNDS
    times = [started]
    seconds: list[float] = []
    for before, phase in zip(rec.phases, rec.phases[1:], strict=False):
        gap = phase.t - before.t
        if phase.kind == "epoch" and phase.epoch is not None:
            took = recorded[phase.epoch - 1]
            ratio = min(max(took / mean, low), high) * (1 + rng.uniform(-JITTER, JITTER))
            seconds.append(pace * ratio)
            overhead = min(max(gap - took, 0.0), mean) * scale  # checkpoints, validation
            times.append(times[-1] + seconds[-1] + overhead)
        else:
            times.append(times[-1] + min(max(gap, 0.0), mean) * scale)
    return Timing(started, tuple(times), tuple(seconds), scale)


def started_for(timing: Timing, index: int, at: float) -> float:
    """The start time that puts phase `index` of this schedule at time `at`."""
    return at - timing.since_start(index)


def iso_utc(stamp: float) -> str:
    """LibreYOLO's timestamps: UTC, whole seconds, with an offset."""
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def substitute(text: str, pairs: Sequence[tuple[str, str]]) -> str:
    """Replace recorded paths by the demo's, longest first, in one pass."""
    pairs = [(old, new) for old, new in pairs if old]
    if not pairs:
        return text
    table = dict(pairs)
    pattern = re.compile("|".join(re.escape(old) for old in sorted(table, key=len, reverse=True)))
    return pattern.sub(lambda m: table[m.group(0)], text)


def substitute_all(value: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """`substitute` through a JSON value (status.json, summary.json)."""
    if isinstance(value, str):
        return substitute(value, pairs)
    if isinstance(value, Mapping):
        return {k: substitute_all(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_all(v, pairs) for v in value]
    return value


def retime_status(rec: Recording, timing: Timing, index: int, *, pid: int,
                  paths: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The status.json LibreYOLO would have written at phase `index` of this schedule."""
    phase = rec.phases[index]
    status: dict[str, Any] = substitute_all(dict(phase.status), paths)
    now = timing.times[index]
    status["pid"] = pid
    status["started_at"] = iso_utc(timing.started)
    status["updated_at"] = iso_utc(now)
    elapsed = now - timing.started
    if phase.kind == "failed":
        status["elapsed_seconds"] = elapsed  # LibreYOLO passes the trainer's float through
    elif "elapsed_seconds" in status:
        status["elapsed_seconds"] = round(elapsed, 3)
    if phase.kind == "epoch" and phase.epoch is not None:
        done = timing.epoch_seconds[:phase.epoch]
        mean = sum(done) / len(done)
        status["epoch_seconds"] = done[-1]
        status["mean_epoch_seconds"] = mean
        status["eta_seconds"] = mean * max(rec.total_epochs - phase.epoch, 0)
    if "total_seconds" in status:
        recorded = phase.status
        extra = float(recorded["total_seconds"]) - float(recorded.get("elapsed_seconds") or 0)
        status["total_seconds"] = elapsed + max(extra, 0.0) * timing.scale
    return status


def retime_metrics_line(line: str, seconds: float) -> str:
    """A metrics.jsonl row as LibreYOLO writes it, with the epoch's time replaced."""
    row = json.loads(line)
    row["time"] = seconds
    return json.dumps(row, allow_nan=False)


def log_stamp(stamp: float) -> bytes:
    """train.log's asctime: local time, whole seconds (logging's default clock)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)).encode()


def retime_log(segment: bytes, begin: float, end: float,
               paths: Sequence[tuple[str, str]]) -> bytes:
    """A slice of train.log with its line stamps spread evenly over [begin, end]."""
    lines = segment.splitlines(keepends=True)
    out = []
    for number, line in enumerate(lines, 1):
        stamp = begin + (end - begin) * number / len(lines)
        # A bytes template: log_stamp is digits, dashes, colons and a space, no escapes.
        line = _LOG_STAMP.sub(log_stamp(stamp), line, count=1)
        out.append(line)
    return substitute(b"".join(out).decode("utf-8", "replace"), paths).encode()


def rename_yaml(text: str, old: str, new: str) -> str:
    """train_config.yaml names the run on a `name:` line of its own."""
    return re.sub(rf"^name: {re.escape(old)}$", f"name: {new}", text, flags=re.MULTILINE)


def _csv_value(value: Any) -> Any:
    """LibreYOLO's results.csv cells: None and non-finite as "", booleans as 0/1."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return int(value)
    return value


def results_csv(rec: Recording, epochs: int, epoch_seconds: Sequence[float]) -> bytes:
    """results.csv after `epochs` epochs, rebuilt from the metrics rows with the demo's times.

    The recorder checks that LibreYOLO only appended to it (its columns were
    all there from the first epoch) and that this rebuild matches its bytes.
    """
    if rec.results_csv is None or epochs <= 0:
        return b""
    header = next(csv.reader(io.StringIO(rec.results_csv.decode())))
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=header)
    writer.writeheader()
    for row, seconds in zip(rec.rows[:epochs], epoch_seconds, strict=False):
        writer.writerow({k: _csv_value(v) for k, v in {**row, "time": seconds}.items()})
    return out.getvalue().encode()


def _loss_items(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k.removeprefix("train/").removesuffix("_loss"): v for k, v in row.items()
            if k.startswith("train/") and k != "train/loss"}


def _val_metrics(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items()
            if k not in ROW_KEYS and not k.startswith(("train/", "lr/"))}


def summary_document(rec: Recording, epoch_seconds: Iterable[float], total_seconds: float,
                     paths: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """summary.json (families that write it) rebuilt from the metrics rows.

    The recording keeps summary.json without its per-epoch lists, which
    repeat metrics.jsonl; the recorder checks that this rebuild gives back
    exactly what LibreYOLO wrote.
    """
    if rec.summary_template is None:
        return None
    doc: dict[str, Any] = substitute_all(dict(rec.summary_template), paths)
    results = dict(doc["results"])
    rows = rec.rows
    base = {k: doc[k] for k in ("model_family", "model_size", "save_dir", "task", "total_epochs")}
    lrs = [{k.removeprefix("lr/"): v for k, v in r.items() if k.startswith("lr/")} for r in rows]
    epoch_metrics = []
    for row, lr, seconds in zip(rows, lrs, epoch_seconds, strict=True):
        entry = {k: row[k] for k in ("best_epoch", "best_metric", "best_metric_name",
                                     "current_metric", "current_metric_name", "epoch",
                                     "is_best", "validated")}
        entry.update(base, epoch_seconds=seconds, lr=lr, train_loss=row["train/loss"],
                     train_loss_items=_loss_items(row), val_metrics=_val_metrics(row))
        epoch_metrics.append(entry)
    results.update(
        epoch_losses=[r["train/loss"] for r in rows], epoch_lrs=lrs,
        epoch_loss_items=[_loss_items(r) for r in rows],
        val_metrics=[_val_metrics(r) for r in rows], epoch_metrics=epoch_metrics)
    doc.update(results=results, logged_epochs=[r["epoch"] for r in rows],
               total_seconds=total_seconds)
    return doc
