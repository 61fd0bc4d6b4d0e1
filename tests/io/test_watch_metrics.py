"""`gpurent-tui watch --metrics 127.0.0.1:0` as a real process over a real sshd box:
its /metrics, scraped over HTTP and read by prometheus_client's own parser, says what
`status --json` says; a run name built to break the text format stays one well-formed
series; a scraper that hangs up mid-answer does not stop the next scrape."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd
from support.watch_output import WatchOutput

from tui.model.metrics_doc import LABEL_CHARS

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
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_running", "yolox_completed")
    running = root / "yolox_running" / "status.json"
    status = json.loads(running.read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=os.getpid(), started_at=now, updated_at=now)  # alive: running
    running.write_text(json.dumps(status))
    (root / "yolox_completed").rename(root / HOSTILE)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "b", runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 3.6})],
                       known_hosts=[server.known_hosts_line()])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tui", "watch", "--config", fleet.source,
                             "--metrics", "127.0.0.1:0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = WatchOutput(proc)
    try:
        said = out.wait_for("watch: metrics on")
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/metrics", said)[1])  # type: ignore[index]
        out.wait_for("box b: ok")
        deadline = time.monotonic() + 60
        while True:  # the money picture follows the first look by a moment
            text, samples = _scrape(port)
            priced = "gpurent_run_unpushed_usd" in samples and \
                "gpurent_box_usd_per_hour" in samples
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

        # --- the hostile name: one series, bounded, printable, the format intact
        epochs = samples["gpurent_run_epoch"]
        assert len(epochs) == 2, epochs
        (odd,) = [labels["run"] for labels, _ in epochs if labels["run"] != "yolox_running"]
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
        assert proc.poll() is None

        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log = out.rest()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log
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
