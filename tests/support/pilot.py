"""Waiting on the live panel in Pilot tests: one helper instead of one per test module."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from tui.app import GpurentApp
from tui.screens.fleet import FleetScreen


async def until(pilot: Pilot, check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Let the panel run until `check()` holds; fail after `timeout` seconds (a busy
    machine's slow sshd answers: the wait ends as soon as the state is there)."""
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError("the panel never showed the expected state")


async def throughout(pilot: Pilot, check: Callable[[], str | None], seconds: float) -> None:
    """Let the panel run for `seconds`, failing at the first moment `check()` names
    something wrong (its words are the failure's): what must never show, not only at
    one instant."""
    for _ in range(int(seconds / 0.05)):
        wrong = check()
        assert wrong is None, wrong
        await pilot.pause(0.05)


def box_text(app: GpurentApp, name: str) -> str:
    """The fleet list's text for one box, whatever screen is on top."""
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen.fleet_list.text(name)
