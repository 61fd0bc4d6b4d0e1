"""The demo fleet frozen at one instant: BoxStates for screenshots and tests, without SSH.

Pure (no I/O, no Textual, no clock): the same recordings, scenario and
re-timing the live demo replays, folded at a fixed `NOW` into what the probe
would answer (status.json, metrics.jsonl, train.log, weights listing, GPU
rows and the driver's busy average over the last 14 s, disks) and then
through `tui.model.box.fold_answer`, so a still goes through exactly the code
the live panel uses. Pids and their liveness are
fixed instead of borrowed from this machine's processes, which is what makes
two builds identical. Every health is present: running, completed, failed,
stalled (the hung lane, 14 minutes silent) and dead (the killed lane).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tui.demo.fleet import BOXES_UP_FOR
from tui.demo.providers import demo_runpod_pod, demo_vast_instance
from tui.demo.recording import Recording, load_recording
from tui.demo.replay import PLACEHOLDER_BYTES
from tui.demo.scenario import (
    BOXES,
    LANES,
    REFRESH_SECONDS,
    BoxSpec,
    LaneSpec,
    Mode,
    first_timing,
    fleet_toml,
    gpu_lines,
    last_phase,
)
from tui.demo.timeline import (
    Timing,
    retime_log,
    retime_metrics_line,
    retime_status,
)
from tui.demo.utilization import States, utilization_text
from tui.model.box import BoxState, fold_answer
from tui.model.config import FleetConfig, parse_config
from tui.model.cost import Event
from tui.model.instance import InstanceInfo
from tui.onbox.probe import parse_util_query
from tui.providers.runpod import runpod_info
from tui.providers.vast import vast_info

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC).timestamp()
RUNS_ROOT = "/root/runs"
DATA_DIR = "/root/data/rects"
BOX_PYTHON = "3.10.12"
LOG_CAP = 16384  # the probe's train.log cap on a first read (tail first)
# Fixed pids: a live run's trainer, the hung run's process (alive, silent) and the
# killed run's (gone). Finished runs keep the pid LibreYOLO recorded; it is gone too.
LIVE_PID = 48213
HUNG_PID = 47760
DEAD_PID = 51377
# Disk of each box's runs root: (total GB, used GB), the vast and runpod ones as rented.
DISKS_GB: Mapping[str, tuple[int, int]] = {
    "vast-4090x2": (120, 47), "runpod-a100": (200, 81), "lab-3090": (1000, 612)}
# The lab workstation has billed its (configured) power rate for this long.
LAB_BILLED_FOR = 26 * 3600.0


def phase_at(rec: Recording, lane: LaneSpec, timing: Timing, now: float) -> int:
    """The last phase of the lane's first run written by `now` (a hung or killed run stops)."""
    last = last_phase(rec, lane)
    last = len(rec.phases) - 1 if last is None else last
    due = [i for i, t in enumerate(timing.times) if t <= now]
    return min(due[-1] if due else 0, last)


def _weights(rec: Recording, timing: Timing, index: int) -> list[list[Any]]:
    """weights/ as listed at phase `index`: each file's mtime is its last write (see replay)."""
    written: dict[str, float] = {}
    for i, phase in enumerate(rec.phases[:index + 1]):
        improved = phase.kind == "epoch" and phase.epoch is not None \
            and bool(rec.rows[phase.epoch - 1].get("is_best"))
        for name in phase.weights:
            if name not in written or (phase.kind == "epoch" and name == "last.pt") \
                    or (name == "best.pt" and improved):
                written[name] = timing.times[i]
    listed = rec.phases[index].weights
    return [[name, PLACEHOLDER_BYTES, written[name]] for name in sorted(listed)]


def _log(rec: Recording, timing: Timing, index: int,
         paths: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """train.log up to phase `index`, as the probe's first read returns it (capped, tail)."""
    chunks = []
    for i in range(index + 1):
        before = rec.phases[i - 1].log if i else 0
        if rec.phases[i].log > before:
            begin = timing.times[i - 1] if i else timing.times[i]
            chunks.append(retime_log(rec.log[before:rec.phases[i].log], begin,
                                     timing.times[i], paths))
    data = b"".join(chunks)
    out: dict[str, Any] = {"off": len(data), "id": "1:2", "head": "l"}
    if len(data) > LOG_CAP:
        tail = data[-LOG_CAP:]
        tail = tail[tail.find(b"\n") + 1:]
        out["skipped"] = len(data) - len(tail)
        data = tail
    out["text"] = data.decode("utf-8", "replace")
    return out


def run_answer(lane: LaneSpec, now: float = NOW) -> dict[str, Any]:
    """The probe's first answer for a lane's run at `now`, with a fixed pid and liveness."""
    rec = load_recording(lane.recording)
    timing = first_timing(rec, lane, now)
    index = phase_at(rec, lane, timing, now)
    run_dir = f"{RUNS_ROOT}/{lane.name}"
    paths = [(rec.save_dir, run_dir), (rec.project, RUNS_ROOT), (rec.data_dir, DATA_DIR)]
    pid, alive = {Mode.LIVE: (LIVE_PID, True), Mode.HUNG: (HUNG_PID, True),
                  Mode.KILLED: (DEAD_PID, False)}.get(
        lane.mode, (int(rec.phases[0].status["pid"]), False))
    epochs = [p.epoch for p in rec.phases[:index + 1] if p.kind == "epoch" and p.epoch]
    metrics = "".join(retime_metrics_line(rec.metrics_lines[e - 1], timing.epoch_seconds[e - 1])
                      + "\n" for e in epochs)
    return {
        "path": run_dir, "root": RUNS_ROOT, "name": lane.name, "s_sig": f"s{index}",
        "status": retime_status(rec, timing, index, pid=pid, paths=paths),
        "metrics": {"text": metrics, "off": len(metrics.encode()), "id": "1:1", "head": "m"},
        "log": _log(rec, timing, index, paths),
        "w_sig": f"w{index}", "weights": _weights(rec, timing, index),
        "pid_alive": alive,
    }


def gpu_busy(box: BoxSpec, now: float = NOW) -> dict[int, str]:
    """Which GPUs train (a live run in progress) or are held by a hung process, as replay says."""
    busy: dict[int, str] = {}
    for lane in LANES:
        if lane.box != box.name or lane.gpu is None:
            continue
        rec = load_recording(lane.recording)
        timing = first_timing(rec, lane, now)
        finished = phase_at(rec, lane, timing, now) == len(rec.phases) - 1
        if lane.mode is Mode.LIVE and not finished:
            busy[lane.gpu] = "train"
        elif lane.mode is Mode.HUNG:
            busy[lane.gpu] = "hung"
    return busy


def gpu_states_at(box: BoxSpec, now: float = NOW) -> States:
    """What the box's GPUs did at each instant up to `now` (the driver's samples reach 14 s
    back), from the same schedules gpu_busy reads at `now`."""
    spans = []
    for lane in LANES:
        if lane.box != box.name or lane.gpu is None:
            continue
        rec = load_recording(lane.recording)
        timing = first_timing(rec, lane, now)
        last = last_phase(rec, lane)
        end = timing.times[len(rec.phases) - 1 if last is None else last]
        spans.append((lane.gpu, timing.times[0], end, lane.mode is Mode.HUNG))

    def states(t: float) -> dict[int, str]:
        out: dict[int, str] = {}
        for gpu, start, end, hung in spans:
            if start <= t < end:
                out[gpu] = "train"
            elif t >= end and hung:
                out[gpu] = "hung"
        return out
    return states


def box_answer(box: BoxSpec, now: float = NOW) -> dict[str, Any]:
    """One probe answer for a demo box: its runs, nvidia-smi rows and runs-root disk."""
    total, used = (gb * 10**9 for gb in DISKS_GB[box.name])
    return {
        "v": 1, "time": now, "python": BOX_PYTHON,
        "roots": [{"root": RUNS_ROOT, "fs": "1"}],
        "runs": [run_answer(lane, now) for lane in LANES if lane.box == box.name],
        "gpus": {"rows": gpu_lines(box, gpu_busy(box, now), now),
                 "busy": parse_util_query(utilization_text(box, gpu_states_at(box, now), now)),
                 "busy_src": "nvidia-smi"},
        "disks": [{"root": RUNS_ROOT, "fs": "1", "total": total, "used": used,
                   "free": total - used, "mount": "/", "device": "overlay",
                   "fstype": "overlay"}],
    }


def still_states(now: float = NOW) -> list[BoxState]:
    """Every demo box as the panel holds it after one good refresh at `now`."""
    return [fold_answer(BoxState(name=box.name), box_answer(box, now), now,
                        refresh_seconds=REFRESH_SECONDS) for box in BOXES]


def still_fleet() -> FleetConfig:
    """The demo's fleet config as DemoFleet writes it, with fixed loopback ports."""
    entries = [{"name": spec.name, "host": "127.0.0.1", "port": 2201 + i, "user": "root",
                "identity_file": "~/.ssh/id_ed25519", "runs_roots": [RUNS_ROOT],
                "provider": spec.provider, "instance_id": spec.instance_id,
                "via_jump": spec.via_jump, "pricing": dict(spec.pricing)}
               for i, spec in enumerate(BOXES)]
    text = fleet_toml(entries, known_hosts="~/.ssh/known_hosts", jump="demo@127.0.0.1:2200")
    return parse_config(text, "demo-stills.toml")


def still_facts(now: float = NOW) -> dict[str, InstanceInfo]:
    """What the demo's provider stand-ins answer, read by the real adapters' parsers."""
    started = now - BOXES_UP_FOR
    facts: dict[str, InstanceInfo] = {}
    for box in BOXES:
        if box.provider == "vast":
            facts[box.name] = vast_info(demo_vast_instance(box, started))
        elif box.provider == "runpod":
            facts[box.name] = runpod_info(demo_runpod_pod(box, started))
    return facts


def still_ledger(now: float = NOW) -> list[Event]:
    """What an earlier session left in the ledger: the manual box, watched since yesterday.

    The rented boxes have no segment yet: the meter backfills them from their
    provider's start time on its first update, as it does for a new box."""
    return [Event(now - LAB_BILLED_FOR, box.name, "running", box.pricing["running_usd_per_hr"],
                  "config") for box in BOXES if box.provider == "manual"]
