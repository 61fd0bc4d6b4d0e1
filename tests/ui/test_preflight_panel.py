"""The preflight in the panel, against real sshd boxes: `g` checks the box of the cursor (its
steps on the box's line, the verdict in its header and the journal, still there after a
restart), `G` runs LibreYOLO's doctor on a data set in its own screen."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.libreyolo_train import make_dataset
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd
from textual.widgets import Input, Static

from tui.app import GpurentApp
from tui.model.config import FleetConfig
from tui.screens.doctor import DoctorScreen
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal


def one_box(tmp_path: Path, server: Sshd, key: KeyPair, **extra: object) -> FleetConfig:
    root = runs_root_with(tmp_path, "yolox_completed")
    return make_fleet(tmp_path, [box_entry(server, key, "gpu-1", runs_roots=[str(root)],
                                           python=sys.executable, **extra)],
                      known_hosts=[server.known_hosts_line()], refresh_seconds=30)


async def test_g_checks_the_box_and_its_header_keeps_the_verdict(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    fleet = one_box(tmp_path, sshd_factory(), client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("g")
        await until(pilot, lambda: "checking: " in box_text(app, "gpu-1"))
        await until(pilot, lambda: "check failed" in box_text(app, "gpu-1"))
        text = box_text(app, "gpu-1")
        head = text.splitlines()[0]  # the header's item: what failed, in short
        assert "check ✗ CUDA not available" in head and "visible" not in head
        assert "✗ CUDA not available: no GPU visible to this container" in text
        assert "fix: run on a box with a GPU" in text
    entry = Journal().entries[-1]
    assert entry["action"] == "check" and entry["outcome"] == "problems"

    again = GpurentApp(fleet)  # a restarted panel shows the last verdict from the journal
    async with again.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(again, "gpu-1"))
        assert "check ✗ CUDA not available" in box_text(again, "gpu-1")


async def test_G_opens_the_doctor_for_a_data_set_on_the_box(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    data_yaml = make_dataset(tmp_path / "ds")
    (data_yaml.parent / "labels" / "val" / "val_001.txt").write_text("7 0.5 0.5 0.2 0.2\n")
    fleet = one_box(tmp_path, sshd_factory(), client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("G")
        await until(pilot, lambda: isinstance(app.screen, DoctorScreen))
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        screen.query_one("#data", Input).value = str(data_yaml)
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None, timeout=90)
        body = str(screen.query_one("#body", Static).render())
        assert "✗ labels." in body and "errors found: fix them before training" in body
        assert screen.report is not None and screen.report.exit_code == 1
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        await pilot.press("G")  # the path is offered again
        await until(pilot, lambda: isinstance(app.screen, DoctorScreen))
        assert app.screen.query_one("#data", Input).value == str(data_yaml)
