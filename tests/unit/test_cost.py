"""The money arithmetic, against the figures measured on a rented 8x RTX 4090 box."""

from __future__ import annotations

import math

import pytest
from support.panel_states import VAST, instance

from tui.model.config import Pricing
from tui.model.cost import (
    Event,
    accrued,
    box_rates,
    budget_level,
    idle_since,
    parse_event,
    percent_words,
    run_cost,
    spend_series,
    stopped_usd_per_hr,
)


def test_vast_box_stops_at_the_billed_rate_and_saves_98_percent() -> None:
    rates = box_rates("vast", Pricing(rebuild_usd=1.00), VAST)
    assert rates.running is not None and rates.running.source == "api"
    assert rates.stopped is not None and rates.stopped.source == "computed"
    assert f"{rates.stopped.usd_per_hr:.4f}" == "0.0694"
    assert rates.hours_per_month == 720 and "720-hour month" in rates.hours_per_month_source
    assert round(rates.saving_pct or 0) == 98
    assert f"{rates.break_even_hours:.1f}" == "14.4"
    assert rates.verdict() == "stopping pays if you come back within 14.4 h; later, destroy"


def test_vast_convention_applies_even_without_the_api_and_manual_defaults_to_730() -> None:
    vast = box_rates("vast", Pricing(running_usd_per_hr=3.4828, disk_gb=250,
                                     storage_usd_per_gb_month=0.20), None)
    assert f"{vast.stopped.usd_per_hr:.4f}" == "0.0694"  # type: ignore[union-attr]
    manual = box_rates("manual", Pricing(running_usd_per_hr=3.4828, disk_gb=250,
                                         storage_usd_per_gb_month=0.20), None)
    assert f"{manual.stopped.usd_per_hr:.4f}" == "0.0685"  # type: ignore[union-attr]
    assert manual.hours_per_month_source == "730-hour month (no better convention known)"
    custom = box_rates("manual", Pricing(disk_gb=250, storage_usd_per_gb_month=0.2,
                                         hours_per_month=720), None)
    assert custom.hours_per_month_source == "config"
    assert stopped_usd_per_hr(10, 0.14933, 720) == pytest.approx(0.002074, abs=1e-6)


def test_api_disk_rate_is_used_unless_the_config_says_otherwise() -> None:
    facts = instance(running_usd_per_hr=3.4828, disk_usd_per_hr=0.0711, disk_gb=250,
                  storage_usd_per_gb_month=0.2, hours_per_month=720)
    assert box_rates("vast", None, facts).stopped == box_rates("vast", None, facts).stopped
    assert box_rates("vast", None, facts).stopped.source == "api"  # type: ignore[union-attr]
    overridden = box_rates("vast", Pricing(running_usd_per_hr=2.0, disk_gb=100), facts)
    assert overridden.running.source == "config"  # type: ignore[union-attr]
    assert overridden.stopped.usd_per_hr == pytest.approx(100 * 0.2 / 720)  # type: ignore[union-attr]


def test_runpod_lambda_and_destroyed() -> None:
    runpod = box_rates("runpod", None, instance(running_usd_per_hr=1.99, disk_gb=100))
    assert runpod.stopped.usd_per_hr == pytest.approx(100 * 0.20 / 730)  # type: ignore[union-attr]
    lam = box_rates("lambda", Pricing(rebuild_usd=2), instance(running_usd_per_hr=1.29,
                                                            can_stop=False))
    assert lam.stopped is None and lam.break_even_hours is None
    assert "cannot stop" in (lam.verdict() or "")
    gone = box_rates("vast", None, instance(state="destroyed", running_usd_per_hr=0.0))
    assert gone.now is not None and gone.now.usd_per_hr == 0.0
    stopped = box_rates("vast", None, instance(state="stopped", disk_gb=250,
                                            storage_usd_per_gb_month=0.2))
    assert stopped.now is not None and f"{stopped.now.usd_per_hr:.4f}" == "0.0694"


def test_run_cost_splits_the_box_rate_among_running_runs() -> None:
    alone = run_cost(3.6, 1, 80.0, 3600.0)
    assert alone is not None
    assert alone.per_epoch_usd == pytest.approx(0.08) and alone.to_finish_usd == pytest.approx(3.6)
    shared = run_cost(3.6, 2, 80.0, 3600.0)
    assert shared is not None and shared.shared_by == 2
    assert shared.to_finish_usd == pytest.approx(1.8)
    assert run_cost(None, 1, 80, 10) is None


def test_accrual_across_segments_with_an_injected_clock() -> None:
    t0 = 1_000_000.0
    events = [Event(t0, "a", "running", 3.6, "api"),
              Event(t0 + 3600, "a", "stopped", 0.36, "computed"),
              Event(t0 + 7200, "a", "destroyed", 0.0, "computed"),
              Event(t0 + 1800, "b", "running", 1.0, "config")]
    totals = accrued(events, t0 + 10800)
    assert totals["a"] == pytest.approx(3.6 + 0.36)
    assert totals["b"] == pytest.approx(2.5)
    today = accrued(events, t0 + 10800, since=t0 + 5400)
    assert today["a"] == pytest.approx(0.18) and today["b"] == pytest.approx(1.5)
    series = spend_series(events, t0 + 10800, points=4)
    assert series[0] == (t0, 0.0) and series[-1][1] == pytest.approx(3.96 + 2.5)


def test_starting_and_stopping_bill_the_running_rate_until_read_back() -> None:
    for state in ("stopping", "starting", "unknown", "error"):
        rates = box_rates("vast", None, instance(state=state, running_usd_per_hr=3.4828,
                                              disk_gb=250, storage_usd_per_gb_month=0.2))
        assert rates.now is not None and rates.now.usd_per_hr == 3.4828, state
    blind = box_rates("manual", None, instance(state="stopped"))
    assert blind.now is not None and blind.now.usd_per_hr == 0.0
    assert blind.now.source == "unknown" and "unknown" in blind.now.note


def test_a_saving_of_99_5_percent_never_reads_100() -> None:
    assert percent_words(99.5) == "99.5%" and percent_words(99.97) == ">99.9%"
    assert percent_words(98.01) == "98%" and percent_words(0.3) == "0.3%"
    assert percent_words(0.01) == "<0.1%" and percent_words(100.0) == "100%"
    rates = box_rates("vast", None, instance(running_usd_per_hr=13.88, disk_usd_per_hr=0.0694))
    assert rates.saving_pct is not None and percent_words(rates.saving_pct) == "99.5%"


def test_parse_event_rejects_bad_records() -> None:
    assert parse_event({"t": 1, "box": "a", "state": "running", "usd_per_hr": 2}) is not None
    for bad in ({"t": 1}, {"t": "x", "box": "a", "state": "s", "usd_per_hr": 1},
                {"t": 1, "box": "a", "state": "s", "usd_per_hr": -1},
                {"t": math.nan, "box": "a", "state": "s", "usd_per_hr": 1}):
        assert parse_event(bad) is None


def test_idle_and_budget() -> None:
    assert idle_since(None, True, False, 2.0, 100.0) == 100.0
    assert idle_since(100.0, True, False, None, 200.0) == 100.0
    assert idle_since(100.0, True, True, 2.0, 200.0) is None
    assert idle_since(100.0, True, False, 50.0, 200.0) is None
    assert idle_since(100.0, False, False, 0.0, 200.0) is None
    assert budget_level(79, 100) is None and budget_level(80, 100) == "warning"
    assert budget_level(100, 100) == "alarm" and budget_level(5, None) is None
