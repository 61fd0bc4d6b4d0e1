"""The cost screen reads at 80x24: every money value whole, the time axis in a sane unit."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from support.panel_states import NOW, fixed_meter, fleet_config, fleet_states
from textual.widgets import Static

from tui.app import GpurentApp
from tui.screens.cost import CostScreen, cost_table, time_axis

MONEY = re.compile(r"\$[\d,]+\.\d+|\$0\b")


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_app(tmp_path: Path) -> GpurentApp:
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW,
                      meter=fixed_meter(tmp_path / "ledger.jsonl"))


def test_cost_screen_80x24(snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    async def open_costs(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=open_costs)


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (160, 48)])
async def test_every_money_value_is_whole_at_any_width(tmp_path: Path,
                                                       size: tuple[int, int]) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CostScreen)
        table = screen.query_one("#table", Static)
        console = Console(width=table.content_region.width, record=True)
        console.print(table.content)
        shown = console.export_text()
        # The widest table the screen can hold: what the full table at 200 columns shows.
        full = Console(width=200, record=True)
        full.print(cost_table(screen.cost, 200))
        expected = MONEY.findall(full.export_text())
        assert expected and "…" not in shown
        for value in expected:
            assert value in shown, (value, shown)
        for line in shown.splitlines():
            assert len(line.rstrip()) <= table.content_region.width


def test_spend_axis_uses_minutes_under_two_hours() -> None:
    now = 10_000.0
    assert time_axis([now - 24, now], now) == ([-24.0, 0.0], "seconds before now")
    offsets, label = time_axis([now - 1800, now - 60, now], now)
    assert label == "minutes before now" and offsets == [-30.0, -1.0, 0.0]
    assert time_axis([now - 7200, now], now)[1] == "hours before now"
    assert time_axis([now - 3 * 86400, now], now) == ([-3.0, 0.0], "days before now")


async def test_the_open_cost_screen_draws_each_new_money_picture(tmp_path: Path) -> None:
    """The screen's `cost` follows the app's: a new picture redraws the table in place."""
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CostScreen) and app.cost is not None
        app.cost = replace(app.cost, accrued_usd=4321.5)
        await pilot.pause()
        assert screen.cost is app.cost
        table = screen.query_one("#table", Static)
        console = Console(width=table.content_region.width, record=True)
        console.print(table.content)
        assert "$4,321.50" in console.export_text()
