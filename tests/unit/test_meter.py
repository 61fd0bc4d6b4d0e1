"""The cost meter folded from box snapshots, provider facts and ledger events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fleets import DATA
from support.panel_states import NOW, VAST, fleet_states, instance

from tui.model.bill import costs_report
from tui.model.box import BoxState, Connection, fold_answer, fold_failure
from tui.model.config import parse_config
from tui.model.cost import Event
from tui.model.costs_doc import costs_document, costs_table
from tui.model.instance import InstanceInfo, PowerAction, PowerOutcome, PowerResult, gone
from tui.model.meter import meter
from tui.providers.meter import CostMeter, record_outcome
from tui.store.ledger import Ledger

RUNNING_STATUS = json.loads((DATA / "yolox_running" / "status.json").read_text())
VAST_RUNNING = instance(running_usd_per_hr=3.4828, disk_usd_per_hr=0.0694,
                     started_at=1_800_000_000.0 - 600)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()

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
    facts = {"vast-4090": VAST, "runpod-a100": instance(running_usd_per_hr=2.0, disk_gb=100)}
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


# --- the rules the meter keeps (issue: money truth) --------------------------

MANUAL = """
budget_usd = 2
[[box]]
name = "lab"
host = "lab.example.org"
stop_command = "sudo poweroff"
[box.pricing]
running_usd_per_hr = 1.10
disk_gb = 100
storage_usd_per_gb_month = 0.1
[[box]]
name = "vast"
host = "h"
provider = "vast"
instance_id = "1"
"""


def up(name: str, at: float, runs: list[dict[str, Any]] | None = None) -> BoxState:
    return fold_answer(BoxState(name=name), {"v": 1, "time": at, "runs": runs or [],
                                              "gpus": {"absent": True}, "disks": []}, at)


def down(name: str, at: float, prev: BoxState | None = None) -> BoxState:
    return fold_failure(prev or BoxState(name=name), Connection.TIMEOUT, "no answer", at)


def said(action: PowerAction, box: str, outcome: PowerResult, state_after: str | None = None,
         info_after: InstanceInfo | None = None) -> PowerOutcome:
    """A stop/start/destroy outcome as tui.actions.power reports it."""
    return PowerOutcome(action, box, outcome, "", state_after=state_after, info_after=info_after)


def clocked(fleet_text: str, tmp_path: Path) -> tuple[CostMeter, list[float]]:
    now = [T0]
    meter_ = CostMeter(parse_config(fleet_text, "f.toml"),
                       ledger=Ledger(tmp_path / "ledger.jsonl"), clock=lambda: now[0])
    return meter_, now


T0 = 1_800_000_000.0


def test_only_configured_boxes_count_in_totals_budgets_and_alarms(tmp_path: Path) -> None:
    meter_, _now = clocked(MANUAL, tmp_path)
    # Boxes of an old config, still in the ledger: history, not meter.
    meter_.ledger.record(Event(T0 - 7200, "ghost", "running", 3.0, "config"))
    meter_.ledger.record(Event(T0 - 3600, "lab", "running", 1.10, "config"))
    cost = meter_.update([up("lab", T0)])
    assert "ghost" not in cost.boxes
    assert cost.accrued_usd == pytest.approx(1.10) and cost.usd_per_hr == pytest.approx(1.10)
    assert cost.budget_level is None  # $1.10 of $2: the ghost's $6 would have made it an alarm


def test_a_box_never_seen_writes_nothing_and_says_what_it_may_cost(tmp_path: Path) -> None:
    meter_, _now = clocked(MANUAL, tmp_path)
    cost = meter_.update([down("lab", T0), BoxState(name="vast")])
    assert meter_.ledger.events == [] and not (tmp_path / "ledger.jsonl").exists()
    lab = cost.boxes["lab"]
    assert lab.rate_now is None and lab.maybe_usd_per_hr == 1.10
    assert lab.doubt is not None and "$1.10/hr if it is running" in lab.doubt
    assert cost.usd_per_hr == 0 and cost.maybe_usd_per_hr == pytest.approx(1.10)
    assert cost.unpriced == ("vast",)


def test_a_manual_stop_not_read_back_keeps_billing_and_says_so(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("lab")
    meter_.update([up("lab", T0)])
    now[0] = T0 + 3600
    event = record_outcome(meter_.ledger, box, said("stop", "lab", "done"), T0 + 3590, now[0])
    assert event is not None and event.state == "unknown" and event.usd_per_hr == 1.10
    now[0] = T0 + 3700
    meter_.update([up("lab", T0 + 3700)])  # still answering: it may be shutting down
    now[0] = T0 + 7200
    refused = fold_failure(BoxState(name="lab"), Connection.AUTH_FAILED, "key refused",
                           T0 + 4000)  # it answers, but nothing can be seen
    cost = meter_.update([refused])
    lab = cost.boxes["lab"]
    assert lab.accrued_usd == pytest.approx(2 * 1.10)
    assert lab.doubt is not None and "may still be billing $1.10/hr" in lab.doubt


def test_a_manual_box_seen_going_down_after_its_stop_bills_the_disk(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("lab")
    meter_.update([up("lab", T0)])
    record_outcome(meter_.ledger, box, said("stop", "lab", "done"), T0 + 3590, T0 + 3600)
    now[0] = T0 + 3620
    meter_.update([down("lab", T0 + 3620)])  # no longer answers: it went
    now[0] = T0 + 7220
    cost = meter_.update([down("lab", T0 + 3620)])
    disk = 100 * 0.1 / 730
    assert meter_.ledger.last("lab") == Event(T0 + 3620, "lab", "stopped", disk, "computed")
    assert cost.boxes["lab"].accrued_usd == pytest.approx(1.10 * 3620 / 3600 + disk)
    assert cost.boxes["lab"].doubt is None
    # Up again (from when it was last seen down); a box still answering ten minutes
    # after its stop command did not stop.
    now[0] = T0 + 9000
    meter_.update([up("lab", T0 + 9000)])
    assert meter_.ledger.last("lab") == Event(T0 + 7220, "lab", "running", 1.10, "config")
    record_outcome(meter_.ledger, box, said("stop", "lab", "done"), T0 + 9100, T0 + 9100)
    now[0] = T0 + 9200
    meter_.update([up("lab", T0 + 9200)])
    assert meter_.ledger.last("lab").state == "unknown"  # type: ignore[union-attr]
    now[0] = T0 + 9800
    meter_.update([up("lab", T0 + 9800)])
    assert meter_.ledger.last("lab") == Event(T0 + 9800, "lab", "running", 1.10, "config")


def test_a_manual_stop_read_back_bills_the_disk_and_a_destroy_nothing(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("lab")
    meter_.update([up("lab", T0)])
    record_outcome(meter_.ledger, box, said("stop", "lab", "done", "stopped"), T0 + 3590,
                   T0 + 3600)
    now[0] = T0 + 7200
    disk = 100 * 0.1 / 730
    cost = meter_.update([down("lab", T0 + 3700)])
    assert cost.boxes["lab"].accrued_usd == pytest.approx(1.10 + disk)
    assert cost.boxes["lab"].doubt is None and cost.usd_per_hr == pytest.approx(disk)
    # It answers again: someone started it; billed running from when it was last seen down.
    now[0] = T0 + 9000
    cost = meter_.update([up("lab", T0 + 9000)])
    assert meter_.ledger.last("lab") == Event(T0 + 7200, "lab", "running", 1.10, "config")
    record_outcome(meter_.ledger, box, said("destroy", "lab", "done", "destroyed"), T0 + 10790,
                   T0 + 10800)
    now[0] = T0 + 20000
    cost = meter_.update([down("lab", T0 + 11000)])
    assert cost.boxes["lab"].accrued_usd == pytest.approx(1.10 + disk + 1.10)
    assert cost.usd_per_hr == 0


def test_a_provider_poll_older_than_a_read_back_stop_changes_nothing(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("vast")
    meter_._seen("vast", VAST_RUNNING)  # read at T0 (started before: backfilled)
    meter_.update([])
    assert meter_.ledger.last("vast") == Event(T0 - 600, "vast", "running", 3.4828, "api")
    now[0] = T0 + 30
    record_outcome(meter_.ledger, box, said("stop", "vast", "done", "stopped",
                                            instance(state="stopped", disk_usd_per_hr=0.0694)),
                   T0 + 20, T0 + 30)
    now[0] = T0 + 40
    meter_.update([])  # the poll from T0 still says running: older than the stop
    assert meter_.ledger.last("vast") == Event(T0 + 30, "vast", "stopped", 0.0694, "api")


def test_a_dearer_state_is_dated_from_when_the_old_one_was_last_seen(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    meter_._seen("vast", instance(state="stopped", running_usd_per_hr=None,
                               disk_usd_per_hr=0.0694))
    meter_.update([])
    now[0] = T0 + 60
    meter_._seen("vast", VAST_RUNNING)  # started between the two polls
    meter_.update([])
    now[0] = T0 + 120
    meter_._seen("vast", instance(state="stopped", disk_usd_per_hr=0.0694))
    meter_.update([])
    assert [(e.t, e.state) for e in meter_.ledger.events] == [
        (T0, "stopped"), (T0, "running"), (T0 + 120, "stopped")]


def test_an_instance_gone_from_the_provider_is_destroyed(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    meter_._seen("vast", VAST_RUNNING)
    meter_.update([])
    now[0] = T0 + 600
    meter_._seen("vast", gone("vast", "1"))
    cost = meter_.update([])
    assert meter_.ledger.last("vast") == Event(T0 + 600, "vast", "destroyed", 0.0, "computed")
    assert cost.usd_per_hr == 0


def test_activity_marks_date_training_and_idle_from_the_runs_own_clock(tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    status = {**RUNNING_STATUS, "started_at": iso(T0 - 900), "updated_at": iso(T0 - 5)}
    run = {"path": "/r/a", "root": "/r", "name": "a", "s_sig": "s", "status": status,
           "pid_alive": True}
    meter_.update([up("lab", T0, [run])])
    done = {**status, "state": "completed", "updated_at": iso(T0 + 100)}
    now[0] = T0 + 300
    meter_.update([up("lab", T0 + 300, [{**run, "status": done}])])
    assert [(m.t, m.activity) for m in meter_.ledger.marks] == [
        (T0 - 900, "training"), (T0 + 100, "idle")]


def test_a_start_not_read_back_bills_the_running_rate_from_when_it_was_sent(
        tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("vast")
    meter_.ledger.record(Event(T0 - 7200, "vast", "running", 3.4828, "api"))
    meter_.ledger.record(Event(T0 - 3600, "vast", "stopped", 0.0694, "api"))
    event = record_outcome(meter_.ledger, box, said("start", "vast", "unknown"), T0, T0 + 180)
    assert event is not None and (event.t, event.state, event.usd_per_hr) == (
        T0, "unknown", 3.4828)  # the running rate last billed: the API gave none
    assert "may be billing $3.48/hr" in event.note
    # Refused and failed actions changed nothing: nothing is added.
    for outcome in ("refused", "failed"):
        assert record_outcome(meter_.ledger, box, said("stop", "vast", outcome), T0, T0) is None
    now[0] = T0 + 3600
    cost = meter_.update([])
    assert cost.boxes["vast"].accrued_usd == pytest.approx(3.4828 + 0.0694 + 3.4828)
    assert cost.boxes["vast"].doubt == event.note


def test_a_poweroff_that_cut_its_own_connection_is_seen_when_the_box_stays_down(
        tmp_path: Path) -> None:
    meter_, now = clocked(MANUAL, tmp_path)
    box = meter_.fleet.box("lab")
    meter_.update([up("lab", T0)])
    # `sudo poweroff` drops the session (outcome unknown at 3660); the panel's own
    # refresh had already found the box gone at 3610, after the command was sent.
    record_outcome(meter_.ledger, box, said("stop", "lab", "unknown"), T0 + 3600, T0 + 3660)
    now[0] = T0 + 3700
    meter_.update([down("lab", T0 + 3610)])
    last = meter_.ledger.last("lab")
    assert last is not None and (last.t, last.state) == (T0 + 3610, "stopped")


def test_a_box_removed_from_the_config_is_billed_until_a_meter_last_watched_it(
        tmp_path: Path) -> None:
    """Its open segment is not dropped: the meter notes at most every 15 min that it still
    watches a billing box, the removed box's history ends there, and says it may bill on."""
    meter_, now = clocked(MANUAL, tmp_path)
    meter_.update([up("lab", T0)])  # running $1.10/hr from T0, one segment, never re-rated
    for minutes in (5, 10, 16, 20, 40):
        now[0] = T0 + minutes * 60
        meter_.update([up("lab", now[0])])
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert [r["t"] - T0 for r in lines if r.get("kind") == "seen"] == [16 * 60, 40 * 60]
    # The config loses the box; hours later `costs` replays the ledger.
    report = costs_report(Ledger(tmp_path / "ledger.jsonl").book, ["vast"], None, T0 + 5 * 3600)
    (lab,) = report.removed
    assert lab.end == T0 + 40 * 60 and lab.usd == pytest.approx(1.10 * 40 / 60)
    assert lab.may_still_bill_usd_per_hr == pytest.approx(1.10)
    assert "not watched since" in costs_table(report)
    assert "may still be billing $1.10/hr" in costs_table(report)
    (doc,) = costs_document(report)["not_in_config"]
    assert doc["may_still_bill_usd_per_hr"] == pytest.approx(1.10)
    # A box destroyed before it left the config bills nothing after, and says nothing more.
    record_outcome(meter_.ledger, meter_.fleet.box("lab"), said("destroy", "lab", "done",
                                                                "destroyed"), now[0], now[0])
    now[0] = T0 + 3 * 3600
    meter_.update([down("lab", now[0])])
    gone_report = costs_report(Ledger(tmp_path / "ledger.jsonl").book, ["vast"], None,
                               T0 + 5 * 3600)
    (lab,) = gone_report.removed
    assert lab.usd == pytest.approx(1.10 * 40 / 60) and lab.may_still_bill_usd_per_hr is None
    assert "may still be billing" not in costs_table(gone_report)


def finished(name: str, started: float, ended: float) -> dict[str, Any]:
    status = {**RUNNING_STATUS, "state": "completed", "started_at": iso(started),
              "updated_at": iso(ended)}
    return {"path": f"/r/{name}", "root": "/r", "name": name, "s_sig": "s", "status": status,
            "pid_alive": False}


def test_a_finished_run_started_ahead_of_the_boxs_clock_marks_nothing_over_and_over(
        tmp_path: Path) -> None:
    """A finished run whose status says it started after the box's own clock (skewed or
    hostile): counted as trained while nobody looked, it marked training and idle again
    at every update, two ledger lines a second. It counts once its start is past."""
    meter_, now = clocked(MANUAL, tmp_path)
    meter_.ledger.record(Event(T0 - 3600, "lab", "running", 1.10, "config"))
    runs = [finished("a", T0 - 900, T0 - 600), finished("ahead", T0 + 60, T0 + 90)]
    for later in range(5):
        now[0] = T0 + later
        meter_.update([up("lab", T0, runs)])
    assert [(m.t - T0, m.activity) for m in meter_.ledger.marks] == [
        (-900, "training"), (0, "idle")]  # idle from its end, no later than the box's clock
    now[0] = T0 + 120  # the box's clock has passed it: it trained while nobody looked
    for _ in range(3):
        meter_.update([up("lab", T0 + 120, runs)])
    assert [(m.t - T0, m.activity) for m in meter_.ledger.marks][2:] == [
        (60, "training"), (90, "idle")]


def test_a_run_that_ended_before_anyone_looked_still_marks_the_forgot_to_stop_it_money(
        tmp_path: Path) -> None:
    """A box first seen after its run finished: the run's own times mark it training, then
    idle from its end, so `costs` counts what was billed after it (the guide's case)."""
    H = 3600.0
    meter_, now = clocked(MANUAL, tmp_path)
    meter_.ledger.record(Event(T0 - 6 * H, "lab", "running", 1.10, "config"))
    meter_.update([up("lab", T0, [finished("a", T0 - 5 * H, T0 - 3 * H)])])
    assert [(m.t - T0, m.activity) for m in meter_.ledger.marks] == [
        (-5 * H, "training"), (-3 * H, "idle")]
    report = costs_report(meter_.ledger.book, ["lab"], None, T0 + H)
    (lab,) = report.boxes
    assert lab.last_run_ended_at == T0 - 3 * H
    assert lab.after_last_run.usd == pytest.approx(4 * 1.10)
    assert lab.idle.hours == pytest.approx(4.0)
    # A second run started and ended while no panel was open: idle before, idle after,
    # yet it trained in between, and the money after it counts from its end.
    now[0] = T0 + 5 * H
    meter_.update([up("lab", now[0], [finished("a", T0 - 5 * H, T0 - 3 * H),
                                      finished("b", T0 + H, T0 + 3 * H)])])
    assert [(m.t - T0, m.activity) for m in meter_.ledger.marks][2:] == [
        (1 * H, "training"), (3 * H, "idle")]
    (lab,) = costs_report(meter_.ledger.book, ["lab"], None, T0 + 5 * H).boxes
    assert lab.last_run_ended_at == T0 + 3 * H
    assert lab.after_last_run.usd == pytest.approx(2 * 1.10)
