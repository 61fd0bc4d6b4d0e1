"""`gpurent-tui check` against real sshd boxes: this machine's CPU-only torch, a venv without
torch, a stand-in torch that fails as a wrong-architecture wheel does, recorded nvidia-smi
answers for the health rows, crashes, hangs and hostile answers."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.box_python import (
    NO_KERNEL_IMAGE,
    gpu,
    install_standin_libreyolo,
    install_standin_torch,
    make_venv,
)
from support.fleets import box_entry, make_fleet
from support.nvidia_smi import fake_nvidia_smi
from support.sshd import KeyPair, Sshd
from support.stand_in_trainer import TRAINER

from tui.__main__ import main
from tui.actions.preflight import check
from tui.model.config import FleetConfig
from tui.model.preflight_doc import check_document
from tui.store.journal import Journal

LIBREYOLO_CHECKS = {"python": "3.11.7", "torch": "2.14.1+cu130", "cuda": "13.0",
                    "cudnn": "92400", "gpu": [{"name": "NVIDIA H100 80GB HBM3"}],
                    "packages": {}, "schema_version": 1}
SM50_86 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]
H100 = gpu("NVIDIA H100 80GB HBM3", (9, 0))
A100 = gpu("NVIDIA A100-SXM4-80GB", (8, 0))
V100 = gpu("Tesla V100-SXM2-32GB", (7, 0), memory=32 << 30)

Boxes = Callable[..., FleetConfig]


@pytest.fixture
def fleet_of(tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> Boxes:
    """A one-box fleet whose box runs `python` with `env` (a PATH with a fake nvidia-smi)."""

    def make(python: str | Path, env: dict[str, str] | None = None, **extra: Any
             ) -> FleetConfig:
        server = sshd_factory("box", env=env)
        return make_fleet(tmp_path, [box_entry(server, client_key, python=str(python),
                                               **extra)],
                          known_hosts=[server.known_hosts_line()])

    return make


def standin_box(tmp_path: Path, torch: dict[str, Any], *, libreyolo: bool = True) -> Path:
    python = make_venv(tmp_path / "venv")
    install_standin_torch(python, torch)
    if libreyolo:
        install_standin_libreyolo(python, LIBREYOLO_CHECKS)
    return python


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


def messages(document: dict[str, Any], severity: str = "error") -> list[str]:
    return [f["message"] for f in document["findings"] if f["severity"] == severity]


def fixes(document: dict[str, Any], severity: str = "error") -> list[str]:
    return [f["fix"] for f in document["findings"] if f["severity"] == severity]


def test_this_machines_cpu_only_torch_says_cuda_not_available(
        fleet_of: Boxes, capsys: pytest.CaptureFixture[str]) -> None:
    """torch 2.14.1 and LibreYOLO are installed here, no GPU: the check names exactly that."""
    fleet = fleet_of(sys.executable)
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "problems" and doc["complete"]
    assert messages(doc) == ["CUDA not available: no GPU visible to this container "
                             "(and no nvidia-smi)"]
    assert doc["torch"]["version"].startswith("2.14.1") and doc["torch"]["available"] is False
    assert doc["torch"]["cuda"] == "13.0"
    assert doc["libreyolo"]["installed"] and doc["libreyolo"]["version"] == "1.6.0"
    assert doc["libreyolo"]["checks"]["torch"].startswith("2.14.1")
    assert doc["executable"] == sys.executable
    journal = Journal()
    assert journal.entries[-1]["action"] == "check"
    assert journal.entries[-1]["outcome"] == "problems"
    assert "CUDA not available" in journal.entries[-1]["message"]
    code, text = run_cli(["--config", fleet.source, "check", "box"], capsys)
    assert code == 1
    assert "✗ CUDA not available: no GPU visible to this container" in text
    assert "fix: run on a box with a GPU" in text


def test_a_box_without_a_gpu_by_config_checks_ok_and_launches_without_force(
        tmp_path: Path, fleet_of: Boxes, capsys: pytest.CaptureFixture[str]) -> None:
    """The same CPU-only machine with `gpu = false`: check says so, not a red verdict, and
    a launch there needs no --force."""
    runs = tmp_path / "runs"
    fleet = fleet_of(sys.executable, gpu=False, runs_roots=[str(runs)])
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "ok", doc["findings"]
    assert "no GPU, by config (gpu = false): runs train on the CPU" in messages(doc, "info")
    entry = Journal().entries[-1]
    assert (entry["outcome"], entry["message"]) == (
        "ok", f"no GPU, by config; torch {doc['torch']['version']}")
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    assert main(["launch", "box", "--config", fleet.source, "--name", "r1", "--script",
                 str(trainer), "--", "ok", "0", "0"]) == 0
    assert "force" not in Journal().entries[-1]


def test_an_interpreter_without_torch(tmp_path: Path, fleet_of: Boxes,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    python = make_venv(tmp_path / "bare")
    fleet = fleet_of(python)
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    assert messages(doc) == [f"torch not installed in {python}",
                             f"LibreYOLO is not installed in {python}"]
    assert "install torch for this card first" in fixes(doc)[0]
    assert "set `python` for this box" in fixes(doc)[0]
    assert doc["torch"] == {"installed": False}


def test_a_wheel_without_kernels_for_the_card(tmp_path: Path, fleet_of: Boxes,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """is_available() says True, the first kernel raises torch's real error text."""
    python = standin_box(tmp_path, {"arch_list": SM50_86, "gpus": [
        gpu("NVIDIA H100 80GB HBM3", (9, 0), error=NO_KERNEL_IMAGE)]})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "h100-healthy"))
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    assert messages(doc) == ["no kernel image: this torch wheel has no kernels for sm_90 "
                             "(compiled for sm_50..sm_86); install a torch build for this card"]
    assert "cu126" in fixes(doc)[0]
    assert doc["gpus"][0]["matmul_ok"] is False and doc["gpus"][0]["kernels"] is None
    assert "no kernel image is available" in doc["gpus"][0]["error"]


def test_a_healthy_card_passes_and_reports_its_matmul(tmp_path: Path, fleet_of: Boxes,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_80", "sm_90"], "gpus": [H100]})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "h100-healthy"),
                     persistent=str(tmp_path))
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0, doc["findings"]
    assert doc["verdict"] == "ok" and doc["findings"] == []
    card = doc["gpus"][0]
    assert card["matmul_ok"] and card["kernels"] == "sass" and card["capability"] == [9, 0]
    assert card["matmul_ms"] is not None and card["tflops"] > 0
    health = doc["health"][0]
    # read under load: gen 5 x16, where the idle reading was gen 1
    assert health["link_under_load"] and health["link_gen"] == 5.0
    assert health["compute_cap"] == [9, 0] and health["throttle_reasons"] == []
    assert doc["libreyolo"]["checks"]["gpus"] == 1


def test_recorded_sick_cards_are_named_with_their_fixes(
        tmp_path: Path, fleet_of: Boxes, capsys: pytest.CaptureFixture[str]) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_80", "sm_90"], "gpus": [A100, A100]})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "a100-sick"))
    code, out = run_cli(["--config", fleet.source, "check", "box"], capsys)
    assert code == 1
    who = "GPU 1 (NVIDIA A100-SXM4-80GB)"
    for line in (f"✗ {who}: 3 uncorrected ECC errors since the driver loaded",
                 f"✗ {who}: remapped memory rows are pending (a reset is needed)",
                 f"✗ {who}: clocks held down by hardware slowdown, hardware thermal slowdown",
                 f"✗ {who}: 92 °C before any training",
                 f"! {who}: PCIe link gen 4 x8 under load, the card can do gen 4 x16"):
        assert line in out, out
    assert "GPU 0 (" not in out.split("verdict:")[1]


def test_pages_waiting_to_be_retired_over_ssh(tmp_path: Path, fleet_of: Boxes,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_70", "sm_80"], "gpus": [V100, V100]})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "v100-retired-pages"))
    code, out = run_cli(["--config", fleet.source, "check", "box"], capsys)
    assert code == 1
    assert ("✗ GPU 1 (Tesla V100-SXM2-32GB): memory pages are waiting to be retired (a reset "
            "is needed)") in out, out
    assert "GPU 0 (" not in out.split("verdict:")[1]


def test_a_failed_row_remap_over_ssh(tmp_path: Path, fleet_of: Boxes,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_80"], "gpus": [A100, A100]})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "a100-remap-failure"))
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    (failure,) = [f for f in doc["findings"] if f["code"].startswith("gpu")]
    assert failure["code"] == "gpu1.remap_failure" and failure["fix"] == "rent another box"
    assert [g["remapped_failure"] for g in doc["health"]] == [False, True]


def test_an_old_driver_without_newer_queries(tmp_path: Path, fleet_of: Boxes,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Driver 470 answers only the old throttle field; torch built for CUDA 13 cannot start."""
    python = standin_box(tmp_path, {"available": False, "cuda": "13.0", "gpus": []})
    fleet = fleet_of(python, fake_nvidia_smi(tmp_path / "bin", "rtx3090-old-driver"))
    code, out = run_cli(["--config", fleet.source, "check", "box", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1
    assert messages(doc) == ["CUDA not available: driver 470.182.03 is older than torch "
                             "2.14.1+cu130's CUDA 13.0 needs (>= 580.65)"]
    assert "CUDA 11.x" in fixes(doc)[0]
    health = doc["health"][0]
    assert health["throttle_mask"] == 1 and health["compute_cap"] is None
    assert health["driver"] == "470.182.03"


def test_an_interpreter_that_does_not_exist(fleet_of: Boxes,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of("/opt/conda/bin/python")
    code, out = run_cli(["--config", fleet.source, "check", "box"], capsys)
    assert code == 1
    assert ("the interpreter /opt/conda/bin/python was not found on box box: set `python` for "
            "this box to the one that has torch") in out


async def test_a_crash_in_the_driver_is_named_by_its_step(tmp_path: Path,
                                                          fleet_of: Boxes) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_90"], "gpus": [
        gpu("NVIDIA H100 80GB HBM3", (9, 0), crash=True)]})
    fleet = fleet_of(python)
    report = await check(fleet, fleet.boxes[0])
    assert not report.complete and report.exit_code == 1
    assert report.errors[0].message.startswith(
        "the check on box box was killed by signal SEGV during GPU 0: 2000x2000 matmul")
    # what came before the crash is still reported
    assert report.torch == {} and report.places["hf_home"]


async def test_a_hung_matmul_stops_at_the_deadline(tmp_path: Path, fleet_of: Boxes) -> None:
    python = standin_box(tmp_path, {"arch_list": ["sm_90"], "matmul_sleep": 600,
                                    "gpus": [H100]})
    fleet = fleet_of(python)
    stages: list[str] = []
    report = await check(fleet, fleet.boxes[0], deadline=8, on_stage=stages.append)
    assert report.exit_code == 1 and not report.complete
    assert report.errors[0].message.startswith("the check on box box did not finish within 8 s")
    assert "during GPU 0: 2000x2000 matmul" in report.errors[0].message
    assert stages[-1] == "GPU 0: 2000x2000 matmul"


HOSTILE = textwrap.dedent(r'''
    import json, re, sys
    nonce = re.search(r"NONCE = '([0-9a-f]+)'", sys.stdin.read()).group(1)
    def frame(obj, raw=None):
        data = raw if raw is not None else json.dumps(obj).encode()
        sys.stdout.buffer.write(b"\n--gpurent-%s %d\n" % (nonce.encode(), len(data)) + data)
    print("Welcome to a box \x1b[31m banner")
    frame(None, b"[1, 2")                       # not JSON
    frame(None, b"[" * 100000 + b"]" * 100000)  # nested beyond any parser's patience
    frame({"part": "host", "data": {"python": "\x1b]0;pwned\x07 3.11", "executable": 7,
           "hf_home": {"path": "/x\x1b[2J", "dev": -5, "free": 1e300, "exists": "yes"},
           "runs_roots": "not a list"}})
    frame({"part": "smi", "data": {"base": {"rc": 0, "out": "0, bus, 550.1, 1e999, 1e400, "
           "NaN, Maybe, 9, 1, 16, 2, \x1b[31mEvil GPU, with, commas\n"
           "99999999999999, x, , , , , , , , , , y\n"}}})
    frame({"part": "torch", "data": {"installed": True, "version": "2.9\x1b[0m",
           "cuda": "12.4", "available": True, "arch_list": ["sm_90", 5, "sm_9000x"],
           "device_count": 10**30, "gpus": [{"index": -1}, {"index": "0"},
           {"index": 0, "name": "G\x07PU", "capability": [9, "0"], "memory": -1,
            "matmul": {"finite": True, "sum": 1e308, "best_s": 0, "n": 2000}}]}})
    frame({"part": "libreyolo", "data": {"installed": True, "version": {"x": 1},
           "checks": {"torch": "\x1b[5m2.9", "gpu": "many"}}})
    frame({"done": True})
''')


async def test_a_hostile_answer_is_read_safely(tmp_path: Path, fleet_of: Boxes) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n{HOSTILE}")
    fake.chmod(0o755)
    fleet = fleet_of(fake)
    report = await check(fleet, fleet.boxes[0])
    text = "\n".join(report.lines()) + json.dumps(check_document(report))
    assert "\x1b" not in text and "\x07" not in text
    assert report.python_version == "3.11" and report.executable is None
    assert [g.index for g in report.gpus] == [0]
    card = report.gpus[0]
    assert card.capability is None and card.memory is None
    assert not card.matmul_ok and "off" in (card.error or "")
    assert report.health[0].name == "Evil GPU, with, commas"
    assert report.health[0].memory_mib is None and report.health[0].temp_c is None
    assert report.libreyolo["version"] is None  # a table where a string belongs
    assert "device_count" not in report.torch
    assert report.exit_code == 1
