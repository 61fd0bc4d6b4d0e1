"""`:` opens the commands as ctrl+p does (k9s's habit), on every screen ctrl+p works on,
except in a field, where it types itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.panel_states import NOW, fixed_meter, fleet_config, fleet_states
from textual.command import CommandPalette
from textual.screen import Screen
from textual.widgets import Input

from tui.app import GpurentApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail

# The panel's screens, and the keys that open each from the fleet.
SCREENS: dict[str, tuple[tuple[str, ...], type[Screen[None]]]] = {
    "fleet": ((), FleetScreen), "run detail": (("j", "enter"), RunDetail),
    "costs": (("c",), CostScreen), "journal": (("J",), JournalScreen)}


def make_app(tmp_path: Path) -> GpurentApp:
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW,
                      meter=fixed_meter(tmp_path / "ledger.jsonl"))


@pytest.mark.parametrize("name", list(SCREENS))
async def test_colon_opens_the_commands_where_ctrl_p_does(tmp_path: Path, name: str) -> None:
    opener, kind = SCREENS[name]
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*opener)
        await pilot.pause()
        for key in ("colon", "ctrl+p"):
            await pilot.press(key)
            await pilot.pause()
            assert CommandPalette.is_open(app), (name, key)
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, kind)


async def test_colon_opens_the_commands_over_a_dialog(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(ConfirmScreen("Stop vast-4090?", "it stays billed for its disk"))
        await pilot.pause()
        for key in ("colon", "ctrl+p"):
            await pilot.press(key)
            await pilot.pause()
            assert CommandPalette.is_open(app), key
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen), key


async def test_a_filter_with_a_colon_types_it(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("slash", "a", "colon", "b")
        await pilot.pause()
        assert not CommandPalette.is_open(app)
        field = app.screen.query_one("#filter", Input)
        assert field.value == "a:b"

