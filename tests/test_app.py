"""The panel driven by Pilot against real sshd boxes on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from conftest import box_entry, make_fleet, runs_root_with
from sshd import KeyPair, Sshd
from textual.pilot import Pilot
from textual.widgets import Static

from tui.app import GpurentApp
from tui.model.config import KEY_ACTIONS
from tui.screens.fleet import BoxSection, RunRow

Factory = Callable[..., Sshd]


async def until(pilot: Pilot, check: Callable[[], bool], timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError("the panel never showed the expected state")


def text_of(app: GpurentApp, selector: str) -> str:
    return "\n".join(str(w.render()) for w in app.query(selector).results(Static))


def section(app: GpurentApp, name: str) -> BoxSection:
    return next(s for s in app.query(BoxSection) if s.box.name == name)


def fleet(tmp_path: Path, server: Sshd, key: KeyPair, **top: object):  # type: ignore[no-untyped-def]
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", "yolox_running")
    return root, make_fleet(
        tmp_path,
        [box_entry(server, key, "alpha", runs_roots=[str(root)]),
         {**box_entry(server, key, "beta"), "port": 1}],
        known_hosts=[server.known_hosts_line()], refresh_seconds=30, **top)


def test_every_binding_can_be_remapped() -> None:
    ids = {b.id for b in GpurentApp.BINDINGS if not isinstance(b, tuple)}
    assert ids == set(KEY_ACTIONS)


async def test_panel_shows_boxes_runs_and_moves_between_runs(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    _, config = fleet(tmp_path, server, client_key)
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3
                    and section(app, "beta").box.connection != "connecting")
        head = text_of(app, "#fleet-head")
        assert "boxes 1/2 reachable" in head and "✔ completed 1" in head
        assert "✖ failed 1" in head
        beta = text_of(app, "BoxSection Static")
        assert "✖ unreachable" in beta and "connection refused" in beta
        rows = list(app.query(RunRow))
        assert [r.run.name for r in rows] == ["yolox_completed", "yolox_failed", "yolox_running"]
        assert app.focused is rows[0]
        await pilot.press("j")
        assert app.focused is rows[1]
        await pilot.press("j", "j")
        assert app.focused is rows[2]
        await pilot.press("k")
        assert app.focused is rows[1]
        assert "RuntimeError: injected failure at epoch 3" in str(
            rows[1].query_one("#detail", Static).render())
        await pilot.press("q")
    assert app.return_code == 0


async def test_remapped_keys(tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    _, config = fleet(tmp_path, server, client_key, keys={"next": "n", "previous": "p"})
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3)
        rows = list(app.query(RunRow))
        await pilot.press("n")
        assert app.focused is rows[1]
        await pilot.press("j")  # no longer bound
        assert app.focused is rows[1]
        await pilot.press("p")
        assert app.focused is rows[0]


async def test_panel_follows_a_run_and_a_box_going_down_and_back(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root, config = fleet(tmp_path, server, client_key, timeout_seconds=3)
    app = GpurentApp(config)
    run_dir = root / "yolox_running"
    status = json.loads((run_dir / "status.json").read_text())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3)
        row = next(r for r in app.query(RunRow) if r.run.name == "yolox_running")
        assert row.run.current_epoch == 7
        # The run advances (and its pid now lives): status.json rewritten as LibreYOLO does.
        status.update(current_epoch=8, completed_epochs=8, pid=os.getpid(),
                      updated_at=status["updated_at"])
        tmp = run_dir / "status.json.tmp"
        tmp.write_text(json.dumps(status))
        os.replace(tmp, run_dir / "status.json")
        await pilot.press("r")
        await until(pilot, lambda: row.run.current_epoch == 8)
        assert "8/30" in str(row.query_one("#main", Static).render())

        server.stop()
        await pilot.press("r")
        alpha = section(app, "alpha")
        await until(pilot, lambda: alpha.box.connection in ("unreachable", "timeout"))
        assert len(app.query(RunRow)) == 3  # the runs stay on screen
        assert "boxes 0/2 reachable" in text_of(app, "#fleet-head")
        server.restart()
        await pilot.press("r")
        await until(pilot, lambda: alpha.box.connection == "ok")
        assert "boxes 1/2 reachable" in text_of(app, "#fleet-head")
