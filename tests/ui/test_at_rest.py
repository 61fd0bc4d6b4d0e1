"""A box stopped or destroyed on purpose reads as such in the panel, over the demo fleet
(real SSH servers on loopback, the RunPod and Vast stand-ins): not "unreachable" in red,
not counted as down, no busy GPU bars or running runs, no stop-vs-destroy advice once
destroyed; a start the provider refused (409: the GPU was rented out) leaves our stop
standing, never "stopped by the provider" (the guardian's side: tests/io/test_alerts)."""

from __future__ import annotations

import re

import pytest
from support.pilot import box_text, throughout, until

from tui.actions.flows import destroy
from tui.app import GpurentApp
from tui.demo.fleet import DemoFleet
from tui.model.alerts import PREEMPTED
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import MONEY_SECONDS, FleetScreen
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


def provider_stop_said(app: GpurentApp) -> str | None:
    """Where the panel says the provider stopped runpod-a100: its line, the guardian's
    verdict, a PREEMPTED alert sent, a toast. None where it says so nowhere."""
    text = box_text(app, "runpod-a100")
    if "stopped by the provider" in text or "preempted" in text:
        return text
    if app.stopped_words("runpod-a100") is not None:
        return f"stopped_words: {app.stopped_words('runpod-a100')}"
    sent = [key for key in app.runtime.guardian.sent.sent if key[0] == PREEMPTED]
    if sent:
        return f"alerts sent: {sent}"
    toasts = [f"{n.title}: {n.message}" for n in app._notifications]
    if any("stopped by the provider" in t for t in toasts):
        return f"toasts: {toasts}"
    return None


async def test_a_start_the_provider_refused_leaves_our_stop_on_screen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """s then S on the demo's RunPod box, whose GPU the marketplace rents to someone else
    for 90 s after it stops: RunPod answers the start 409. The box still reads our stop and
    the start's refusal, never "stopped by the provider", and no PREEMPTED alarm rings."""
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
            # The provider's money line reads the pod stopped: the picture a preemption
            # is judged on.
            await until(pilot, lambda: "/hr stopped (" in box_text(app, "runpod-a100"), 10)
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10)
            assert "Start runpod-a100?" in app.screen.title_text  # type: ignore[attr-defined]
            await pilot.press("y")
            await until(pilot, lambda: "start failed" in box_text(app, "runpod-a100"), 30)
            # Never the provider's stop, while the runtime judges the money picture again
            # (every second) and the header's money follows it (within MONEY_SECONDS).
            await throughout(pilot, lambda: provider_stop_said(app), MONEY_SECONDS + 2.0)
            text = box_text(app, "runpod-a100")
            assert re.search(r"stopped \(by you, \d\d:\d\d\) · disk \$", text), text
            assert "✖ start failed" in text and "not enough free GPUs" in text, text
            assert "the box is still stopped" in text, text
            assert "unreachable" not in text and "GPU0" not in text, text
            rest = app.runtime.states["runpod-a100"].rest
            assert rest is not None and (rest.kind, rest.by) == ("stopped", "you"), rest
            assert "1 stopped" in strip(app), strip(app)
            screen = app.screen_stack[0]
            assert isinstance(screen, FleetScreen)
            offers = {c.title: c.help for c in screen.palette(screen)}
            assert offers["Start runpod-a100"].startswith("stopped (by you)"), offers
