"""`gpurent-tui profile` against real sshd boxes whose LibreYOLO is missing or hostile, and
a box where a run is training (refused unless --force); the cores counted are the box
python's own (its affinity); a profile given up (cancelled, the command interrupted)
or past its own deadline leaves nothing running on the box. The real profiler on the
CPU is in tests/e2e/test_profile_training.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.box_python import make_venv
from support.disk_runs import running_root
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import wait_for
from support.profile_box import hostile_libreyolo, nothing_left, profiling
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.actions.onbox_run import run_onbox
from tui.actions.preflight import params_bytes, program
from tui.actions.profile import profile_box
from tui.model.bill import Event
from tui.model.config import FleetConfig
from tui.model.preflight import interpreter_command
from tui.model.profile import ProfileRequest
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.store.journal import Journal
from tui.store.ledger import Ledger


@pytest.fixture
def fleet_with(tmp_path: Path, sshd_factory: Callable[..., Sshd],
               client_key: KeyPair) -> Callable[..., FleetConfig]:
    def make(python: Path, **extra: Any) -> FleetConfig:
        server = sshd_factory("box")
        return make_fleet(tmp_path, [box_entry(server, client_key, python=str(python),
                                               pricing={"running_usd_per_hr": 3.49},
                                               **extra)],
                          known_hosts=[server.known_hosts_line()])
    return make


ARGS = ["--data", "/nowhere/data.yaml", "--weights", "/nowhere/w.pt", "--device", "cpu"]
ROOT = Path(__file__).resolve().parents[2]


def journal_lines() -> list[dict[str, Any]]:
    return [e for e in Journal().entries if e.get("action") == "profile"]


def test_a_box_without_libreyolo_gets_one_calm_line(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_with(make_venv(tmp_path / "bare"))
    code = main(["--config", fleet.source, "profile", "box", *ARGS])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1] == (f"profile failed: libreyolo is not installed for {tmp_path}/bare/bin/"
                       "python on box box: pip install libreyolo there (or set the box's "
                       "`python`)")
    assert journal_lines()[-1]["outcome"] == "failed"


@pytest.mark.parametrize("mode", ["garbage", "flood", "absurd"])
def test_a_hostile_libreyolo_is_bounded_cleaned_and_not_believed(
        mode: str, tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_with(hostile_libreyolo(tmp_path / "hostile", mode))
    code = main(["--config", fleet.source, "profile", "box", *ARGS,
                 "--try", "workers=0,2", "--json"])
    out = capsys.readouterr().out
    assert code == 1
    assert len(out) < 8000 and "\x1b" not in out and "\x07" not in out
    doc = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the document"))
    assert doc["schema"] == "gpurent.profile/1" and doc["outcome"] == "failed"
    assert [(c["batch"], c["workers"]) for c in doc["cells"]] == [(16, 0), (16, 2)]
    for cell in doc["cells"]:
        assert cell["img_per_s"] is None and cell["dataload_frac"] is None
        assert cell["gpu_util"] is None and cell["usd_per_1k_images"] is None
    if mode == "absurd":
        assert set(doc["cells"][0]["dropped"]) >= {"img_per_s", "dataload_frac", "gpu_util"}
        assert len(doc["cells"][0]["libreyolo_bound"] or "") <= 40
    if mode == "garbage":
        assert doc["cells"][0]["problem"].startswith(
            "libreyolo profile run exited 1 without a profile.json: Traceback: \ufffd[2J boom")
    assert journal_lines()[-1]["outcome"] == "failed"


def test_a_profile_shows_no_secret_the_box_echoes(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub token this machine holds, said back by the box's profiler (on one line,
    and split by a line break), reaches neither the text nor the --json document."""
    token = "hf_" + "Qx7mN2pL9vR4tK8wZ3bC6yD1fG5hJ0sAeU"
    monkeypatch.setenv("HF_TOKEN", token)
    python = hostile_libreyolo(tmp_path / "hostile", "echo",
                               echo=f"{token[:12]}\n{token[12:]} and {token}")
    fleet = fleet_with(python)
    for args in (["--json"], []):
        code = main(["--config", fleet.source, "profile", "box", *ARGS, *args])
        said = capsys.readouterr()
        out = said.out + said.err
        assert code == 1
        assert token not in out and token[:12] not in out and token[12:] not in out, out
        assert "refused: ***" in out, out


def test_a_training_run_is_refused_unless_forced(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    root = running_root(tmp_path, 1000)
    fleet = fleet_with(make_venv(tmp_path / "bare"), runs_roots=[str(root)])
    code = main(["--config", fleet.source, "profile", "box", *ARGS])
    err = capsys.readouterr().err
    assert code == 1
    assert ("profile refused: run yolox_running is training on box box and which GPU it uses "
            "cannot be told (it has no train_config.yaml the box could read): profiling now "
            "could compete for its GPU and cores and measure neither; --force to profile "
            "anyway") in err  # a run on another GPU: tests/io/test_profile_gpus.py
    assert journal_lines()[-1]["outcome"] == "refused"
    code = main(["--config", fleet.source, "profile", "box", *ARGS, "--force"])
    err = capsys.readouterr().err
    assert code == 1 and "libreyolo is not installed" in err  # it went on to the box


def test_usage_errors_exit_2_before_any_box(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[[box]]\nname = "box"\nhost = "127.0.0.1"\nport = 1\n')
    assert main(["--config", str(config), "profile", "box"]) == 2
    assert "--data YAML and --weights PT" in capsys.readouterr().err
    assert main(["--config", str(config), "profile", "box", *ARGS, "--model", "a b"]) == 2
    assert main(["--config", str(config), "profile", "box", *ARGS, "--steps", "100000"]) == 2
    assert main(["--config", str(config), "profile", "box", *ARGS, "--try", "gpus=2"]) == 2
    assert "--try 'gpus=2'" in capsys.readouterr().err


def test_a_box_with_no_configured_rate_is_priced_at_what_the_ledger_billed_it(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A provider box's rate is the provider's, not the config's: the profile's $/1k images
    come from the last running rate the ledger holds for it."""
    server = sshd_factory("box")
    python = hostile_libreyolo(tmp_path / "h200", "recorded")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, python=str(python))],
                       known_hosts=[server.known_hosts_line()])
    ledger = Ledger()
    ledger.record(Event(t=1000.0, box="box", state="running", usd_per_hr=3.49, source="test"))
    ledger.record(Event(t=2000.0, box="box", state="stopped", usd_per_hr=0.05, source="test"))
    code = main(["--config", fleet.source, "profile", "box", *ARGS, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    cell = doc["cells"][0]
    assert cell["img_per_s"] == pytest.approx(35.37, abs=0.01)
    assert cell["usd_per_1k_images"] == pytest.approx(3.49 / 3600 / 35.37 * 1000, rel=1e-3)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to one")
def test_the_cores_said_are_the_ones_the_box_python_may_run_on(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A container or taskset gives the trainer fewer cores than the machine has: those
    are the cores its loader workers share, and the ones the advice counts."""
    real = make_venv(tmp_path / "bare")
    pinned = tmp_path / "pinned-python"
    pinned.write_text(f"""#!{sys.executable}
import os, sys
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
os.execv({str(real)!r}, [{str(real)!r}] + sys.argv[1:])
""")
    pinned.chmod(0o755)
    fleet = fleet_with(pinned)
    main(["--config", fleet.source, "profile", "box", *ARGS, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["cpus"] == 1 and os.cpu_count() != 1


async def test_a_cancelled_profile_ends_on_the_box(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig]) -> None:
    """The panel's x (the runtime cancels the action's task): the on-box program and the
    profiler it started, workers and all, end within seconds, not when the setting would
    have finished (up to 15 minutes later)."""
    venv = tmp_path / "slow"
    fleet = fleet_with(hostile_libreyolo(venv, "slow"))
    request = ProfileRequest(data="/d.yaml", weights="/w.pt", device="cpu",
                             grid=("workers=0,2",))
    task = asyncio.create_task(profile_box(fleet, fleet.boxes[0], request))
    await asyncio.to_thread(wait_for, lambda: profiling(venv), 60, 0.1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.to_thread(nothing_left, venv)


def test_an_interrupted_profile_command_ends_on_the_box(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig]) -> None:
    """Ctrl+C of `gpurent-tui profile` (its connection goes with it): the same."""
    venv = tmp_path / "slow"
    fleet = fleet_with(hostile_libreyolo(venv, "slow"))
    proc = subprocess.Popen([sys.executable, "-m", "tui", "--config", fleet.source, "profile",
                             "box", *ARGS], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: profiling(venv), 60, 0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    nothing_left(venv)


async def test_a_profile_past_its_own_deadline_ends_with_its_profiler(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig]) -> None:
    """The program's own alarm (set a little inside the client's deadline) ends the
    profiler it started too, and the client reads it as the program stopping itself."""
    venv = tmp_path / "slow"
    fleet = fleet_with(hostile_libreyolo(venv, "slow"))
    box = fleet.boxes[0]
    params = {"mode": "profile", "data": "/d.yaml", "weights": "/w.pt", "size": "n",
              "imgsz": 64, "device": "cpu", "steps": 2, "warmup": 0, "deadline": 4,
              "tool_timeout": 600, "cells": [{"batch": 16, "workers": 2}]}
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        ran = await run_onbox(session, interpreter_command(box.python), program("profile"),
                              params_bytes(params), deadline=60, what="profile")
    finally:
        await session.close()
    assert (ran.ended, ran.signal) == ("signal", "ALRM"), ran
    await asyncio.to_thread(nothing_left, venv)
