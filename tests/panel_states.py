"""Fixed BoxState snapshots from recorded LibreYOLO files, for snapshot tests of the panel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tui.model.box import BoxState, Connection, fold_answer, fold_failure
from tui.model.config import FleetConfig, parse_config
from tui.model.runs import parse_time

DATA = Path(__file__).parent / "data" / "libreyolo"
RUNNING = json.loads((DATA / "yolox_running" / "status.json").read_text())
NOW = (parse_time(RUNNING["updated_at"]) or 0.0) + 4.0

CONFIG = """
[[box]]
name = "vast-4090"
host = "ssh4.vast.ai"
provider = "vast"
[[box]]
name = "runpod-a100"
host = "a100.runpod.example"
provider = "runpod"
[[box]]
name = "lab-3090"
host = "lab.example.org"
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
                   "used": 102 * 10**9, "free": 148 * 10**9}],
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
                   "used": 93 * 10**9, "free": 7 * 10**9}],
    }
    runpod = fold_answer(BoxState(name="runpod-a100"), runpod_answer, NOW)
    lab = fold_answer(BoxState(name="lab-3090"), {
        "v": 1, "time": NOW - 600, "runs": [_run("ablation-mosaic", "yolox_completed")],
        "gpus": {"absent": True}, "disks": []}, NOW - 600)
    lab = fold_failure(lab, Connection.TIMEOUT,
                       "box lab-3090 (lab.example.org:22): no SSH login within 15 s",
                       NOW - 30, retry_at=NOW + 40)
    return [vast, runpod, lab]
