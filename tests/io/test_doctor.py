"""`gpurent-tui doctor` runs LibreYOLO's own dataset doctor on a real sshd box, with the box's
interpreter (this machine's python, which has LibreYOLO 1.6.0), and reports what it found."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.box_python import make_venv
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import make_dataset
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.config import FleetConfig


@pytest.fixture
def fleet_with(tmp_path: Path, sshd_factory: Callable[..., Sshd],
               client_key: KeyPair) -> Callable[[str], FleetConfig]:
    servers: list[Sshd] = []

    def make(python: str) -> FleetConfig:
        if not servers:
            servers.append(sshd_factory("box"))
        server = servers[0]
        return make_fleet(tmp_path, [box_entry(server, client_key, python=python)],
                          known_hosts=[server.known_hosts_line()])

    return make


def test_doctor_reports_libreyolos_findings_and_fails_on_errors(
        tmp_path: Path, fleet_with: Callable[[str], FleetConfig],
        capsys: pytest.CaptureFixture[str]) -> None:
    # A folder name a shell would act on: the path reaches LibreYOLO as one argument.
    data_yaml = make_dataset(tmp_path / "my data $(touch PWNED)")
    (data_yaml.parent / "labels" / "train" / "train_000.txt").write_text("junk\n")
    fleet = fleet_with(sys.executable)
    code = main(["--config", fleet.source, "doctor", "box", str(data_yaml), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["failure"] is None
    assert doc["summary"]["errors"] == 1 and doc["libreyolo_version"] == "1.6.0"
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert errors[0]["check_id"] == "labels.syntax" and errors[0]["split"] == "train"
    assert errors[0]["paths"] == [str(data_yaml.parent / "labels/train/train_000.txt")]
    assert doc["stats"]["nc"] == 2 and doc["stats"]["splits"]["train"]["images"] == 16
    assert not list(tmp_path.rglob("PWNED")) and not (Path.home() / "PWNED").exists()

    code = main(["--config", fleet.source, "doctor", "box", str(data_yaml), "--fast"])
    text = capsys.readouterr().out
    assert code == 1
    assert "✗ labels.syntax [train]: 1 malformed label line(s)" in text


def test_a_clean_data_set_exits_0(tmp_path: Path, fleet_with: Callable[[str], FleetConfig],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    data_yaml = make_dataset(tmp_path / "ds")
    fleet = fleet_with(sys.executable)
    code = main(["--config", fleet.source, "doctor", "box", str(data_yaml), "--fast"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 errors" in out


def test_doctor_says_what_is_missing(tmp_path: Path, fleet_with: Callable[[str], FleetConfig],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_with(sys.executable)
    code = main(["--config", fleet.source, "doctor", "box", str(tmp_path / "nope.yaml")])
    out = capsys.readouterr().out
    assert code == 1
    assert "libreyolo doctor: data_not_found:" in out and "nope.yaml" in out

    bare = make_venv(tmp_path / "bare")
    fleet = fleet_with(str(bare))
    code = main(["--config", fleet.source, "doctor", "box", "data.yaml"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"LibreYOLO is not installed in {bare}: pip install libreyolo" in out


def test_strict_fails_on_warnings_alone(tmp_path: Path, fleet_with: Callable[[str], FleetConfig],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """An orphan label is a LibreYOLO warning, no error: exit 0, and 1 with --strict."""
    data_yaml = make_dataset(tmp_path / "ds")
    (data_yaml.parent / "labels" / "train" / "no_such_image.txt").write_text("0 .5 .5 .1 .1\n")
    fleet = fleet_with(sys.executable)
    code = main(["--config", fleet.source, "doctor", "box", str(data_yaml), "--fast", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["exit_code"] == 0 and doc["strict"] is False
    assert doc["summary"]["errors"] == 0 and doc["summary"]["warnings"] == 1
    assert [f["check_id"] for f in doc["findings"] if f["severity"] == "warning"] == [
        "files.orphan_label"]
    code = main(["--config", fleet.source, "doctor", "box", str(data_yaml), "--fast",
                 "--strict"])
    text = capsys.readouterr().out
    assert code == 1, text
    assert "0 errors, 1 warnings" in text and "--strict: warnings fail" in text
