"""A watched box's disk at the end of its running runs, over a real sshd box: `status` and
`status --json` carry the projection, and `watch` alerts a runs root that will fill first,
once. The checkpoint is a sparse file: its size is what the box reports, no disk is used."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.disk_runs import HUGE, running_root
from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.config import FleetConfig
from tui.model.sizing import LOG_BYTES_PER_EPOCH


def fleet_of(tmp_path: Path, server: Sshd, key: KeyPair, root: Path) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, "b", runs_roots=[str(root)])],
                      known_hosts=[server.known_hosts_line()])


def test_status_carries_the_projection_and_the_fill_warning(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of(tmp_path, sshd_factory(), client_key, running_root(tmp_path, HUGE))
    assert main(["status", "--json", "--config", fleet.source]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    projection = box["disk_projection"]
    (run,) = projection["runs"]
    # Epochs 10, 20, 30 to come (LibreYOLO's default period, assumed) and best.pt unwritten.
    assert run["run"] == "yolox_running" and run["save_points_left"] == 3
    assert run["more_bytes"] == 4 * HUGE + 23 * LOG_BYTES_PER_EPOCH
    assert "assumed 10" in run["assumed"]
    (fs,) = projection["filesystems"]
    assert fs["fills"] is True and fs["need_bytes"] == run["more_bytes"]
    assert fs["free_bytes"] == box["disks"][0]["free_bytes"] and fs["used_at_end_pct"] > 100
    (warning,) = [w for w in projection["warnings"] if w["severity"] == "warning"]
    assert "will fill before the runs finish: yolox_running" in warning["message"]

    assert main(["status", "--config", fleet.source]) == 0
    text = capsys.readouterr().out
    assert "will fill before the runs finish" in text


def test_status_says_where_a_disk_that_holds_its_runs_ends(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of(tmp_path, sshd_factory(), client_key, running_root(tmp_path, 1000))
    assert main(["status", "--json", "--config", fleet.source]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    (fs,) = box["disk_projection"]["filesystems"]
    assert fs["fills"] is False and fs["need_bytes"] == 4000 + 23 * LOG_BYTES_PER_EPOCH
    assert not [w for w in box["disk_projection"]["warnings"] if w["severity"] == "warning"]
    assert main(["status", "--config", fleet.source]) == 0
    text = capsys.readouterr().out
    assert f"· disk at the runs' end: {fs['where']} {fs['used_at_end_pct']}%" in text


async def test_watch_alerts_a_runs_root_that_will_fill_once(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path) -> None:
    from tui.runtime.watch_sink import Watch
    from tui.store.journal import Journal

    fleet = fleet_of(tmp_path, sshd_factory(), client_key, running_root(tmp_path, HUGE))
    logs: list[str] = []
    watch = Watch(fleet, journal=Journal(tmp_path / "journal.jsonl"), log=logs.append)
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    looks = 0
    try:
        async with asyncio.timeout(60):
            while looks < 3:  # three looks at a box that will still fill: one alert
                before = watch.states.get("b")
                await asyncio.sleep(0.2)
                after = watch.states.get("b")
                if after is not None and after is not before and after.last_ok_at:
                    looks += 1
    finally:
        stop.set()
        assert await task == 0
    alerts = [line for line in logs if line.startswith("alert disk_fill")]
    assert len(alerts) == 1, logs
    assert "box='b'" in alerts[0] and "will fill before the runs finish" in alerts[0]
