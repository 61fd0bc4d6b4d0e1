"""`w` on a run in a panel that watches no live box (fixed snapshots) says why nothing
opens, and leaves no monitor or worker behind."""

from __future__ import annotations

from support.panel_states import NOW, fleet_config, fleet_states

from tui.app import GpurentApp


async def test_w_without_a_live_box_says_so_and_holds_nothing() -> None:
    app = GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("w")
        await pilot.pause()
        assert "no live box to open a monitor on" in [n.message for n in app._notifications]
        assert not app.monitors
        assert not app.runtime.monitor_tasks
