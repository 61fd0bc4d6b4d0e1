"""The disk projection in the panel, against a real sshd box: the box's header says where
its runs filesystem ends once the running runs are done, or, in red, that it fills first,
and the panel rings the disk_fill alert once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.disk_runs import HUGE, running_root
from support.fleets import box_entry, make_fleet
from support.pilot import until
from support.sshd import KeyPair, Sshd

from tui.app import GpurentApp
from tui.model.config import FleetConfig
from tui.screens.fleet import FleetScreen


def box_text(app: GpurentApp) -> str:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen.fleet_list.text("gpu-1")


def fleet_of(tmp_path: Path, server: Sshd, key: KeyPair, checkpoint: int) -> FleetConfig:
    root = running_root(tmp_path, checkpoint)
    return make_fleet(tmp_path, [box_entry(server, key, "gpu-1", runs_roots=[str(root)])],
                      known_hosts=[server.known_hosts_line()], refresh_seconds=1)


async def test_the_header_warns_when_the_runs_root_fills_first(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    app = GpurentApp(fleet_of(tmp_path, sshd_factory(), client_key, HUGE))
    async with app.run_test(size=(160, 36)) as pilot:
        await until(pilot, lambda: "yolox_running" in box_text(app))
        head = box_text(app).splitlines()[0]
        assert "✗ disk fills before the runs end: 3.60 TB to write," in head, head
        notices = [n for n in app._notifications if n.title == "disk will fill on gpu-1"]
        assert len(notices) == 1, [n.title for n in app._notifications]
        assert "will fill before the runs finish: yolox_running" in notices[0].message
        await pilot.pause(2.5)  # more looks at the same short disk: no second alert
        assert len([n for n in app._notifications if n.title == "disk will fill on gpu-1"]) == 1


async def test_the_header_says_where_the_disk_ends(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    app = GpurentApp(fleet_of(tmp_path, sshd_factory(), client_key, 1000))
    async with app.run_test(size=(160, 36)) as pilot:
        await until(pilot, lambda: "yolox_running" in box_text(app))
        (disk,) = app.states["gpu-1"].disks
        head = box_text(app).splitlines()[0]
        assert "→ " in head and "% at runs' end" in head, head
        assert "fills" not in head
        percent = int(head.split("→ ")[1].split("%")[0])
        assert disk.percent <= percent <= disk.percent + 1
