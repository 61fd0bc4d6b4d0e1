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


async def test_the_header_says_the_watchdog_ended_after_acting_or_stays_to_retry() -> None:
    """Its silent heartbeat after acting is read as the end it wrote, not as a lost
    watchdog; one staying to retry a failed stop says when and which attempt."""
    states = fleet_states()
    box_time = states[1].box_time or NOW
    failed = {"action": "stop", "outcome": "failed", "at": NOW - 7180,
              "detail": "its stop_command failed", "answer": "exit 1: no such pool"}
    ended = {**ACTED, "ended": "exited after acting"}
    staying = {**ACTED, "did": [ACTED["did"][0], failed],
               "staying": {"action": "stop", "retry_at": box_time + 90, "attempt": 2,
                           "attempts": 3}}
    guarded = {states[0].name: fold_guard(ended, box_time - 7000),
               states[1].name: fold_guard(staying, box_time - 5)}
    states = [replace(s, guard=guarded.get(s.name)) for s in states]
    app = GpurentApp(fleet_config(), states=states, live=False, clock=lambda: NOW)
    async with app.run_test(size=(160, 36)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        first = screen.fleet_list.text(states[0].name)
        assert "stop done: stop sent with RUNPOD_API_KEY" in first
        assert "; guard exited after acting" in first and "not running" not in first
        second = screen.fleet_list.text(states[1].name)
        assert "stop failed: its stop_command failed; staying: retrying the stop in 1m " \
               "(attempt 2 of 3)" in second, second
