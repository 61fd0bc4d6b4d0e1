"""Alarm toasts never stack over the runs: one round's alarms share one short toast (the bell
rang, and each box's own line keeps saying it)."""

from __future__ import annotations

from pathlib import Path

from support.panel_states import NOW, fixed_meter, fleet_config, fleet_states

from tui.app import GpurentApp

MOST_SECONDS = 5


def several_idle(tmp_path: Path) -> GpurentApp:
    meter = fixed_meter(tmp_path / "ledger.jsonl")
    meter.idle = {name: NOW - 40 * 60 for name in ("vast-4090", "runpod-a100", "lab-3090")}
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW,
                      meter=meter)


async def test_a_round_with_several_idle_boxes_leaves_one_short_toast(tmp_path: Path) -> None:
    app = several_idle(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        idle = [name for name, box in (app.cost.boxes.items() if app.cost else ())
                if box.idle_alarm]
        assert len(idle) >= 2, idle  # the round really has several alarms
        toasts = list(app._notifications)
        assert len(toasts) == 1, [t.message for t in toasts]
        (toast,) = toasts
        assert toast.timeout <= MOST_SECONDS
        for name in idle:
            assert name in toast.message, toast.message


async def test_a_later_alarm_joins_the_toast_still_shown(tmp_path: Path) -> None:
    """Alarms a moment apart (box by box as their answers land) replace the live alarm
    toast with one that says both, instead of stacking a second."""
    app = several_idle(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.alarm([("run failed on lab-3090", "lab-3090: yolox-n crashed")], "error")
        await pilot.pause()
        toasts = list(app._notifications)
        assert len(toasts) == 1, [t.message for t in toasts]
        assert "lab-3090: yolox-n crashed" in toasts[0].message
        assert "runpod-a100" in toasts[0].message
        assert toasts[0].severity == "error"
