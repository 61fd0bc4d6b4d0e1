"""At 80x24 with no mouse, `?` shows every key of the screen, readable whole by keys alone
(Textual's own panel could not be scrolled: the list was cut at "x Cancel the")."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from support.panel_states import NOW, fixed_meter, fleet_config, fleet_states
from textual.pilot import Pilot

from tui.app import GpurentApp
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail
from widgets.keys_panel import KeysPanel

# The screens where `?` works, and the keys that open each from the fleet.
SCREENS = {"fleet": ((), FleetScreen), "run detail": (("j", "enter"), RunDetail),
           "costs": (("c",), CostScreen), "journal": (("J",), JournalScreen)}


def make_app(tmp_path: Path) -> GpurentApp:
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW,
                      meter=fixed_meter(tmp_path / "ledger.jsonl"))


def panel_lines(app: GpurentApp) -> list[str]:
    """The help panel's lines as painted (the screen left of it cut off)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True))
    left = app.screen.query_one("HelpPanel").region.x + 1  # past its border
    return [line[left:] for line in console.export_text(styles=False).splitlines()]


def expected_rows(app: GpurentApp) -> Iterator[tuple[str, str]]:
    """(key as shown, description) of every key the screen has before `?`."""
    for active in app.screen.active_bindings.values():
        if not active.binding.system and active.binding.description:
            yield app.get_key_display(active.binding), active.binding.description


def shown(rows: list[str], key: str, words: str) -> bool:
    """Whether a line shows the key and the words start there (a wrapped description's
    rest on the lines under it)."""
    first = words.split()[0]
    for at, line in enumerate(rows):
        tokens = line.split()
        if first in tokens and key in tokens[:tokens.index(first)] \
                and words in " ".join(" ".join(rows[at:at + 4]).split()):
            return True
    return False


async def read_whole_help(pilot: Pilot[None], app: GpurentApp) -> list[list[str]]:
    """`?`, then `j` until the list stops moving: every frame the panel showed."""
    await pilot.press("question_mark")
    await pilot.pause()
    frames = [panel_lines(app)]
    for _ in range(60):
        await pilot.press("j")
        await pilot.pause()
        frames.append(panel_lines(app))
        if frames[-1] == frames[-2]:
            break
    return frames


@pytest.mark.parametrize("name", list(SCREENS))
async def test_every_key_of_the_screen_can_be_read_by_keys_alone_at_80x24(
        tmp_path: Path, name: str) -> None:
    opener, kind = SCREENS[name]
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*opener)
        await pilot.pause()
        assert isinstance(app.screen, kind)
        wanted = dict.fromkeys(expected_rows(app))
        assert wanted
        focused, fleet = app.focused, app.screen_stack[0]
        assert isinstance(fleet, FleetScreen)
        selected = fleet.selected
        frames = await read_whole_help(pilot, app)
        missing = [row for row in wanted if not any(shown(f, *row) for f in frames)]
        assert not missing, (missing, frames[-1])
        # the palette's new key, beside ctrl+p
        assert any(shown(f, ":", "palette") and shown(f, "^p", "palette") for f in frames)
        await pilot.press("home")
        await pilot.pause()
        assert panel_lines(app) == frames[0]  # home goes back up
        await pilot.press("end")
        await pilot.pause()
        assert panel_lines(app) == frames[-1]  # end: the last binding
        # Escape closes the help only: the screen stays, the focus is back where it was,
        # and the j presses scrolled the help, not the fleet's cursor.
        await pilot.press("escape")
        await pilot.pause()
        assert not app.screen.query("HelpPanel")
        assert isinstance(app.screen, kind) and app.focused is focused
        assert fleet.selected == selected
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.query("HelpPanel")
        await pilot.press("question_mark")
        await pilot.pause()
        assert not app.screen.query("HelpPanel") and app.focused is focused


async def test_keys_other_than_scrolling_still_act_while_the_help_shows(
        tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark", "c")
        await pilot.pause()
        assert isinstance(app.screen, CostScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert app.screen.query("HelpPanel")  # still shown where it was opened


async def test_the_palettes_keys_command_opens_the_same_panel(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p", *"Keys")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        panel = app.screen.query_one("HelpPanel")
        assert isinstance(panel, KeysPanel) and app.focused in panel.query("*")
        await pilot.press("escape")
        await pilot.pause()
        assert not app.screen.query("HelpPanel") and app.focused is None
