"""The watchdog's line in the panel: under its box's header, what it will do or what it did."""

from __future__ import annotations

from dataclasses import replace

from support.panel_states import NOW, fleet_config, fleet_states

from tui.app import GpurentApp
from tui.model.watchdog import fold_guard
from tui.screens.fleet import FleetScreen

ARMED = {"v": 1, "armed": True, "armed_at": NOW - 1800, "max_hours": 3.7,
         "no_progress_minutes": 20, "beat_seconds": 30, "did": []}
ACTED = {**ARMED, "armed": False,
         "fired": {"trigger": "stalled", "at": NOW - 7200,
                   "why": "no epoch progress for 20 min while running: yolo9"},
         "did": [{"action": "push", "outcome": "verified", "at": NOW - 7190,
                  "detail": "yolo9: 8 file(s) verified on the Hub at 3f2a9c1d0b7e"},
                 {"action": "stop", "outcome": "done", "at": NOW - 7180,
                  "detail": "stop sent with RUNPOD_API_KEY (this pod's own key)",
                  "answer": "HTTP 200"}]}


async def test_the_box_header_says_what_the_watchdog_will_do_and_did() -> None:
    states = fleet_states()
    guarded = {states[0].name: fold_guard(ARMED, states[0].box_time),
               states[1].name: fold_guard(ACTED, (states[1].box_time or NOW) - 7000)}
    states = [replace(s, guard=guarded.get(s.name)) for s in states]
    app = GpurentApp(fleet_config(), states=states, live=False, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        first = screen.fleet_list.text(states[0].name).splitlines()
        assert first[1].strip().startswith("guarded: stops in 3h1"), first
        assert "or after 20 min without progress" in first[1]
        second = screen.fleet_list.text(states[1].name)
        assert "guard fired 2h00m ago (stalled: no epoch progress for 20 min" in second
        assert "push verified: yolo9: 8 file(s) verified on the Hub" in second
        assert "guard not running now" in second
        assert "guard" not in screen.fleet_list.text(states[2].name)
