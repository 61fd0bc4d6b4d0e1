"""`p` on a serverless run: its weights fetched from the volume (the `modal` stand-in),
fetched twice and hashed, written as a local push is, journaled as verified; a file that
changes while it is copied is not kept."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from support.modal_standin import BIN, ModalStandIn, status_json

from tui.actions.serverless_push import push_run
from tui.model.config import ServerlessConfig
from tui.model.serverless_runs import VolumeRead, fold_runs
from tui.store.journal import Journal


@pytest.fixture
def modal(tmp_path: Path) -> ModalStandIn:
    stand_in = ModalStandIn(tmp_path / "modal")
    stand_in.put("runs/exp1/status.json", status_json())
    stand_in.put("runs/exp1/weights/best.pt", os.urandom(300_000))
    stand_in.put("runs/exp1/weights/last.pt", os.urandom(200_000))
    stand_in.put("runs/exp1/weights/epoch_3.pt", b"e" * 10)
    return stand_in


def entry(tmp_path: Path) -> ServerlessConfig:
    return ServerlessConfig(name="modal-yolo", provider="modal", app="yolo-train",
                            volume="runs-vol", runs_path="/runs", gpu="H100",
                            cli=str(BIN / "modal"), local_dir=str(tmp_path / "pushed"))


def the_run(modal: ModalStandIn):  # type: ignore[no-untyped-def]
    (run,) = fold_runs((), [VolumeRead("runs/exp1", status_json().encode())], "/runs", 0.0)
    return run


async def test_push_copies_best_and_last_verified(tmp_path: Path, modal: ModalStandIn) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    report = await push_run(entry(tmp_path), the_run(modal), journal, lambda: 1.0,
                            env=modal.env)
    assert report.code == 0, report.lines
    folder = tmp_path / "pushed" / "modal-yolo" / "exp1"
    for name in ("best.pt", "last.pt"):
        mine = (folder / name).read_bytes()
        assert mine == (modal.volume_dir / "runs/exp1/weights" / name).read_bytes()
        assert (folder / name).stat().st_mode & 0o777 == 0o600
    assert not (folder / "epoch_3.pt").exists()
    assert not [p for p in folder.iterdir() if p.name.startswith(".fetch-")]
    (line,) = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert (line["action"], line["outcome"], line["verified"], line["box"]) == \
        ("push", "done", True, "modal-yolo")
    best = next(f for f in line["files"] if f["name"] == "weights/best.pt")
    assert best["sha256"] == hashlib.sha256((folder / "best.pt").read_bytes()).hexdigest()
    gets = [c for c in modal.calls() if c[:2] == ["volume", "get"]]
    assert len(gets) == 4  # each file fetched twice


async def test_a_file_changing_while_copied_is_not_kept(tmp_path: Path,
                                                        modal: ModalStandIn) -> None:
    modal.update(grow=["runs/exp1/weights/last.pt"])
    journal = Journal(tmp_path / "journal.jsonl")
    report = await push_run(entry(tmp_path), the_run(modal), journal, lambda: 1.0,
                            env=modal.env)
    assert report.code != 0
    assert any("last.pt: changed on the volume while it was copied" in x for x in report.lines)
    folder = tmp_path / "pushed" / "modal-yolo" / "exp1"
    assert (folder / "best.pt").exists() and not (folder / "last.pt").exists()
    (line,) = [json.loads(x) for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    assert line["outcome"] == "failed" and line["verified"] is False


async def test_no_local_dir_and_a_link_in_the_way_are_refused(tmp_path: Path,
                                                              modal: ModalStandIn) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    bare = ServerlessConfig(**{**entry(tmp_path).__dict__, "local_dir": None})
    report = await push_run(bare, the_run(modal), journal, lambda: 1.0, env=modal.env)
    assert report.code != 0 and "no local_dir" in report.lines[0]
    (tmp_path / "pushed").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "pushed" / "modal-yolo").symlink_to(tmp_path / "elsewhere")
    report = await push_run(entry(tmp_path), the_run(modal), journal, lambda: 1.0,
                            env=modal.env)
    assert report.code != 0 and "symbolic link" in report.lines[-1]
    assert not list((tmp_path / "elsewhere").iterdir())


async def test_a_run_without_weights_yet_says_so_not_the_clis_error(
        tmp_path: Path, modal: ModalStandIn) -> None:
    modal.put("runs/torn/status.json", status_json())
    (run,) = fold_runs((), [VolumeRead("runs/torn", status_json().encode())], "/runs", 0.0)
    report = await push_run(entry(tmp_path), run, Journal(tmp_path / "journal.jsonl"),
                            lambda: 1.0, env=modal.env)
    assert report.code != 0
    assert report.lines[-1] == "torn has no weights yet (no runs/torn/weights on volume " \
        "runs-vol)", report.lines
    assert not any("No such file" in line for line in report.lines)
