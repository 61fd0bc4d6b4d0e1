"""A run training on a chosen GPU, for `profile`'s per-GPU refusal: yolox_running whose
status.json names a live process started with the environment a trainer would have
(CUDA_VISIBLE_DEVICES ...), and a train_config.yaml as LibreYOLO 1.6 writes one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from support.fleets import runs_root_with

REAL_CONFIG = Path(__file__).resolve().parents[2] / "tui" / "demo_data" / "yolox-n-40e" / \
    "train_config.yaml"  # written by LibreYOLO 1.6 itself (tui/demo_data/README.md)
PLACING = ("CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def config_text(device: Any) -> str:
    """LibreYOLO's train_config.yaml with this device, as its TrainConfig.to_yaml writes
    it (yaml.dump(..., default_flow_style=False, sort_keys=False))."""
    config = yaml.safe_load(REAL_CONFIG.read_text())
    config["device"] = device
    return yaml.dump(config, default_flow_style=False, sort_keys=False)


def training_run(tmp_path: Path, config: str | None, env: dict[str, str] | None = None,
                 *fixtures: str) -> tuple[Path, subprocess.Popen[bytes]]:
    """A runs root (with copies of `fixtures` beside it) whose yolox_running trains: a
    process started now with `env` (and none of PLACING otherwise) is its pid, and
    `config` its train_config.yaml (None: none). The caller kills the process."""
    base = {k: v for k, v in os.environ.items() if k not in PLACING}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            env={**base, **(env or {})})
    root = runs_root_with(tmp_path, "yolox_running", *fixtures)
    run = root / "yolox_running"
    status = json.loads((run / "status.json").read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=proc.pid, started_at=now, updated_at=now)
    (run / "status.json").write_text(json.dumps(status))
    if config is not None:
        (run / "train_config.yaml").write_text(config)
    return root, proc
