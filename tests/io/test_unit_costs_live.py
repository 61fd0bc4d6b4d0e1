"""Images/s, $/epoch and $/1k images of a real LibreYOLO run on a real sshd box, its data
set on the box; and the right-size verdict `costs` gives once two boxes were measured."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from support.fleets import DATA, box_entry, make_fleet
from support.libreyolo_train import make_dataset
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.bill import Event
from tui.store.ledger import Ledger
from tui.store.throughput import ThroughputStore

Factory = Callable[..., Sshd]
DEMO_CONFIG = Path(__file__).resolve().parents[2] / "tui" / "demo_data" / "yolox-n-40e" \
    / "train_config.yaml"


def run_root(tmp_path: Path, name: str, data_yaml: Path) -> Path:
    """A real finished yolox-n run (6 epochs) whose train_config.yaml, LibreYOLO's own,
    names a data set of 16 training images on the box."""
    root = tmp_path / name
    shutil.copytree(DATA / "yolox_completed", root / "run1")
    text = DEMO_CONFIG.read_text()
    old = next(line for line in text.splitlines() if line.startswith("data: "))
    (root / "run1" / "train_config.yaml").write_text(text.replace(old, f"data: {data_yaml}"))
    return root


def test_status_json_and_costs_give_unit_costs_and_the_verdict(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str], isolated_dirs: Path) -> None:
    server = sshd_factory()
    data = make_dataset(tmp_path / "ds", n_train=16, n_val=8)
    status = json.loads((DATA / "yolox_completed" / "status.json").read_text())
    started = datetime.fromisoformat(status["started_at"]).timestamp()
    ended = datetime.fromisoformat(status["updated_at"]).timestamp()
    times = [json.loads(line)["time"] for line in
             (DATA / "yolox_completed" / "metrics.jsonl").read_text().splitlines()]
    # The ledger billed both boxes through the run: $3.60/hr and $0.90/hr.
    ledger = Ledger(isolated_dirs / "state" / "gpurent-tui" / "ledger.jsonl")
    ledger.record(Event(started - 600, "dear", "running", 3.6, "config"))
    ledger.record(Event(started - 600, "cheap", "running", 0.9, "config"))
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "dear", runs_roots=[str(run_root(tmp_path, "a", data))],
                  pricing={"running_usd_per_hr": 3.6}),
        box_entry(server, client_key, "cheap", runs_roots=[str(run_root(tmp_path, "b", data))],
                  pricing={"running_usd_per_hr": 0.9}),
    ], known_hosts=[server.known_hosts_line()])
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    runs = {b["name"]: b["runs"][0] for b in doc["boxes"]}
    dear = runs["dear"]
    assert dear["training_images"] == 16
    assert dear["images_per_second"] == pytest.approx(16 * 6 / sum(times), abs=0.01)
    per_epoch = 3.6 * (ended - started) / 3600 / 6
    assert dear["usd_per_epoch"] == pytest.approx(per_epoch, rel=0.02)
    assert dear["usd_per_1k_images"] == pytest.approx(per_epoch / 16 * 1000, rel=0.02)
    assert runs["cheap"]["usd_per_epoch"] == pytest.approx(per_epoch / 4, rel=0.02)
    # Both boxes' measurements are kept beside the ledger, and `costs` compares them.
    kept = ThroughputStore(ledger.path.with_name("throughput.jsonl")).latest()
    assert sorted(m.box for m in kept) == ["cheap", "dear"]
    assert {m.model for m in kept} == {"yolox-n"} and {m.imgsz for m in kept} == {64}
    assert main(["costs", "--config", fleet.source]) == 0
    text = capsys.readouterr().out
    assert "box cheap (no GPU) does yolox-n at 64 px at $" in text
    assert ": 4.0x cheaper per epoch" in text
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    right = json.loads(capsys.readouterr().out)["right_size"]
    assert [b["box"] for b in right[0]["boxes"]] == ["cheap", "dear"]
    # The table says it too, under the run.
    assert main(["status", "--config", fleet.source]) == 0
    assert "img/s · $" in capsys.readouterr().out
