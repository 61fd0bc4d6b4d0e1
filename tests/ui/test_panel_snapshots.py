"""Snapshots of the panel from fixed states: the fleet at 80x24 and 160x48, a run up close."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.panel_states import NOW, fixed_meter, fleet_config, fleet_states

from tui.app import GpurentApp


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """End times are shown on the local clock: pin it to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def app(tmp_path: Path) -> Callable[[], GpurentApp]:
    def make() -> GpurentApp:
        return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW,
                          meter=fixed_meter(tmp_path / "ledger.jsonl"))
    return make


def test_fleet_80x24(snap_compare, app) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), terminal_size=(80, 24))


def test_fleet_160x48(snap_compare, app) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app(), terminal_size=(160, 48))


def test_run_detail_120x36(snap_compare, app) -> None:  # type: ignore[no-untyped-def]
    async def open_first_run(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        await pilot.press("j", "enter")
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(120, 36), run_before=open_first_run)


def test_filter_by_health_80x24(snap_compare, app) -> None:  # type: ignore[no-untyped-def]
    async def filter_failed(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        await pilot.press("slash", "f", "a", "i", "enter")
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(80, 24), run_before=filter_failed)


def test_cost_screen_120x36(snap_compare, app) -> None:  # type: ignore[no-untyped-def]
    async def open_costs(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()

    assert snap_compare(app(), terminal_size=(120, 36), run_before=open_costs)
