"""`gpurent-tui profile` against real sshd boxes whose LibreYOLO is missing or hostile, and
a box where a run is training (refused unless --force). The real profiler on the CPU is in
tests/e2e/test_profile_training.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.box_python import make_venv
from support.disk_runs import running_root
from support.fleets import box_entry, make_fleet
from support.profile_box import hostile_libreyolo
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.bill import Event
from tui.model.config import FleetConfig
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


def test_a_training_run_is_refused_unless_forced(
        tmp_path: Path, fleet_with: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    root = running_root(tmp_path, 1000)
    fleet = fleet_with(make_venv(tmp_path / "bare"), runs_roots=[str(root)])
    code = main(["--config", fleet.source, "profile", "box", *ARGS])
    err = capsys.readouterr().err
    assert code == 1
    assert ("profile refused: run yolox_running is training on box box: profiling now would "
            "compete for its GPU and cores and measure neither; --force to profile anyway"
            ) in err
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
