"""`gpurent-tui watch --metrics 127.0.0.1:0` as a real process over a fleet of one Modal
app, read through the `modal` stand-in first on PATH: /metrics, scraped over HTTP and
read by prometheus_client's own parser, serves the serverless families and the app's
run as `status --json` of the same fleet says; the timeout is the one the entry's
`script` sets (no `timeout` in the config)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.modal_standin import ModalStandIn, status_json
from support.watch_output import MetricsWatch

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[str, list[tuple[dict[str, str], float]]]
SCRIPT = '''import modal

app = modal.App("yolo-train")
volume = modal.Volume.from_name("runs-vol")
SIX_HOURS = 21600


@app.function(gpu="H100:2", timeout=SIX_HOURS, volumes={"/runs": volume})
def train() -> None:
    pass
'''


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def _one(samples: Samples, name: str, **labels: str) -> float:
    found = [v for got, v in samples.get(name, [])
             if all(got.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_watch_metrics_serve_the_modal_app_as_status_json_says(
        tmp_path: Path, isolated_dirs: Path) -> None:
    stand_in = ModalStandIn(tmp_path / "modal", started=iso(time.time() - 3600))
    now = time.time()
    stand_in.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30),
        eta=8 * 3600.0))  # 8 h to go, 5 h left of 6: killed first
    (tmp_path / "train.py").write_text(SCRIPT)
    config = tmp_path / "fleet.toml"
    config.write_text('[[serverless]]\nname = "modal-yolo"\nprovider = "modal"\n'
                      'app = "yolo-train"\nvolume = "runs-vol"\nruns_path = "/runs"\n'
                      'gpu = "H100:2"\nscript = "train.py"\n')
    env = {**stand_in.env, "PYTHONPATH": str(ROOT)}  # the stand-in `modal` first on PATH
    env.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})
    with MetricsWatch(str(config), env, str(ROOT)) as watch:
        port = watch.port
        deadline = time.monotonic() + 60
        while True:  # the first poll of the app follows the start by a moment
            samples = _scrape(port)
            if "gpurent_run_epoch" in samples or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        doc = json.loads(subprocess.run(
            [sys.executable, "-m", "tui", "status", "--json", "--config", str(config)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
            check=True).stdout)
        log = watch.stop()
    assert watch.proc.returncode == 0, log
    assert "Traceback" not in log, log

    (app,) = doc["serverless"]
    (run,) = app["runs"]
    assert (app["timeout_seconds"], app["timeout_source"]) == (21600, "script")
    assert app["state"] == "running" and app["problems"] == [] and app["no_timeout"] is False
    at = {"box": "modal-yolo", "provider": "modal", "app": "yolo-train"}
    assert _one(samples, "gpurent_serverless_up", **at, state=app["state"]) == 1
    assert _one(samples, "gpurent_serverless_tasks", **at) == app["tasks"] == 1
    assert _one(samples, "gpurent_serverless_timeout_seconds", **at) == 21600
    assert _one(samples, "gpurent_serverless_no_timeout", **at) == 0
    # the two reads are seconds apart: the countdown and the estimate move with the clock
    assert _one(samples, "gpurent_serverless_timeout_seconds_left", **at) == \
        pytest.approx(run["timeout_seconds_left"], abs=60)
    assert _one(samples, "gpurent_serverless_estimated_usd", **at) == \
        pytest.approx(app["estimated_cost_usd"], rel=0.02)
    assert _one(samples, "gpurent_serverless_gpu_seconds", **at) == \
        pytest.approx(app["gpu_seconds"], rel=0.02)
    on = {"box": "modal-yolo", "provider": "modal", "run": run["name"]}
    assert run["timeout_problem"].startswith("ETA 8h00m is past its 6 h timeout")
    assert _one(samples, "gpurent_run_eta_past_timeout", **on) == 1
    assert _one(samples, "gpurent_run_epoch", **on) == run["current_epoch"] == 3
    assert _one(samples, "gpurent_run_epochs_total", **on) == run["total_epochs"] == 40
    assert _one(samples, "gpurent_run_train_loss", **on) == run["train_loss"]
    assert _one(samples, "gpurent_run_health", **on, health=run["health"]) == 1
    assert "gpurent_box_up" not in samples  # an app is no box
    calls = stand_in.calls()
    assert ["app", "list", "--json"] in calls
