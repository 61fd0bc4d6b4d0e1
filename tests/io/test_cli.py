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


def test_status_exits_0_for_boxes_stopped_or_destroyed_on_purpose(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """We stop one pod with `gpurent-tui stop` (its effect read back) and destroyed another;
    neither answers SSH any more. `status` says so and exits 0 (cron sees no failure); a
    box down with no stop of ours still fails it."""
    from support.provider_servers import RunPodServer, runpod_pod

    from tui.store.journal import Journal

    monkeypatch.setenv("RUNPOD_API_KEY", "runpod-key")
    server = sshd_factory()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    with RunPodServer("runpod-key", [runpod_pod("pod1"), runpod_pod("pod2")]) as runpod:
        try:
            pods = [{**box_entry(server, client_key, name), "port": port,
                     "provider": "runpod", "instance_id": pod}
                    for name, pod in (("stopped-box", "pod1"), ("gone-box", "pod2"))]
            fleet = make_fleet(tmp_path, [box_entry(server, client_key, "up"), *pods],
                               known_hosts=[server.known_hosts_line()],
                               providers={"runpod": {"base_url": runpod.url}})
            assert main(["stop", "stopped-box", "--config", fleet.source]) == 0
            capsys.readouterr()
            runpod.change("pod2", {"status": "TERMINATED", "cost": 0.0, "ssh": None})
            Journal().record(box="gone-box", action="destroy", outcome="done",
                             message="destroyed", at=1_800_000_000.0)
            assert main(["status", "--json", "--config", fleet.source]) == 0
            doc = json.loads(capsys.readouterr().out)
            assert main(["status", "--config", fleet.source]) == 0
            table = capsys.readouterr().out
            # The same box with no stop of ours on record is down: exit 1, as before.
            Journal().record(box="stopped-box", action="start", outcome="done",
                             message="started")
            assert main(["status", "--json", "--config", fleet.source]) == 1
            again = json.loads(capsys.readouterr().out)
        finally:
            closed.close()
    boxes = {b["name"]: b for b in doc["boxes"]}
    assert boxes["stopped-box"]["connection"] == "stopped"
    assert boxes["stopped-box"]["rest"]["kind"] == "stopped"
    assert boxes["stopped-box"]["rest"]["by"] == "you" and boxes["stopped-box"]["rest"]["at"]
    assert boxes["gone-box"]["connection"] == "destroyed"
    assert boxes["gone-box"]["rest"] == {"kind": "destroyed", "by": "you",
                                         "at": "2027-01-15T08:00:00+00:00", "sure": True,
                                         "words": "destroyed (by you)"}
    assert "stopped-box  [stopped]" in table and "gone-box  [destroyed]" in table
    assert "· stopped (by you, " in table and "· destroyed (by you, 2027-01-15" in table
    assert "stop pays" not in table.split("gone-box")[1]
    assert {b["name"]: b["connection"] for b in again["boxes"]}["stopped-box"] == "unreachable"
