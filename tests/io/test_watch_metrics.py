"""`gpurent-tui watch --metrics 127.0.0.1:0` as a real process over a real sshd box:
its /metrics, scraped over HTTP and read by prometheus_client's own parser, says what
`status --json` says (the box's GPUs through a stand-in nvidia-smi replaying an H200, its
armed watchdog's state file, a milestone push watch makes on its own and counts); a run
name built to break the text format stays one well-formed series; a scraper that hangs up
mid-answer does not stop the next scrape."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from support.fleets import box_entry, make_fleet, runs_root_with
from support.nvidia_smi import replaying_nvidia_smi
from support.sshd import KeyPair, Sshd
from support.watch_output import MetricsWatch

from tui.model.metrics_doc import LABEL_CHARS, label_value
from tui.store.jsonl import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
# A run's folder named to break the text format (a folder name holds 255 bytes at most;
# tests/unit/test_metrics_doc.py gives a 10 kB one from a box's answer).
HOSTILE = 'ev"il\\name\n} 1\ngpurent_box_up{box="x"} 7\n\x1b[31mred\x1b[0m\x07' + "A" * 150


def _scrape(port: int) -> tuple[str, dict[str, list[tuple[dict[str, str], float]]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return text, samples


def _hang_up(port: int, read: int) -> None:
    """A scraper that sends its GET and goes away (after reading `read` bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        if read:
            sock.recv(read)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def test_watch_metrics_agree_with_status_and_survive_hostile_names_and_hangups(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path) -> None:
    server = sshd_factory("b", env=replaying_nvidia_smi(tmp_path / "bin", "util-17.txt"))
    guard = tmp_path / "home-b" / ".gpurent-tui" / "guard"  # the box's armed watchdog
    guard.mkdir(parents=True)
    (guard / "state.json").write_text(json.dumps(
        {"v": 1, "armed": True, "armed_at": time.time(), "max_hours": 12}))
    root = runs_root_with(tmp_path, "yolox_running", "yolox_completed", "yolo9_completed")
    running = root / "yolox_running" / "status.json"
    status = json.loads(running.read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=os.getpid(), started_at=now, updated_at=now,  # alive: running
                  best_metric=0.4125)
    running.write_text(json.dumps(status))
    (root / "yolox_completed").rename(root / HOSTILE)
    weights = root / "yolo9_completed" / "weights"  # completed: watch pushes it unasked
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"best" * 1000)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "b", runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 3.6},
                                            push={"local_dir": str(tmp_path / "pushed"),
                                                  "on_complete": True})],
                       known_hosts=[server.known_hosts_line()])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with MetricsWatch(fleet.source, env, str(ROOT)) as watch:
        out, port = watch.out, watch.port
        out.wait_for("box b: ok")
        pushed = out.wait_for("milestone push of yolo9_completed (run completed): ")
        if pushed.rstrip().endswith(": started"):
            pushed = out.wait_for("milestone push of yolo9_completed (run completed): ")
        assert "(run completed): done:" in pushed, "".join(out.lines)
        deadline = time.monotonic() + 60
        while True:  # the money picture follows the first look by a moment
            text, samples = _scrape(port)
            priced = {"gpurent_run_unpushed_usd", "gpurent_box_usd_per_hour",
                      "gpurent_box_gpu_busy_ratio", "gpurent_run_usd_to_finish",
                      "gpurent_action_total"} <= set(samples)
            if priced or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        doc = json.loads(subprocess.run(
            [sys.executable, "-m", "tui", "status", "--json", "--config", fleet.source],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True).stdout)

        # --- the same figures as status --json
        box = doc["boxes"][0]
        runs = {r["name"]: r for r in box["runs"]}
        live = runs["yolox_running"]

        def value(name: str, run: str | None = None) -> float:
            found = [v for labels, v in samples[name]
                     if labels["box"] == "b" and (run is None or labels.get("run") == run)]
            assert len(found) == 1, (name, run, samples.get(name))
            return found[0]

        assert value("gpurent_box_up") == 1.0
        assert value("gpurent_run_epoch", "yolox_running") == live["current_epoch"] == 7
        assert value("gpurent_run_epochs_total", "yolox_running") == live["total_epochs"] == 30
        assert abs(value("gpurent_run_unpushed_usd", "yolox_running")
                   - live["unpushed_usd"]) < 0.01, text
        assert value("gpurent_run_train_loss", "yolox_running") == live["train_loss"]
        assert value("gpurent_box_usd_per_hour") == box["cost"]["usd_per_hr"] == 3.6
        healths = {labels["health"]: v for labels, v in samples["gpurent_run_health"]
                   if labels["run"] == "yolox_running"}
        assert healths["running"] == 1.0 and sum(healths.values()) == 1.0
        assert abs(value("gpurent_box_spent_usd_total") - box["cost"]["accrued_usd"]) < 0.01
        assert box["cost"]["accrued_usd"] > 0
        busy = box["cost"]["gpu_busy_pct"]  # over the billed time; else the probes'
        busy = busy if busy is not None else box["gpu_busy_pct"]
        assert busy is not None and abs(value("gpurent_box_gpu_busy_ratio") - busy / 100) < 0.02
        assert abs(value("gpurent_box_gpu_busy_ratio") - 0.17) < 0.02  # the H200 recording
        (disk,) = box["disks"]
        assert disk["root"] == str(root)  # its label: the path, bounded (a cut one ends "~")
        assert [labels["root"] for labels, _ in samples["gpurent_box_disk_used_ratio"]] == \
            [label_value(disk["root"])]
        assert abs(value("gpurent_box_disk_used_ratio") - disk["used_pct"] / 100) < 0.01
        ((best_labels, best),) = [(labels, v) for labels, v in samples["gpurent_run_best_metric"]
                                  if labels["run"] == "yolox_running"]
        assert best == live["best_metric"] == 0.4125
        assert best_labels["metric"] == live["best_metric_name"] == "mAP50-95"
        to_finish = value("gpurent_run_usd_to_finish", "yolox_running")
        assert live["cost_to_finish_usd"] is not None, live
        assert abs(to_finish - live["cost_to_finish_usd"]) <= 0.01 + 0.05 * to_finish
        assert box["guard"]["armed"] is True and value("gpurent_watchdog_armed") == 1.0
        (gpu,) = box["gpus"]  # the H200's one GPU, as nvidia-smi printed it
        gpu_at = {"box": "b", "provider": "manual", "gpu": str(gpu["index"]),
                  "model": gpu["name"]}
        for name, want in (
                ("gpurent_gpu_utilization_ratio", gpu["util_pct"] / 100),
                ("gpurent_gpu_memory_used_ratio", gpu["mem_used_mib"] / gpu["mem_total_mib"]),
                ("gpurent_gpu_temperature_celsius", gpu["temp_c"]),
                ("gpurent_gpu_power_watts", gpu["power_w"])):
            assert samples[name] == [(gpu_at, want)], (name, samples[name])
        assert value("gpurent_gpus_truncated") == 0.0
        # the counter of actions ended: the milestone push watch made, as its journal says
        entries, _ = read_jsonl(isolated_dirs / "state" / "gpurent-tui" / "journal.jsonl")
        journal = [(e["action"], e["outcome"]) for e in entries if e["box"] == "b"]
        assert journal == [("push", "done")], journal
        assert samples["gpurent_action_total"] == [
            ({"box": "b", "kind": "milestone push", "outcome": "done"}, 1.0)], text

        # --- the hostile name: one series, bounded, printable, the format intact
        epochs = samples["gpurent_run_epoch"]
        assert len(epochs) == 3, epochs
        (odd,) = [labels["run"] for labels, _ in epochs
                  if labels["run"] not in ("yolox_running", "yolo9_completed")]
        assert len(odd) <= LABEL_CHARS and odd.isprintable() and "\x1b" not in odd
        assert odd.startswith('ev"il\\name')
        assert [v for labels, v in samples["gpurent_box_up"]] == [1.0]  # nothing injected
        for line in text.splitlines():  # every line a comment or one sample
            assert line.startswith("# ") or re.fullmatch(r"gpurent_\w+(\{.*\})? \S+", line), line

        # --- scrapers that hang up mid-answer; the next scrape is answered all the same
        for read in (0, 5, 0, 40):
            _hang_up(port, read)
        again, _ = _scrape(port)
        assert "gpurent_run_epoch" in again
        assert watch.proc.poll() is None

        log = watch.stop()
    assert watch.proc.returncode == 0, log
    assert "Traceback" not in log and "Exception" not in log, log
    assert "watch: stopped, every connection closed" in log.splitlines()[-1]


def test_watch_metrics_on_a_taken_port_or_without_the_library_says_so_in_one_line(
        tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, [{"name": "down", "host": "127.0.0.1", "port": 1}])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "tui", "watch", "--config", fleet.source,
                               "--metrics", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert f"--metrics 127.0.0.1:{port}: cannot listen there" in done.stdout
    # prometheus_client not installed: a stand-in package that fails to import, first on
    # the path
    shadow = tmp_path / "shadow" / "prometheus_client"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    done = subprocess.run([sys.executable, "-m", "tui", "watch", "--config", fleet.source,
                           "--metrics", "127.0.0.1:0"], cwd=ROOT,
                          env={**env, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{ROOT}"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == [
        "watch: --metrics needs prometheus_client: pip install 'prometheus_client>=0.20,<1'"]
