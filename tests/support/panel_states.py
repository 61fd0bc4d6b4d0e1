"""Fixed BoxState snapshots from recorded LibreYOLO files, for snapshot tests of the panel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tui.model.box import BoxState, Connection, fold_answer, fold_failure
from tui.model.config import FleetConfig, parse_config
from tui.model.cost import Event
from tui.model.instance import InstanceInfo, InstanceState
from tui.model.runs import parse_time
from tui.providers.meter import CostMeter
from tui.store.ledger import Ledger

DATA = Path(__file__).resolve().parents[1] / "data" / "libreyolo"
RUNNING = json.loads((DATA / "yolox_running" / "status.json").read_text())
NOW = (parse_time(RUNNING["updated_at"]) or 0.0) + 4.0

CONFIG = """
[[box]]
name = "vast-4090"
host = "ssh4.vast.ai"
provider = "vast"
[box.pricing]
rebuild_usd = 1.00
[[box]]
name = "runpod-a100"
host = "a100.runpod.example"
provider = "runpod"
[[box]]
name = "lab-3090"
host = "lab.example.org"
[box.pricing]
running_usd_per_hr = 0.45
"""


def _run(name: str, fixture: str, *, metrics_from: str | None = None, **status: Any
         ) -> dict[str, Any]:
    raw_status = json.loads((DATA / fixture / "status.json").read_text())
    raw_status.update(status)
    metrics = (DATA / (metrics_from or fixture) / "metrics.jsonl")
    text = metrics.read_text() if metrics.exists() else ""
    log = DATA / fixture / "train.log"
    return {
        "path": f"/root/runs/{name}", "root": "/root/runs", "name": name, "s_sig": "s",
        "w_sig": "w", "status": raw_status, "pid_alive": True,
        "metrics": {"text": text, "off": len(text), "id": "1:1", "head": "h"},
        "log": {"text": log.read_text() if log.exists() else "", "off": 1, "id": "1:2"},
        "weights": [["best.pt", 11463045, NOW - 300], ["last.pt", 11463045, NOW - 20]],
    }


def fleet_config() -> FleetConfig:
    return parse_config(CONFIG, "snapshot.toml")


def fleet_states() -> list[BoxState]:
    """Every health, a box with GPUs, and a box that is down."""
    vast = fold_answer(BoxState(name="vast-4090"), {
        "v": 1, "time": NOW, "runs": [
            _run("yolox-n coco", "yolox_running", metrics_from="yolox_completed"),
            _run("yolo9-t baseline", "yolo9_completed"),
        ],
        "gpus": {"rows": ["0, NVIDIA GeForce RTX 4090, 97, 20480, 24564, 66, 412.5",
                          "1, NVIDIA GeForce RTX 4090, 95, 20210, 24564, 64, 398.0"]},
        "disks": [{"root": "/root/runs", "fs": "1", "total": 250 * 10**9,
                   "used": 102 * 10**9, "free": 148 * 10**9, "mount": "/",
                   "device": "overlay", "fstype": "overlay"}],
    }, NOW)
    stale = dict(updated_at="2026-12-02T09:20:00+00:00")
    runpod_answer = {
        "v": 1, "time": NOW, "runs": [
            _run("lr-sweep 3e-4", "yolox_failed"),
            _run("stuck-dataloader", "yolox_running", metrics_from="yolox_failed", **stale),
            {**_run("oom-victim", "yolox_running", metrics_from="yolox_completed"),
             "pid_alive": False},
        ],
        "gpus": {"rows": ["0, NVIDIA A100-SXM4-80GB, 3, 1024, 81920, 41, 61.0"]},
        "disks": [{"root": "/root/runs", "fs": "1", "total": 100 * 10**9,
                   "used": 93 * 10**9, "free": 7 * 10**9, "mount": "/",
                   "device": "overlay", "fstype": "overlay"}],
    }
    runpod = fold_answer(BoxState(name="runpod-a100"), runpod_answer, NOW)
    lab = fold_answer(BoxState(name="lab-3090"), {
        "v": 1, "time": NOW - 600, "runs": [_run("ablation-mosaic", "yolox_completed")],
        "gpus": {"absent": True}, "disks": []}, NOW - 600)
    lab = fold_failure(lab, Connection.TIMEOUT,
                       "box lab-3090 (lab.example.org:22): no SSH login within 15 s",
                       NOW - 30, retry_at=NOW + 40)
    return [vast, runpod, lab]


def instance(state: InstanceState = "running", **rates: Any) -> InstanceInfo:
    """What a provider would report, for a meter that polls nothing."""
    return InstanceInfo("test", "i-0", state, **rates)


# The guide's measured 8x RTX 4090 with 250 GB, as Vast reports it.
VAST = instance(running_usd_per_hr=3.4828, disk_gb=250, storage_usd_per_gb_month=0.20,
             hours_per_month=720)


def fixed_meter(ledger_path: Path) -> CostMeter:
    """A meter with provider facts and a ledger as they would be after hours of watching."""
    ledger = Ledger(ledger_path)
    for event in (Event(NOW - 5 * 3600, "vast-4090", "running", 3.4828, "api"),
                  Event(NOW - 2 * 3600, "runpod-a100", "running", 1.89, "api"),
                  Event(NOW - 26 * 3600, "lab-3090", "running", 0.45, "config")):
        ledger.record(event)
    meter = CostMeter(fleet_config(), ledger=ledger, clock=lambda: NOW)
    meter.facts = {
        "vast-4090": instance(running_usd_per_hr=3.4828, disk_gb=250, storage_usd_per_gb_month=0.2,
                           hours_per_month=720),
        "runpod-a100": instance(running_usd_per_hr=1.89, disk_gb=100),
    }
    meter.idle = {"runpod-a100": NOW - 25 * 60}
    return meter


def big_fleet(boxes: int) -> tuple[FleetConfig, list[BoxState]]:
    """`boxes` boxes named box000, box001 ...: fleet_states()' three, over and over (a
    box training fine, one with a failed, a stalled and a dead run, one that times out),
    for the panel at fleet scale."""
    templates = fleet_states()
    text = "".join(f'[[box]]\nname = "box{i:03d}"\nhost = "10.1.{i // 250}.{i % 250 + 1}"\n'
                   for i in range(boxes))
    states = [replace(templates[i % len(templates)], name=f"box{i:03d}") for i in range(boxes)]
    return parse_config(text, "big.toml"), states
