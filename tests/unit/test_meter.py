"""The cost meter folded from box snapshots, provider facts and ledger events."""

from __future__ import annotations

import pytest
from support.panel_states import NOW, VAST, Facts, fleet_states

from tui.model.config import parse_config
from tui.model.cost import Event
from tui.model.meter import meter

CONFIG = """
budget_usd = 10
idle_minutes = 10
[[box]]
name = "vast-4090"
host = "h"
provider = "vast"
instance_id = "1"
budget_usd = 4
[box.pricing]
rebuild_usd = 1.0
[[box]]
name = "runpod-a100"
host = "h"
provider = "runpod"
instance_id = "p1"
[[box]]
name = "lab-3090"
host = "h"
"""


def test_fleet_burn_accrual_projection_and_alarms() -> None:
    fleet = parse_config(CONFIG, "f.toml")
    events = [Event(NOW - 3600, "vast-4090", "running", 3.4828, "api"),
              Event(NOW - 1800, "runpod-a100", "running", 2.0, "api")]
    facts = {"vast-4090": VAST, "runpod-a100": Facts(running_usd_per_hr=2.0, disk_gb=100)}
    idle_prev = {"runpod-a100": NOW - 900}
    cost = meter(fleet, fleet_states(), facts, events, idle_prev, NOW, NOW - 7200)
    vast = cost.boxes["vast-4090"]
    assert vast.accrued_usd == pytest.approx(3.4828)
    assert vast.budget_level == "warning"  # 3.48 of a 4.00 box budget is 87%
    assert cost.boxes["lab-3090"].rate_now is None and cost.unpriced == ("lab-3090",)
    assert cost.usd_per_hr == pytest.approx(3.4828 + 2.0)
    # One running run on the vast box: it bears the whole rate.
    (run_cost,) = vast.runs.values()
    assert run_cost.shared_by == 1 and run_cost.usd_per_hr == pytest.approx(3.4828)
    assert cost.to_finish_usd == pytest.approx(run_cost.to_finish_usd)
    # The runpod box: GPU at 3%, runs failed/stalled/dead, billed running: idle for 15 min.
    runpod = cost.boxes["runpod-a100"]
    assert runpod.idle_since == NOW - 900 and runpod.idle_alarm
    assert runpod.idle_usd == pytest.approx(2.0 * 0.25)
    assert not vast.idle_alarm
    assert cost.budget_level is None and cost.accrued_usd == pytest.approx(4.4828)
