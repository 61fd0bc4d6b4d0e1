"""A box stopped or destroyed on purpose reads as such in the panel, over the demo fleet
(real SSH servers on loopback, the RunPod and Vast stand-ins): not "unreachable" in red,
not counted as down, no busy GPU bars or running runs, no stop-vs-destroy advice once
destroyed. (A start the provider refused leaving our stop standing: tests/io/test_alerts.)"""

from __future__ import annotations

import pytest
from support.pilot import box_text, until

from tui.actions.flows import destroy
from tui.app import GpurentApp
from tui.demo.fleet import DemoFleet
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal


async def select_box(pilot, app: GpurentApp, name: str) -> None:  # type: ignore[no-untyped-def]
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    await until(pilot, lambda: screen.selected is not None)
    # Move from the top, so the run is one the user chose: a cursor the panel placed
    # itself follows the most urgent run until the user moves it (a box stopped stops
    # being urgent, and the cursor went to another box's training run).
    for _ in range(len(screen.fleet_list.order)):
        await pilot.press("k")
    for _ in range(200):
        if screen.selected is not None and screen.selected[0] == name:
            return
        await pilot.press("j")
    raise AssertionError(f"no run of {name} could be selected")


def strip(app: GpurentApp) -> str:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return str(screen.query_one("FleetHead").render())


async def test_stopped_then_refused_start_then_destroyed_read_as_at_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    demo = DemoFleet(settle_seconds=0.5)
    async with demo as fleet:
        for var, value in demo.env.items():
            monkeypatch.setenv(var, value)
        app = GpurentApp(fleet)
        async with app.run_test(size=(160, 60)) as pilot:
            await until(pilot, lambda: "GPU0" in box_text(app, "runpod-a100"))
            await select_box(pilot, app, "runpod-a100")
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: "stopped (by you, " in box_text(app, "runpod-a100"))
            # S at once asks to start it again (the provider's last answer, from before the
            # stop, said running: it must not answer "is already running"); n keeps it off.
            assert app.screen_stack[0].selected[0] == "runpod-a100"  # type: ignore[attr-defined]
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                        or any("already" in n.message for n in app._notifications), 10)
            assert not any("already" in n.message for n in app._notifications), \
                [n.message for n in app._notifications]
            assert "Start runpod-a100?" in app.screen.title_text  # type: ignore[attr-defined]
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen))
            text = box_text(app, "runpod-a100")
            assert "unreachable" not in text and "retry in" not in text, text
            assert "· disk $" in text  # RunPod's volume rate, from the provider
            # The money line follows at once: the providers are asked again as a stop ends,
            # not at the next minute's poll (it read "$1.19/hr running" a minute on).
            await until(pilot, lambda: "/hr stopped (" in box_text(app, "runpod-a100"), 10)
            assert "GPU0" not in text and "▶ running" not in text, text
            await until(pilot, lambda: "1 stopped" in strip(app), 10)
            # The watcher looks again in a minute, not after a one-second backoff.
            state = app.runtime.states["runpod-a100"]
            assert state.rest is not None and state.retry_at is not None
            assert state.retry_at - app.runtime.clock() > 30

            # A destroy from the CLI (another process, the same journal).
            vast = fleet.box("vast-4090x2")
            gone = await destroy(fleet, vast, Journal(), push_first=True, force_unpushed=True)
            assert gone.code == 0, gone.lines
            await until(pilot, lambda: "destroyed (by you, " in box_text(app, "vast-4090x2"))
            text = box_text(app, "vast-4090x2")
            assert "stop pays" not in text and "unreachable" not in text, text
            await until(pilot, lambda: "1 stopped, 1 destroyed" in strip(app), 10)

            # Only what applies: no Check/Doctor/Fetch/Launch on either; the stopped box
            # offers Start and Destroy; a key pressed anyway says why in one line.
            screen = app.screen_stack[0]
            assert isinstance(screen, FleetScreen)
            offered = [c.title for c in screen.palette(screen)]
            for name in ("vast-4090x2", "runpod-a100"):
                assert not any(t.startswith(("Check", "Doctor", "Fetch", "Launch"))
                               and name in t for t in offered), offered
            assert "Start runpod-a100" in offered and "Destroy runpod-a100" in offered
            assert "Start vast-4090x2" not in offered
            await select_box(pilot, app, "runpod-a100")
            await pilot.press("g")
            await until(pilot, lambda: any(
                "runpod-a100 is stopped: start it first (S) to check on it" in n.message
                for n in app._notifications), 10)
            app.check("vast-4090x2")  # what g and the palette ask (its runs went with it)
            await until(pilot, lambda: any(
                "vast-4090x2 is destroyed: nothing is left to check" in n.message
                for n in app._notifications), 10)
            assert not app.runtime.busy
