"""`gpurent-tui profile` runs real `libreyolo profile run` on a real sshd box, on the CPU,
with a real LibreYOLO checkpoint (a fresh yolox-n saved by LibreYOLO itself): once from
flags, once from a run's own train_config.yaml and last.pt."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.libreyolo_train import make_dataset
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.store.journal import Journal

pytestmark = pytest.mark.training


def checkpoint(path: Path) -> Path:
    import libreyolo

    libreyolo.LibreYOLOX(None, size="n", nb_classes=2, device="cpu").save(str(path))
    return path


def test_profile_measures_on_the_cpu_and_prices_it(
        tmp_path: Path, sshd_factory: type[Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = make_dataset(tmp_path / "ds")
    weights = checkpoint(tmp_path / "w.pt")
    root = runs_root_with(tmp_path, "yolox_completed")
    run = root / "yolox_completed"
    (run / "weights").mkdir()
    shutil.copy(weights, run / "weights" / "last.pt")
    (run / "train_config.yaml").write_text(
        f"size: n\ndata: {data}\nimgsz: 64\nbatch: 8\nworkers: 0\ndevice: cpu\n"
        "mosaic_scale:\n- 0.1\n- 2.0\n")
    server = sshd_factory("box")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, python=sys.executable,
                                            runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 0.5})],
                       known_hosts=[server.known_hosts_line()])

    code = main(["--config", fleet.source, "profile", "box", "--data", str(data),
                 "--weights", str(weights), "--model", "yolox-n", "--batch", "8",
                 "--imgsz", "64", "--workers", "0", "--device", "cpu", "--steps", "2",
                 "--warmup", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    cell = doc["cells"][0]
    assert doc["outcome"] == "done" and cell["problem"] is None
    assert cell["img_per_s"] > 0 and 0 <= cell["dataload_frac"] <= 1
    assert cell["usd_per_1k_images"] == pytest.approx(0.5 / (cell["img_per_s"] * 3.6))
    assert cell["libreyolo_bound"] == "host / launch"
    assert doc["verdict"] and doc["cpus"] >= 1
    assert "GPU" not in doc["verdict"] or doc["verdict"].startswith("profiled on the CPU")
    assert Journal().entries[-1]["action"] == "profile"
    assert not list(Path("/tmp").glob("gpurent-profile-*/p/prof/profile.json"))

    code = main(["--config", fleet.source, "profile", "box", "yolox_completed",
                 "--steps", "2", "--warmup", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "img/s on box box (batch 8, workers 0); LibreYOLO says: host / launch" in out
