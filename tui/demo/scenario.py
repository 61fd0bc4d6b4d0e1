"""What the demo fleet shows: three boxes and the runs on them. Pure: data and arithmetic.

Every health appears at start: running (several, at different epochs),
completed and failed (finished a while ago), stalled (a run that stopped
writing 14 minutes ago while its process lives), dead (a run whose process
is gone). Live runs start over under a new name a little after they end.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tui.demo.procs import PID_START_MARGIN
from tui.demo.recording import YOLO9_25, YOLOX_40, YOLOX_FAILED, Recording
from tui.demo.timeline import Timing, plan_timing, started_for
from tui.model.runs import STALL_EPOCHS, STALL_FLOOR_SECONDS

JUMP_NAME = "bastion"
# What check, doctor, monitor and profile say on a demo box, instead of trying: one calm
# line.
STAND_IN = ("a demo box replays recorded runs: it has no torch or LibreYOLO of its own "
            "(`gpurent-tui demo --real` trains a real run)")
REFRESH_SECONDS = 2.0


@dataclass(frozen=True)
class Gpu:
    name: str
    mem_total_mib: float
    idle_w: float
    busy_w: float


RTX_4090 = Gpu("NVIDIA GeForce RTX 4090", 24564.0, 21.0, 410.0)
A100_80 = Gpu("NVIDIA A100-SXM4-80GB", 81920.0, 62.0, 365.0)
RTX_3090 = Gpu("NVIDIA GeForce RTX 3090", 24576.0, 19.0, 330.0)


@dataclass(frozen=True)
class BoxSpec:
    """One demo box, its GPUs and prices: what the demo provider API reports for it
    (the fleet config carries only what no API knows: rebuild cost, a manual box's rate)."""

    name: str
    provider: str
    gpus: tuple[Gpu, ...]
    instance_id: str | None = None
    pricing: Mapping[str, float] = field(default_factory=dict)
    via_jump: bool = False
    hub_push: bool = False  # pushes go to the loopback Hub too, not only to a local folder
    # Seconds a marketplace rents the box's GPUs to someone else once it is stopped:
    # a start meanwhile fails for lack of a GPU.
    rented_out_for: float = 0.0
    stop_command: str | None = None  # a manual box: how `s` stops it (over SSH)


class Mode(StrEnum):
    LIVE = "live"  # runs now; starts over `repeat_after` seconds after it ends
    DONE = "done"  # finished `ago` seconds before the demo started
    HUNG = "hung"  # stopped writing after `stop_epoch`, `ago` seconds ago; its process lives
    KILLED = "killed"  # stopped after `stop_epoch`, `ago` seconds ago; its process is gone


@dataclass(frozen=True)
class LaneSpec:
    """A sequence of runs in one place on one box, replayed from one recording."""

    box: str
    name: str
    recording: str
    mode: Mode
    pace: float  # mean seconds an epoch
    seed: int
    at_epoch: int = 0
    ago: float = 0.0
    stop_epoch: int | None = None
    repeat_after: float | None = None
    gpu: int | None = None


BOXES = (
    BoxSpec("vast-4090x2", "vast", (RTX_4090, RTX_4090), instance_id="18442117",
            pricing={"running_usd_per_hr": 0.742, "disk_gb": 120, "storage_usd_per_gb_month": 0.15,
                     "rebuild_usd": 0.40}, hub_push=True),
    BoxSpec("runpod-a100", "runpod", (A100_80,), instance_id="k7v2q9x1dm3n0p",
            pricing={"running_usd_per_hr": 1.19, "disk_gb": 200, "rebuild_usd": 1.50},
            rented_out_for=90.0),
    BoxSpec("lab-3090", "manual", (RTX_3090,), pricing={"running_usd_per_hr": 0.09},
            via_jump=True, stop_command="sudo poweroff"),
)
HUB_REPO = "demo/rects-checkpoints"  # the loopback Hub's one repo

LANES = (
    LaneSpec("vast-4090x2", "rects-yolox-n", YOLOX_40, Mode.LIVE, 2.0, 11, at_epoch=23,
             repeat_after=8.0, gpu=0),
    LaneSpec("vast-4090x2", "rects-yolo9-t", YOLO9_25, Mode.LIVE, 2.6, 12, at_epoch=4,
             repeat_after=8.0, gpu=1),
    LaneSpec("vast-4090x2", "baseline-yolox-n", YOLOX_40, Mode.DONE, 96.0, 13, ago=3 * 3600.0),
    LaneSpec("runpod-a100", "sweep-yolo9-t-lr02", YOLO9_25, Mode.LIVE, 1.6, 21, at_epoch=14,
             repeat_after=8.0, gpu=0),
    LaneSpec("runpod-a100", "sweep-yolox-n-lr01", YOLOX_40, Mode.HUNG, 41.0, 22, ago=14 * 60.0,
             stop_epoch=17),
    LaneSpec("runpod-a100", "mosaic-off-yolox-n", YOLOX_FAILED, Mode.DONE, 64.0, 23,
             ago=47 * 60.0),
    LaneSpec("lab-3090", "smoke-yolox-n", YOLOX_40, Mode.LIVE, 1.2, 31, at_epoch=3,
             repeat_after=8.0, gpu=0),
    # Fails once, a while into the demo (one alert); a lane that failed again every half
    # minute under a new name raised an alert each time, and read as a broken demo.
    LaneSpec("lab-3090", "aug-test-yolox-n", YOLOX_FAILED, Mode.LIVE, 2.4, 32, at_epoch=1),
    LaneSpec("lab-3090", "night-yolo9-t", YOLO9_25, Mode.KILLED, 33.0, 33, ago=50.0,
             stop_epoch=11),
)


def last_phase(rec: Recording, lane: LaneSpec) -> int | None:
    """The last phase a lane's first run writes (None: all of them)."""
    if lane.mode in (Mode.HUNG, Mode.KILLED) and lane.stop_epoch is not None:
        return rec.phase_of_epoch(lane.stop_epoch)
    return None


def first_timing(rec: Recording, lane: LaneSpec, now: float, *,
                 own_start: float | None = None, keeper_start: float | None = None) -> Timing:
    """The schedule of a lane's first run, placed so the demo opens where the lane says.

    A live run has just passed `at_epoch`; a finished, hung or killed one
    wrote its last phase `ago` seconds before `now`. Runs whose pid is a real
    process never start more than PID_START_MARGIN before that process did,
    or the probe would take the pid for a reused one and call the run dead:
    a hung run whose keeper process is too young stalls later instead.
    """
    rel = plan_timing(rec, 0.0, lane.pace, lane.seed)
    if lane.mode is Mode.LIVE:
        index = rec.phase_of_epoch(lane.at_epoch) if lane.at_epoch else 0
        started = started_for(rel, index, now - 0.3 * lane.pace)
        floor = own_start
    else:
        last = last_phase(rec, lane)
        index = len(rec.phases) - 1 if last is None else last
        started = started_for(rel, index, now - lane.ago)
        floor = keeper_start if lane.mode is Mode.HUNG else None
    if floor is not None:
        started = max(started, floor - PID_START_MARGIN)
    return rel.shifted(started)


def stalls_at(rec: Recording, lane: LaneSpec, timing: Timing) -> float | None:
    """When a hung lane's run reads as stalled: max(3 x mean epoch, 10 min) after its last write."""
    index = last_phase(rec, lane)
    if lane.mode is not Mode.HUNG or index is None or lane.stop_epoch is None:
        return None
    done = timing.epoch_seconds[:lane.stop_epoch]
    return timing.times[index] + max(STALL_EPOCHS * sum(done) / len(done), STALL_FLOOR_SECONDS)


def cycle_name(lane: LaneSpec, cycle: int) -> str:
    """Run directory of a lane's `cycle`-th run: name, name-2, name-3, ..."""
    return lane.name if cycle <= 1 else f"{lane.name}-{cycle}"


@dataclass(frozen=True)
class GpuReading:
    """One GPU's instantaneous reading on a demo box, as nvidia-smi's csv row prints it."""

    util: float
    mem: float
    temp: float
    power: float


def gpu_readings(box: BoxSpec, busy: Mapping[int, str], now: float) -> list[GpuReading]:
    """A box's GPUs at `now`: training ones are hot, a hung one holds memory idle. One
    reading per REFRESH_SECONDS slot, the same whoever asks (seeded by box and slot)."""
    rng = random.Random(f"{box.name}:{int(now / REFRESH_SECONDS)}")
    out = []
    for index, gpu in enumerate(box.gpus):
        state = busy.get(index)
        if state == "train":
            util, mem = rng.uniform(88, 99), gpu.mem_total_mib * rng.uniform(0.71, 0.74)
            temp, power = rng.uniform(63, 71), gpu.busy_w * rng.uniform(0.86, 0.99)
        elif state == "hung":
            util, mem = 0.0, gpu.mem_total_mib * 0.72
            temp, power = rng.uniform(41, 43), gpu.idle_w * 2.4
        else:
            util, mem = 0.0, 3.0
            temp, power = rng.uniform(33, 36), gpu.idle_w * rng.uniform(0.95, 1.05)
        out.append(GpuReading(util, mem, temp, power))
    return out


def gpu_lines(box: BoxSpec, busy: Mapping[int, str], now: float) -> list[str]:
    """nvidia-smi's csv rows for a box (the probe's --query-gpu) at `now`."""
    return [f"{index}, {gpu.name}, {r.util:.0f}, {r.mem:.0f}, {gpu.mem_total_mib:.0f}, "
            f"{r.temp:.0f}, {r.power:.2f}"
            for index, (gpu, r) in enumerate(zip(box.gpus, gpu_readings(box, busy, now),
                                                  strict=True))]


def fleet_toml(boxes: list[dict[str, Any]], *, known_hosts: str, jump: str,
               provider_urls: Mapping[str, str] | None = None) -> str:
    """The demo's fleet config, as a user would write it (see docs/config.md)."""

    def value(v: object) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = [f"refresh_seconds = {REFRESH_SECONDS}", "timeout_seconds = 10",
             'host_keys = "strict"', f"known_hosts = {value(known_hosts)}", 'ssh_config = ""']
    if provider_urls:
        tables = ", ".join(f"{name} = {{base_url = {value(url)}}}"
                           for name, url in provider_urls.items())
        lines.append(f"providers = {{{tables}}}")
    for box in boxes:
        lines += ["", "[[box]]"]
        subtables = {name: box.pop(name, None) for name in ("pricing", "push")}
        if box.pop("via_jump", False):
            box["jump"] = jump
        lines += [f"{k} = {value(v)}" for k, v in box.items() if v is not None]
        for name, table in subtables.items():
            if table:
                lines += [f"[box.{name}]", *(f"{k} = {value(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"
