"""Writing recorded runs into run directories as their phases fall due on the demo clock.

The files come out as LibreYOLO writes them: status.json replaced atomically
(tmp file + os.replace), metrics.jsonl and train.log appended line by line,
results.csv appended, summary.json at the end, and weights/last.pt, best.pt,
epoch_<N>.pt as small placeholders (not checkpoints) with the right names.
All the time arithmetic lives in tui.demo.timeline and tui.demo.scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tui.demo.recording import Recording
from tui.demo.scenario import BoxSpec, LaneSpec, Mode, cycle_name, gpu_lines
from tui.demo.timeline import (
    Timing,
    plan_timing,
    rename_yaml,
    results_csv,
    retime_log,
    retime_metrics_line,
    retime_status,
    substitute,
    summary_document,
)
from tui.demo.utilization import utilization_text

PLACEHOLDER_BYTES = 4096
KEEP_FINISHED = 1  # finished runs of a live lane kept on disk besides the current one
TICK_SECONDS = 1.0  # the GPU readings change at least this often


def write_json_atomic(path: Path, value: Any) -> None:
    """Like LibreYOLO: a tmp file in the same directory, then os.replace."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent, text=True)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f, allow_nan=False, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def placeholder(run: str, name: str, epoch: int | None) -> bytes:
    """A few KB standing in for a checkpoint: right name, says what it is."""
    text = (f"gpurent-tui demo placeholder for a LibreYOLO checkpoint (not a real one)\n"
            f"run: {run}\nfile: weights/{name}\nepoch: {epoch}\n")
    data = text.encode()
    return data + b"#" * max(PLACEHOLDER_BYTES - len(data) - 1, 0) + b"\n"


class RunReplay:
    """One recorded run replayed into `run_dir` on the schedule `timing`.

    `last_phase` cuts the replay short: a run whose process hung or was
    killed writes nothing after that phase, exactly as LibreYOLO would not.
    """

    def __init__(self, rec: Recording, run_dir: Path, timing: Timing, *, pid: int,
                 data_dir: str, last_phase: int | None = None) -> None:
        self.rec = rec
        self.run_dir = run_dir
        self.timing = timing
        self.pid = pid
        self.last = len(rec.phases) - 1 if last_phase is None else last_phase
        self.applied = 0
        self.paths = [(rec.save_dir, str(run_dir)), (rec.project, str(run_dir.parent)),
                      (rec.data_dir, data_dir)]

    @property
    def finished(self) -> bool:
        return self.applied > self.last

    @property
    def started(self) -> bool:
        return self.applied > 0

    @property
    def next_time(self) -> float | None:
        return None if self.finished else self.timing.times[self.applied]

    @property
    def end_time(self) -> float:
        return self.timing.times[self.last]

    def advance(self, now: float) -> int:
        """Write every phase due by `now`; returns how many were written."""
        count = 0
        while not self.finished and self.timing.times[self.applied] <= now:
            self._apply(self.applied)
            self.applied += 1
            count += 1
        return count

    def _apply(self, index: int) -> None:
        rec, run, phase = self.rec, self.run_dir, self.rec.phases[index]
        when = self.timing.times[index]
        (run / "weights").mkdir(parents=True, exist_ok=True)
        touched: list[Path] = []
        for name, text in rec.texts.items():
            path = run / name
            if name in phase.files and not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                text = substitute(text, self.paths)
                if name == "train_config.yaml":
                    text = rename_yaml(text, rec.name, run.name)
                path.write_text(text)
                touched.append(path)
        before = rec.phases[index - 1].log if index else 0
        if phase.log > before:
            begin = self.timing.times[index - 1] if index else when
            append(run / "train.log",
                   retime_log(rec.log[before:phase.log], begin, when, self.paths))
            touched.append(run / "train.log")
        touched += self._weights(index)
        epoch = phase.epoch if phase.kind == "epoch" else None
        if epoch is not None and phase.results is not None:
            done = results_csv(rec, epoch, self.timing.epoch_seconds)
            path = run / "results.csv"
            have = path.stat().st_size if path.exists() else 0
            append(path, done[have:])
            touched.append(path)
        if epoch is not None:
            line = retime_metrics_line(rec.metrics_lines[epoch - 1],
                                       self.timing.epoch_seconds[epoch - 1])
            append(run / "metrics.jsonl", (line + "\n").encode())
            touched.append(run / "metrics.jsonl")
        status = retime_status(rec, self.timing, index, pid=self.pid, paths=self.paths)
        if "summary.json" in phase.files and not (run / "summary.json").exists():
            summary = summary_document(rec, self.timing.epoch_seconds,
                                       status.get("total_seconds", 0.0), self.paths)
            if summary is not None:
                write_json_atomic(run / "summary.json", summary)
                touched.append(run / "summary.json")
        write_json_atomic(run / "status.json", status)
        touched.append(run / "status.json")
        for path in touched:
            os.utime(path, (when, when))  # a fast-forwarded phase looks as old as it is

    def _weights(self, index: int) -> list[Path]:
        """last.pt every epoch, best.pt when it improved, epoch_<N>.pt when it appears."""
        phase = self.rec.phases[index]
        improved = False
        if phase.kind == "epoch" and phase.epoch is not None:
            improved = bool(self.rec.rows[phase.epoch - 1].get("is_best"))
        written = []
        for name in phase.weights:
            path = self.run_dir / "weights" / name
            fresh = not path.exists()
            if fresh or (phase.kind == "epoch" and name == "last.pt") \
                    or (name == "best.pt" and improved):
                path.write_bytes(placeholder(self.run_dir.name, name, phase.epoch))
                written.append(path)
        return written


class Lane:
    """The runs of one lane: the current replay, and a fresh run after a live one ends."""

    def __init__(self, spec: LaneSpec, rec: Recording, runs_root: Path, data_dir: str,
                 first: Timing, *, pid: int, live_pid: int, last_phase: int | None) -> None:
        self.spec = spec
        self.rec = rec
        self.runs_root = runs_root
        self.data_dir = data_dir
        self.live_pid = live_pid
        self.cycle = 1
        self.replay = RunReplay(rec, runs_root / cycle_name(spec, 1), first, pid=pid,
                                data_dir=data_dir, last_phase=last_phase)
        self.restart_at: float | None = None
        self.finished_dirs: list[Path] = []
        self.halted = False
        self.halted_at: float | None = None
        self.previous: RunReplay | None = None  # the run before this one, for gpu_state_at
        self.cut_short = False  # the box went down while the current run trained

    def halt(self, dead_pid: int, at: float) -> None:
        """The box went down (stopped, powered off, destroyed): its training process died.

        Nothing more is written, no new run starts, and a run that was running
        names a pid that is gone, as LibreYOLO's status.json would after the
        box came back.
        """
        self.halted, self.halted_at = True, at
        replay = self.replay
        if not replay.finished:
            self.cut_short = True
            replay.last = replay.applied - 1
        status_path = replay.run_dir / "status.json"
        try:
            status = json.loads(status_path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(status, dict) and status.get("state") == "running":
            stat = status_path.stat()
            write_json_atomic(status_path, {**status, "pid": dead_pid})
            os.utime(status_path, (stat.st_atime, stat.st_mtime))  # written no later

    def step(self, now: float) -> float | None:
        """Write what is due; returns when this lane next has something to do."""
        if self.halted:
            return None
        self.replay.advance(now)
        spec = self.spec
        if self.replay.finished and spec.mode is Mode.LIVE and spec.repeat_after is not None:
            if self.restart_at is None:
                self.restart_at = self.replay.end_time + spec.repeat_after
            if now < self.restart_at:
                return self.restart_at
            self._restart(self.restart_at)
            self.replay.advance(now)
        return self.replay.next_time

    def _restart(self, at: float) -> None:
        self.finished_dirs.append(self.replay.run_dir)
        while len(self.finished_dirs) > KEEP_FINISHED:
            shutil.rmtree(self.finished_dirs.pop(0), ignore_errors=True)
        self.cycle += 1
        self.previous = self.replay
        timing = plan_timing(self.rec, at, self.spec.pace, self.spec.seed + self.cycle)
        self.replay = RunReplay(self.rec, self.runs_root / cycle_name(self.spec, self.cycle),
                                timing, pid=self.live_pid, data_dir=self.data_dir)
        self.restart_at = None

    def gpu_state(self) -> str | None:
        """What this lane's GPU is doing: training, held by a hung process, or idle."""
        if self.spec.gpu is None or not self.replay.started or self.halted:
            return None
        if not self.replay.finished:
            return "train"
        return "hung" if self.spec.mode is Mode.HUNG else None

    def gpu_state_at(self, t: float) -> str | None:
        """What this lane's GPU was doing at `t` (now or up to the driver's 14 s before):
        as gpu_state says at now, from the runs' schedules, which say when each trained;
        nothing from the moment the box went down."""
        if self.spec.gpu is None or (self.halted_at is not None and t >= self.halted_at):
            return None
        for replay in (self.replay, self.previous):
            if replay is None or t < replay.timing.times[0]:
                continue
            end = replay.end_time
            if replay is self.replay and self.cut_short and self.halted_at is not None:
                end = self.halted_at  # it trained until the box went down
            if t < end:
                return "train"
            return "hung" if self.spec.mode is Mode.HUNG else None
        return None


class Replayer:
    """Drives every lane of the fleet from one task, and each box's nvidia-smi readings:
    its csv rows and its driver's utilisation average (`-q -d UTILIZATION`)."""

    def __init__(self, lanes: Sequence[Lane],
                 gpu_files: Sequence[tuple[BoxSpec, Path, Path]],
                 clock: Callable[[], float] = time.time) -> None:
        """`gpu_files`: per box, where its rows and its utilisation answer are written."""
        self.lanes = list(lanes)
        self.gpu_files = list(gpu_files)
        self.clock = clock

    def step(self) -> float:
        """Write everything due now; returns the seconds until the next thing is due."""
        now = self.clock()
        wakes = [w for w in (lane.step(now) for lane in self.lanes) if w is not None]
        for box, rows_path, util_path in self.gpu_files:
            busy = {lane.spec.gpu: state for lane in self.lanes
                    if lane.spec.box == box.name and (state := lane.gpu_state()) is not None
                    and lane.spec.gpu is not None}
            write_text_atomic(rows_path,
                              "".join(f"{row}\n" for row in gpu_lines(box, busy, now)))
            write_text_atomic(util_path, self._utilization(box, now))
        return max(0.0, min([now + TICK_SECONDS, *wakes]) - now)

    def _utilization(self, box: BoxSpec, now: float) -> str:
        """The box's `-q -d UTILIZATION` answer at `now`: its GPUs over the last 14 s, or
        since the box came back from a stop (its driver's samples began afresh)."""
        lanes = [lane for lane in self.lanes if lane.spec.box == box.name]

        def states(t: float) -> dict[int, str]:
            return {lane.spec.gpu: state for lane in lanes if lane.spec.gpu is not None
                    and (state := lane.gpu_state_at(t)) is not None}

        since = max((lane.halted_at for lane in lanes if lane.halted_at is not None),
                    default=None)
        return utilization_text(box, states, now, since)

    def halt_box(self, box: str, dead_pid: int) -> None:
        """Every lane of `box` stops: the box went down and took its runs' processes."""
        at = self.clock()
        for lane in self.lanes:
            if lane.spec.box == box:
                lane.halt(dead_pid, at)

    async def run(self) -> None:
        """Step forever; cancel the task to stop."""
        while True:
            await asyncio.sleep(max(self.step(), 0.02))
