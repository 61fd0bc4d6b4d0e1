"""When a silent box's watchdog reads as most likely fired, and when it must not.

The box's answers are folded as the panel folds them (fold_answer, then
fold_failure), on a fake clock; what a hostile or unable watchdog state says
never reads as a firing, and never crashes the reading.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from tui.actions.guardian import Guardian
from tui.model.alerts import UNREACHABLE, WATCHDOG_ACTED
from tui.model.box import BoxState, Connection, fold_answer, fold_failure
from tui.model.config import parse_config
from tui.model.status_doc import status_document
from tui.model.watchdog_silence import guard_reading, likely_fired
from tui.store.journal import Journal

BOX_T = 1_800_000_000.0   # the box's clock at its last answer
PANEL_T = BOX_T + 3.0     # the panel's, a little ahead of the box's


def guard_state(**fields: object) -> dict:
    return {"v": 1, "armed": True, "beat_seconds": 30, "did": [],
            "actions": {"timeout": ["push", "destroy"]}, **fields}


def silent_after(state: dict, seconds: float,
                 connection: Connection = Connection.UNREACHABLE,
                 heartbeat: float = BOX_T - 1) -> BoxState:
    """The box answered once (the watchdog's `state`), then `seconds` later it did not."""
    answered = fold_answer(BoxState(name="b"), {
        "v": 1, "time": BOX_T, "runs": [],
        "guard": {"at": heartbeat, "sig": "s", "state": state}}, PANEL_T)
    return fold_failure(answered, connection, "box b: connection refused",
                        PANEL_T + seconds, retry_at=PANEL_T + seconds + 1)


def test_a_deadline_that_passed_before_the_silence_is_the_watchdogs_stop() -> None:
    box = silent_after(guard_state(armed_at=BOX_T - 170, max_hours=0.05), 30)
    fired = likely_fired(box)
    assert fired is not None and fired.trigger == "timeout" and fired.at == BOX_T + 10
    assert fired.final == "destroy"
    words, level = guard_reading(box, PANEL_T + 9999) or ("", "")
    assert words.startswith("stopped or destroyed, most likely by its watchdog (timeout at ")
    assert level == "acted"
    # A timeout is silence too; a box that answered is what its watchdog wrote.
    assert likely_fired(silent_after(guard_state(armed_at=BOX_T - 170, max_hours=0.05), 30,
                                     Connection.TIMEOUT)) is not None
    assert likely_fired(silent_after(guard_state(armed_at=BOX_T - 170, max_hours=0.05), 30,
                                     Connection.AUTH_FAILED)) is None


@pytest.mark.parametrize(("state", "heartbeat"), [
    (guard_state(armed_at=BOX_T - 170, max_hours=0.05, dry_run=True), BOX_T - 1),
    (guard_state(armed_at=BOX_T - 170, max_hours=0.05, can_stop="cannot stop: no key"),
     BOX_T - 1),
    (guard_state(armed_at=BOX_T - 170, max_hours=0.05, armed=False, ended="removed"),
     BOX_T - 1),
    (guard_state(armed_at=BOX_T - 170, max_hours=0.05), BOX_T - 200),  # heartbeat stale
], ids=["dry run", "cannot stop", "not armed", "not running"])
def test_a_watchdog_that_could_not_act_is_not_said_to_have_stopped_the_box(
        state: dict, heartbeat: float) -> None:
    assert likely_fired(silent_after(guard_state(armed_at=BOX_T - 170, max_hours=0.05),
                                     60)) is not None  # what each case takes away
    box = silent_after(state, 60, heartbeat=heartbeat)
    assert likely_fired(box) is None
    words, _ = guard_reading(box, PANEL_T + 60) or ("", "")
    assert "most likely" not in words


@pytest.mark.parametrize("fields", [
    {"armed_at": 1e308, "max_hours": 0.05},
    {"armed_at": BOX_T - 170, "max_hours": 1e308},
    {"armed_at": -1e308, "max_hours": 0.05},
    {"armed_at": BOX_T - 170, "max_hours": -0.05},
    {"armed_at": math.nan, "max_hours": 0.05},
    {"armed_at": BOX_T - 170, "max_hours": math.nan},
    {"armed_at": BOX_T - 170, "max_hours": math.inf},
    {"armed_at": "yesterday", "max_hours": [1]},
    {"no_progress_minutes": 1, "last_progress_at": math.nan, "idle_since": -1e308},
    {"no_progress_minutes": -1, "last_progress_at": BOX_T - 1e9, "idle_since": BOX_T - 1e9},
    {"no_progress_minutes": 1e308, "last_progress_at": 0, "idle_since": 0},
], ids=lambda f: repr(f)[:40])
def test_an_absurd_deadline_never_reads_as_fired_nor_crashes(fields: dict) -> None:
    box = silent_after(guard_state(**fields), 60)
    assert likely_fired(box) is None
    for later in (60, 1e6, 1e12):
        words, _ = guard_reading(box, PANEL_T + later) or ("", "")
        assert "most likely" not in words and words.isprintable()
    doc = status_document([box], PANEL_T + 60)["boxes"][0]["guard"]
    assert doc["likely_fired"] is None


def test_the_earliest_condition_that_held_is_the_one_named() -> None:
    box = silent_after(guard_state(armed_at=BOX_T - 100, max_hours=0.05,
                                   no_progress_minutes=1, last_progress_at=BOX_T - 75,
                                   idle_since=BOX_T - 70), 60)
    fired = likely_fired(box)
    assert fired is not None and fired.trigger == "stalled" and fired.since == BOX_T - 75
    assert "(no progress since " in fired.words()
    idle = silent_after(guard_state(armed_at=BOX_T - 100, no_progress_minutes=1,
                                    idle_since=BOX_T - 70), 60)
    assert "(GPUs idle since " in (guard_reading(idle, PANEL_T + 60) or ("",))[0]


def test_the_alert_is_the_watchdogs_stop_once_not_an_outage(tmp_path: Path) -> None:
    """A box its watchdog most likely took down is news once, in the header's words; its
    silence is not then alerted as an outage however long it lasts."""
    fleet = parse_config('[[box]]\nname = "b"\nhost = "h"\n', "f.toml")
    clock = [PANEL_T + 30]
    guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), clock=lambda: clock[0])
    box = silent_after(guard_state(armed_at=BOX_T - 170, max_hours=0.05), 30)
    answered = replace(box, connection=Connection.OK, error=None, failed_since=None)
    said = guardian.box_updated(answered, box)
    assert [(e.kind, e.text) for e in said] == [
        (WATCHDOG_ACTED, f"b: {(guard_reading(box, clock[0]) or ('',))[0]}")]
    clock[0] += 3600
    later = replace(box, failures=box.failures + 100)
    assert guardian.box_updated(box, later) == []
    assert all(e.kind != UNREACHABLE for e in guardian.box_updated(later, later))
