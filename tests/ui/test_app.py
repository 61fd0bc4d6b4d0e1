"""The panel driven by Pilot against real sshd boxes on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.panel_states import NOW, fleet_config, fleet_states
from support.sshd import KeyPair, Sshd
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import Log, Static

from tui.app import GpurentApp
from tui.model.config import KEY_ACTIONS
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import BoxSection, RunRow
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail

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
    bindings = [*GpurentApp.BINDINGS, *RunDetail.BINDINGS, *CostScreen.BINDINGS,
                *ConfirmScreen.BINDINGS, *DestroyScreen.BINDINGS, *JournalScreen.BINDINGS]
    assert {b.id for b in bindings if isinstance(b, Binding)} == set(KEY_ACTIONS)


async def test_panel_shows_boxes_runs_and_moves_between_runs(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    _, config = fleet(tmp_path, server, client_key)
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3
                    and section(app, "beta").box.connection != "connecting")
        head = text_of(app, "#fleet-head")
        assert "1/2 boxes up" in head and "✔ completed 1" in head
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
    # "u" is free; "p" would take push's key, which check-config refuses.
    _, config = fleet(tmp_path, server, client_key, keys={"next": "n", "previous": "u"})
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3)
        rows = list(app.query(RunRow))
        await pilot.press("n")
        assert app.focused is rows[1]
        await pilot.press("j")  # no longer bound
        assert app.focused is rows[1]
        await pilot.press("u")
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
        assert "0/2 boxes up" in text_of(app, "#fleet-head")
        server.restart()
        await pilot.press("r")
        await until(pilot, lambda: alpha.box.connection == "ok")
        assert "1/2 boxes up" in text_of(app, "#fleet-head")


def fixed_app() -> GpurentApp:
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW)


def visible_runs(app: GpurentApp) -> list[str]:
    return [r.run.name for r in app.query(RunRow) if r.display]


async def test_filter_by_health_or_name_and_clear() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert len(visible_runs(app)) == 6
        await pilot.press("slash", "f", "a", "i")
        assert visible_runs(app) == ["lr-sweep 3e-4"]
        assert "2 run(s) hidden by the filter" in text_of(app, "BoxSection #hidden")
        await pilot.press("escape")
        await pilot.pause()
        assert len(visible_runs(app)) == 6
        assert app.query_one("#filter").display is False
        await pilot.press("slash", *"STUCK", "enter")
        await pilot.pause()
        assert visible_runs(app) == ["stuck-dataloader"]
        assert isinstance(app.focused, RunRow) and app.focused.run.name == "stuck-dataloader"
        await pilot.press("j", "k")  # moving stays among the visible runs
        assert app.focused.run.name == "stuck-dataloader"


async def test_open_a_run_cycle_its_chart_and_go_back() -> None:
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("j", "j", "enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetail)
        assert detail.run.name == "lr-sweep 3e-4" and detail.box_name == "runpod-a100"
        title = str(detail.query_one("#title", Static).render())
        assert "RuntimeError: injected failure at epoch 3" in title
        log_text = "\n".join(str(line) for line in detail.query_one(Log).lines)
        assert "Epoch 2 - Average loss" in log_text
        assert detail.series == "both"
        await pilot.press("m")
        assert detail.series == "loss"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RunDetail)


async def test_command_palette_opens_a_run_by_name() -> None:
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"open oom-victim")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RunDetail)
        assert app.screen.run.name == "oom-victim"


async def test_run_detail_follows_the_run(tmp_path: Path, sshd_factory: Factory,
                                          client_key: KeyPair) -> None:
    server = sshd_factory()
    root, config = fleet(tmp_path, server, client_key)
    run_dir = root / "yolox_completed"
    lines = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_text("".join(lines[:4]))
    app = GpurentApp(config)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(app.query(RunRow)) == 3)
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetail) and detail.run.name == "yolox_completed"
        assert len(detail.run.history) == 4
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write("".join(lines[4:]))
        with (run_dir / "train.log").open("a") as f:
            f.write("2026-12-02 10:09:00 | INFO     | a line written just now\n")
        await pilot.press("r")
        await until(pilot, lambda: len(detail.run.history) == 6)
        await until(pilot, lambda: any("a line written just now" in str(line)
                                       for line in detail.query_one(Log).lines))
