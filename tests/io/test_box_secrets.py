"""A box that echoes the panel's secrets back: they never reach a screen or a printout.

A box is a stranger's machine and the Hub token may have reached it for a push.
A real sshd box here writes the panel's Hub token (HF_TOKEN) and a provider API
key (VAST_API_KEY) into a run folder's name, a failed run's status.json error
(its `reason`), train.log (whole, and split across two lines) and nvidia-smi's
GPU name. Neither appears on the panel's screen (the fleet and the run's detail),
in `status` or `status --json`, in `watch`'s log or its /metrics text; the run
with the token in its folder name still shows, and `watch`'s milestone push
still pushes its files, read from the real path. A probe that dies quoting the token
on stderr gets `***` in the box's error.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from support.fleets import DATA, box_entry, make_fleet
from support.pilot import until
from support.sshd import KeyPair, Sshd
from support.watch_output import MetricsWatch

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.config import FleetConfig

ROOT = Path(__file__).resolve().parents[2]
HF_TOKEN = "hf_" + "Qx7mN2pL9vR4tK8wZ3bC6yD1fG5hJ0sAeU"  # 34 after hf_, a Hub token's shape
VAST_KEY = "a3f9" * 16  # 64 hex digits, a Vast.ai key's shape
SECRETS = (HF_TOKEN, VAST_KEY)
RUN = f"run-{HF_TOKEN}"
Factory = Callable[..., Sshd]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch, isolated_dirs: Path) -> None:
    """The panel holds both secrets, as a user's environment would."""
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("VAST_API_KEY", VAST_KEY)
    monkeypatch.setenv("HF_TOKEN_PATH", str(isolated_dirs / "no-saved-token"))


def leaks(text: str) -> list[str]:
    """The secrets (or a recognisable half of one) found in `text`."""
    flat = re.sub(r"\s+", "", text)
    return [s for s in SECRETS if s in text or s in flat or s[:16] in text or s[-16:] in text]


def echoing_fleet(tmp_path: Path, sshd_factory: Factory, key: KeyPair,
                  **extra: object) -> tuple[FleetConfig, Path]:
    """A box whose every word may hold the secrets: a GPU name, a run folder's name, a
    failed run's error, train.log lines."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gpu.csv").write_text(f"0, NVIDIA H200 {VAST_KEY}, 88, 70000, 143771, 55, "
                                    "410.20\n")
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {bindir / 'gpu.csv'}\n")
    smi.chmod(0o755)
    server = sshd_factory(env={"PATH": f"{bindir}:/usr/bin:/bin"})
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(DATA / "yolo9_completed", root / RUN)  # the token in the folder name
    weights = root / RUN / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"best" * 1000)
    with (root / RUN / "train.log").open("a") as log:
        log.write(f"pushing with token {HF_TOKEN} key={VAST_KEY}\n"
                  f"wrapped {HF_TOKEN[:20]}\n{HF_TOKEN[20:]} done\n")
    failed = root / "failed"
    shutil.copytree(DATA / "yolox_failed", failed)
    status = json.loads((failed / "status.json").read_text())
    status["error"] = {"type": "RuntimeError",
                       "message": f"hub refused {HF_TOKEN} with vast {VAST_KEY}"}
    (failed / "status.json").write_text(json.dumps(status))
    fleet = make_fleet(tmp_path, [box_entry(server, key, "gpu", runs_roots=[str(root)],
                                            **extra)],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=60)
    return fleet, root


@pytest.mark.usefixtures("held")
def test_status_text_and_json_show_no_secret_a_box_echoes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet, _ = echoing_fleet(tmp_path, sshd_factory, client_key)
    assert main(["status", "--config", fleet.source]) == 0
    out = capsys.readouterr().out
    assert not leaks(out), out
    assert "run-***" in out and "hub refused ***" in out, out
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = capsys.readouterr().out
    assert not leaks(doc), doc
    runs = {r["name"]: r for r in json.loads(doc)["boxes"][0]["runs"]}
    assert set(runs) == {"run-***", "failed"}
    assert runs["run-***"]["health"] == "completed"
    assert runs["run-***"]["path"].endswith("/runs/run-***")


def painted(app: GpurentApp) -> str:
    """Every character the panel would paint on the terminal now, without its styles."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor", record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


@pytest.mark.usefixtures("held")
async def test_the_panel_shows_no_secret_a_box_echoes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    fleet, root = echoing_fleet(tmp_path, sshd_factory, client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(app.states["gpu"].runs) == 2)
        await pilot.pause(0.2)
        screens = [painted(app), app.export_screenshot()]
        runs = app.states["gpu"].runs
        assert str(root / RUN) in {r.path for r in runs}  # the real address, kept
        for run in runs:
            app.open_run("gpu", run.path)  # addressed by its real path, shown redacted
            await pilot.pause(0.3)
            screens += [painted(app), app.export_screenshot()]
            await pilot.press("escape")
            await pilot.pause(0.1)
    text = "\n".join(screens)
    assert not leaks(text)
    assert "run-***" in text and "hub refused ***" in text


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        return answer.read().decode()


@pytest.mark.usefixtures("held")
def test_watch_log_and_metrics_show_no_secret_and_the_run_still_pushes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    pushed = tmp_path / "pushed"
    fleet, root = echoing_fleet(tmp_path, sshd_factory, client_key,
                                push={"local_dir": str(pushed), "on_complete": True})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with MetricsWatch(fleet.source, env, str(ROOT)) as watch:
        out, port = watch.out, watch.port
        out.wait_for("box gpu: ok")
        done = out.wait_for("milestone push of run-*** (run completed): ")
        if done.rstrip().endswith(": started"):
            done = out.wait_for("milestone push of run-*** (run completed): ")
        assert "(run completed): done:" in done, "".join(out.lines)
        deadline = time.monotonic() + 60
        while "gpurent_gpu_utilization_ratio" not in (metrics := _scrape(port)) \
                and time.monotonic() < deadline:
            time.sleep(0.3)
        log = watch.stop()
    assert watch.proc.returncode == 0, log
    assert not leaks(metrics), metrics
    assert not leaks(log), log
    assert 'run="run-***"' in metrics and "NVIDIA H200 ***" in metrics, metrics
    # the push read the real folder: every file it took is the run's, byte for byte
    (folder,) = (pushed / "gpu").iterdir()
    assert not leaks(folder.name)
    assert re.fullmatch(r"run-\*\*\*~[0-9a-f]{10}", folder.name), folder.name  # unique per path
    got = {p.relative_to(folder).as_posix(): p.read_bytes()
           for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert got["weights/best.pt"] == b"best" * 1000 and "train.log" in got
    for name, data in got.items():
        assert data == (root / RUN / name).read_bytes(), name


@pytest.mark.usefixtures("held")
def test_a_probe_failure_quoting_a_secret_shows_none(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The box's python3 dies saying the token on stderr (split by a line break too):
    the box's error, as `status` prints it, holds `***` instead."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python = bindir / "python3"
    python.write_text(f"#!/bin/sh\necho 'Traceback: bad token {HF_TOKEN}' >&2\n"
                      f"printf 'wrapped {HF_TOKEN[:15]}\\n{HF_TOKEN[15:]} key {VAST_KEY}\\n' >&2\n"
                      "exit 1\n")
    python.chmod(0o755)
    server = sshd_factory(env={"PATH": f"{bindir}:/usr/bin:/bin"})
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu",
                                            runs_roots=[str(tmp_path)])],
                       known_hosts=[server.known_hosts_line()])
    for args in (["--json"], []):
        assert main(["status", *args, "--config", fleet.source]) == 1
        out = capsys.readouterr().out
        assert not leaks(out), out
        assert "bad token ***" in out, out
