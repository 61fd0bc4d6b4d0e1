"""The config check's picture of the keys is the panel's own: same ids, same keys, same
screens (so a remap it accepts cannot silence a binding, and one it refuses would)."""

from __future__ import annotations

from textual.binding import Binding

from tui.app import GpurentApp
from tui.model.config import KEY_ACTIONS
from tui.model.keys import DEFAULT_KEYS, EVERYWHERE, SCREENS
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.cost import CostScreen
from tui.screens.doctor import DoctorScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.launch import LaunchScreen
from tui.screens.run_detail import RunDetail


def ids_and_keys(bindings: list[object]) -> dict[str, str]:
    return {b.id: b.key for b in bindings if isinstance(b, Binding) and b.id}


def test_default_keys_are_the_apps_bindings() -> None:
    screens = {"the fleet": FleetScreen, "the run detail": RunDetail,
               "the cost screen": CostScreen, "the journal": JournalScreen,
               "a stop/start confirmation": ConfirmScreen, "the destroy dialog": DestroyScreen,
               "the launch form": LaunchScreen, "the doctor": DoctorScreen}
    everywhere = ids_and_keys(GpurentApp.BINDINGS)
    assert set(everywhere) == set(EVERYWHERE)
    found = dict(everywhere)
    for name, screen in screens.items():
        own = ids_and_keys(screen.BINDINGS)
        assert set(own) == set(SCREENS[name]), name
        found.update(own)
    assert found == dict(DEFAULT_KEYS)
    assert set(DEFAULT_KEYS) == set(KEY_ACTIONS)
