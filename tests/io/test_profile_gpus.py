"""`gpurent-tui profile` beside a run training on one GPU of a box, over real sshd: refused
on the run's GPU, allowed on another, and refused (saying why) where which GPU the run
uses cannot be told. The run is a real LibreYOLO train_config.yaml (the demo's, device
as LibreYOLO's to_yaml writes it) and a live process started with the environment a
trainer would have; the box's `libreyolo` answers the H200's recorded profile."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fleets import box_entry, make_fleet
from support.profile_box import hostile_libreyolo
from support.sshd import KeyPair, Sshd
from support.training_runs import config_text, training_run

from tui.__main__ import main
from tui.model.config import FleetConfig
from tui.store.journal import Journal

ARGS = ["--data", "/nowhere/data.yaml", "--weights", "/nowhere/w.pt", "--steps", "2"]
Train = Callable[..., FleetConfig]


@pytest.fixture
def training(tmp_path: Path, sshd_factory: Callable[..., Sshd],
             client_key: KeyPair) -> Iterator[Train]:
    """A box whose run yolox_running trains (support/training_runs.py): its process
    started with `env`, its train_config.yaml `config` (None: none written)."""
    procs = []

    def make(config: str | None, env: dict[str, str] | None = None,
             python: str | None = None) -> FleetConfig:
        root, proc = training_run(tmp_path, config, env)
        procs.append(proc)
        server = sshd_factory("box")
        python = python or str(hostile_libreyolo(tmp_path / "h200", "recorded"))
        return make_fleet(tmp_path, [box_entry(server, client_key, python=python,
                                               runs_roots=[str(root)],
                                               pricing={"running_usd_per_hr": 3.49})],
                          known_hosts=[server.known_hosts_line()])

    yield make
    for proc in procs:
        proc.kill()
        proc.wait()


def profile(fleet: FleetConfig, capsys: pytest.CaptureFixture[str], *more: str
            ) -> tuple[int, dict[str, Any], str]:
    code = main(["--config", fleet.source, "profile", "box", *ARGS, *more, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_a_run_on_gpu_0_refuses_gpu_0_and_leaves_gpu_1_to_profile(
        training: Train, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = training(config_text("0"))
    code, doc, _ = profile(fleet, capsys, "--device", "0")
    assert (code, doc["outcome"]) == (1, "refused")
    assert doc["message"] == (
        "run yolox_running is training on GPU 0 of box box: profiling there now would "
        "compete for it and measure neither; pick another GPU (--device); --force to "
        "profile anyway")
    code = main(["--config", fleet.source, "profile", "box", *ARGS, "--device", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "35.4 img/s on box box (batch 16, workers 8)" in out
    # the cores and the disk are shared with the run, and the terminal says so
    assert ("profile: training beside it: yolox_running on GPU 0; profiling GPU 1 (the "
            "cores and disk are shared, so the dataload share may read high)") in err
    outcomes = [e["outcome"] for e in Journal().entries if e["action"] == "profile"]
    assert outcomes == ["refused", "done"]


def test_the_gpus_are_the_box_s_own_through_the_run_s_cuda_visible_devices(
        training: Train, capsys: pytest.CaptureFixture[str]) -> None:
    """A run started with CUDA_VISIBLE_DEVICES=1 and device 0 trains on the box's GPU 1:
    profiling GPU 1 is refused and GPU 0 is free."""
    fleet = training(config_text(0), {"CUDA_VISIBLE_DEVICES": "1"})
    code, doc, _ = profile(fleet, capsys, "--device", "1")
    assert (code, doc["outcome"]) == (1, "refused")
    assert doc["message"].startswith("run yolox_running is training on GPU 1 of box box")
    code, doc, _ = profile(fleet, capsys, "--device", "0")
    assert (code, doc["outcome"]) == (0, "done"), doc
    assert doc["beside"] == ("training beside it: yolox_running on GPU 1; profiling GPU 0 (the "
                             "cores and disk are shared, so the dataload share may read high)")


def test_a_multi_gpu_run_holds_each_of_its_gpus(
        training: Train, capsys: pytest.CaptureFixture[str]) -> None:
    """device [0, 1] (yaml's block list) as LibreYOLO's spawner runs it: each worker masked
    to the GPUs asked for."""
    fleet = training(config_text([0, 1]), {"CUDA_VISIBLE_DEVICES": "0,1"})
    code, doc, _ = profile(fleet, capsys, "--device", "1")
    assert (code, doc["outcome"]) == (1, "refused")
    assert doc["message"].startswith("run yolox_running is training on GPU 1 of box box")


@pytest.mark.parametrize(("config", "why"), [
    (None, "it has no train_config.yaml the box could read"),
    (config_text("9" * 5000 + "\x1b]52;c;aGk=\x07"), "names no GPU gpurent-tui can place"),
    (config_text("cuda:99999999999999999999"), "device 'cuda:99999999999999999999' names no "
     "GPU gpurent-tui can place"),
    ("device: [0, \x00]\n" + "x" * (1 << 20), "names no GPU gpurent-tui can place"),
], ids=["no-config", "huge-escapes", "huge-index", "nul-and-a-megabyte"])
def test_a_run_whose_gpus_cannot_be_told_refuses_saying_why(
        config: str | None, why: str, training: Train,
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = training(config)
    code, doc, _ = profile(fleet, capsys, "--device", "1")
    assert (code, doc["outcome"]) == (1, "refused")
    message = doc["message"]
    assert message.startswith("run yolox_running is training on box box and which GPU it "
                              "uses cannot be told (")
    assert why in message and message.endswith(
        "profiling now could compete for its GPU and cores and measure neither; --force to "
        "profile anyway")
    assert "\x1b" not in message and "\x07" not in message and len(message) < 400
    code, doc, _ = profile(fleet, capsys, "--device", "1", "--force")
    assert (code, doc["outcome"]) == (0, "done"), doc


def test_a_box_that_cannot_run_the_look_refuses_saying_why(
        training: Train, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = training(config_text("0"), python="/nowhere/python3")
    code, doc, _ = profile(fleet, capsys, "--device", "1")
    assert (code, doc["outcome"]) == (1, "refused")
    assert doc["message"].startswith(
        "run yolox_running is training on box box and which GPU it uses cannot be told (the "
        "interpreter /nowhere/python3 was not found on box box): ")
