"""`gpurent-tui status` against real sshd boxes: JSON document, table, exit codes."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd

from tui.__main__ import main


def test_status_json_all_boxes_answer(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                                      client_key: KeyPair,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", "yolo9_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "a", runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpurent.status/1"
    (box,) = doc["boxes"]
    assert box["connection"] == "ok" and box["error"] is None and box["box_time"]
    assert box["gpu_note"] == "no nvidia-smi on this box" and box["disks"]
    runs = {r["name"]: r for r in box["runs"]}
    assert {n: r["health"] for n, r in runs.items()} == {
        "yolox_completed": "completed", "yolox_failed": "failed", "yolo9_completed": "completed"}
    assert runs["yolox_completed"]["loss_history"] and runs["yolo9_completed"]["current_epoch"] == 4
    assert runs["yolox_failed"]["error"]["type"] == "RuntimeError"
    # Never pushed: every finished epoch is what a crash would cost (no rate: no dollars).
    assert runs["yolox_completed"]["unpushed_epochs"] == 6
    assert runs["yolox_failed"]["unpushed_epochs"] == 2  # it died in its third epoch
    assert runs["yolox_completed"]["last_verified_push"] is None


def test_status_reports_the_others_when_one_box_is_down(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    try:
        fleet = make_fleet(tmp_path, [
            box_entry(server, client_key, "up", runs_roots=[str(root)]),
            {**box_entry(server, client_key, "down"), "port": closed.getsockname()[1]},
        ], known_hosts=[server.known_hosts_line()])
        assert main(["--config", fleet.source, "status", "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert main(["status", "--config", fleet.source]) == 1
        table = capsys.readouterr().out
    finally:
        closed.close()
    boxes = {b["name"]: b for b in doc["boxes"]}
    assert boxes["up"]["connection"] == "ok" and len(boxes["up"]["runs"]) == 1
    assert boxes["down"]["connection"] == "unreachable" and boxes["down"]["runs"] == []
    assert "refused" in boxes["down"]["error"].lower()
    assert "up  [ok]" in table and "down  [unreachable]" in table
    assert "yolox_completed" in table and "completed" in table


def test_status_with_a_bad_config_exits_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "fleet.toml"
    bad.write_text('[[box]]\nname = "a"\n')
    assert main(["status", "--json", "--config", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{bad}:1: box 'a': key 'host': missing (required)" in captured.err
