"""What the panel paints: one frame per key press, nothing while nothing it shows changed.

Counted, not timed (benchmarks/panel.py times them): a frame is one update the
compositor hands to the terminal. Several frames per key (the cursor drawn, then the
scroll, then the footer) each cost a terminal write over a slow link; a clock that
repaints rows whose words did not change costs CPU all day.
"""

from __future__ import annotations

from typing import Any

from support.panel_states import NOW, fleet_config, fleet_states
from textual.screen import Screen

from tui.app import GpurentApp
from tui.screens.fleet import FleetScreen


class Counting(GpurentApp):
    """The panel as shipped, counting the frames it paints."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames = 0

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        super()._display(screen, renderable)
        if renderable is not None:
            self.frames += 1


def fleet_screen(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


async def test_a_key_press_paints_one_frame() -> None:
    """Down through every run (the list scrolls at 14 rows) and back up: each press is
    one frame, however much the cursor's move changed."""
    app = Counting(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(100, 14)) as pilot:
        await pilot.pause(0.2)
        screen = fleet_screen(app)
        order = screen.fleet_list.order
        assert len(order) == 6 and screen.selected == order[0]
        per_press, scrolled = [], 0
        for key, target in [*(("j", k) for k in order[1:]),
                            *(("k", k) for k in reversed(order[:-1]))]:
            before = app.frames
            await pilot.press(key)
            await pilot.pause(0.05)
            assert screen.selected == target and screen.fleet_list.is_visible(target)
            per_press.append(app.frames - before)
            scrolled = max(scrolled, screen.fleet_list.scroll_offset.y)
        assert per_press == [1] * 10
        assert scrolled > 0  # the moves that scrolled the list too


async def test_the_clock_repaints_only_words_that_changed() -> None:
    """Every second of a minute and a half: a tick after which the rows read the same
    (ages are to the minute) paints nothing; one after which some words changed (the down
    box's retry countdown, an age) paints them in one frame."""
    now = [NOW]
    app = Counting(fleet_config(), states=fleet_states(), live=False, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        screen = fleet_screen(app)
        painted: dict[bool, list[int]] = {True: [], False: []}
        for _ in range(90):
            text, frames = screen.fleet_list.text(), app.frames
            now[0] += 1.0
            screen._tick()
            await pilot.pause(0.02)
            painted[screen.fleet_list.text() != text].append(app.frames - frames)
        assert painted[True] and set(painted[True]) == {1}
        assert len(painted[False]) >= 20 and set(painted[False]) == {0}
