"""The panel offers only what a box can do: no confirmation that ends in "refused"."""

from __future__ import annotations

from pathlib import Path

from support.panel_states import fixed_meter, fleet_config, fleet_states

from tui.app import GpurentApp
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.fleet import FleetScreen


async def test_start_on_a_manual_box_says_why_instead_of_asking(tmp_path: Path) -> None:
    app = GpurentApp(fleet_config(), states=fleet_states(), live=False,
                     meter=fixed_meter(tmp_path / "ledger.jsonl"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        while screen.selected is None or screen.selected[0] != "lab-3090":
            await pilot.press("j")
        for key in ("S", "s", "D"):
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen | DestroyScreen), key
        said = [n.message for n in app._notifications]
        assert any("lab-3090 is a manual box: the panel has no way to start it" in m
                   for m in said), said
        assert any("no stop_command" in m for m in said) and \
            any("no destroy_command" in m for m in said)
        assert app.journal.entries == []  # nothing was tried
