"""The watchdog from the panel's side: its plan, and its state read as a stranger's words."""

from __future__ import annotations

import json

import pytest

from tui.model.box import BoxState, fold_answer, probe_request
from tui.model.status_doc import status_table
from tui.model.watchdog import (
    GuardPlanError,
    GuardView,
    check_limits,
    fold_guard,
    fold_guard_part,
    guard_document,
    guard_events,
    guard_summary,
    parse_on,
)
from tui.onbox.probe import adopt
from tui.remote.session import request_delta

ARMED = {"v": 1, "armed": True, "armed_at": 1000.0, "max_hours": 3.25,
         "no_progress_minutes": 20, "beat_seconds": 30,
         "actions": {"timeout": ["push", "stop"], "done": ["push", "destroy"]},
         "can_stop": "CONTAINER_API_KEY (this instance's own key) for instance 7", "did": []}


def test_on_rules_name_triggers_and_steps() -> None:
    rules = parse_on(["done|timeout=push,destroy", "idle=stop"])
    assert rules == {"done": ("push", "destroy"), "timeout": ("push", "destroy"),
                     "idle": ("stop",), "stalled": ("push", "stop")}
    for bad in ("soon=stop", "done=destroy", "done", "done=push,stop,destroy"):
        with pytest.raises(GuardPlanError, match="--on"):
            parse_on([bad])
    with pytest.raises(GuardPlanError, match="--max-hours"):
        check_limits(float("nan"), None, 30)
    with pytest.raises(GuardPlanError, match="--no-progress-minutes"):
        check_limits(1, 0, 30)


def test_the_header_says_when_it_acts_on_the_boxs_clock() -> None:
    view = fold_guard(ARMED, 1000.0 + 3590)
    words, level = guard_summary(view, 1000.0 + 3600)
    assert words == ("guarded: stops in 2h15m or after 20 min without progress or when every "
                     "run finished") and level == "ok"
    destroy = fold_guard({**ARMED, "actions": {"timeout": ["push", "destroy"]},
                          "dry_run": True}, 1000.0)
    assert guard_summary(destroy, 1000.0)[0].startswith(
        "guarded (dry run): would destroy in 3h15m")
    no_key = fold_guard({**ARMED, "can_stop": "no CONTAINER_API_KEY in this box's "
                                              "environment: cannot call the vast API"}, 1000.0)
    assert guard_summary(no_key, 1000.0)[1] == "warn"


def test_a_stale_heartbeat_reads_not_running() -> None:
    view = fold_guard(ARMED, 1000.0)
    assert not view.stale(1000.0 + 90)
    words, level = guard_summary(view, 1000.0 + 600)
    assert words == "guard not running (last heartbeat 10m ago)" and level == "bad"


def test_what_it_did_while_the_panel_was_away() -> None:
    acted = {**ARMED, "armed": False,
             "fired": {"trigger": "stalled", "at": 2000.0, "why": "no epoch progress"},
             "did": [{"action": "fired", "outcome": "acting", "at": 2000.0, "detail": "x"},
                     {"action": "push", "outcome": "verified", "at": 2001.0,
                      "detail": "r1: 7 file(s) verified"},
                     {"action": "stop", "outcome": "done", "at": 2002.0,
                      "detail": "stop sent", "answer": "HTTP 200 {}"}]}
    before = fold_guard(ARMED, 1000.0)
    after = fold_guard(acted, 2010.0)
    words, level = guard_summary(after, 2070.0)
    assert words == ("guard fired 1m ago (stalled: no epoch progress): push verified: r1: 7 "
                     "file(s) verified; stop done: stop sent") and level == "acted"
    assert [s.action for s in guard_events(before, after)] == ["fired", "push", "stop"]
    assert guard_events(after, after) == []
    assert guard_summary(after, 9000.0)[0].endswith("; guard not running now")


def test_status_prints_the_guard_line() -> None:
    state = fold_answer(BoxState(name="b"), {**answer(guard={"at": 1000.0, "sig": "s",
                                                            "state": ARMED}), "time": 1500.0},
                        100.0)
    assert "  ! guard not running (last heartbeat 8m ago)" in status_table([state], 100.0)
    fresh = fold_answer(state, {**answer(guard={"at": 1000.0}), "time": 1010.0}, 100.0)
    assert "  · guarded: stops in 3h14m or after 20 min without progress" in \
        status_table([fresh], 100.0)


@pytest.mark.parametrize("raw", [
    None, [], "x", {"v": 2}, {"v": 1, "max_hours": "soon", "armed_at": 1e300, "did": 5,
                               "fired": [], "beat_seconds": float("inf"), "actions": 3},
    {"v": 1, "did": [{"action": 1}, {"action": "x" * 10_000, "detail": "\x1b[2J" * 5000}]},
])
def test_any_state_folds_to_a_bounded_clean_line(raw: object) -> None:
    view = fold_guard(json.loads(json.dumps(raw)), 5.0)
    words, _ = guard_summary(view, 10.0)
    assert words.isprintable() and len(words) < 2000
    assert view.beat_seconds > 0 and all(len(s.action) <= 20 for s in view.did)


def test_a_heartbeat_alone_keeps_the_state_and_an_absent_file_drops_it() -> None:
    view, new = fold_guard_part(None, {"at": 5.0, "sig": "a", "state": ARMED})
    assert new and view is not None and view.heartbeat == 5.0 and view.armed
    beat, new = fold_guard_part(view, {"at": 9.0})
    assert not new and beat is not None and beat.heartbeat == 9.0 and beat.armed
    assert fold_guard_part(beat, {"absent": True}) == (None, True)
    bad, _ = fold_guard_part(None, {"at": 1.0, "sig": "b", "error": "over 64 KiB"})
    assert isinstance(bad, GuardView) and bad.error == "over 64 KiB"


def answer(**extra: object) -> dict[str, object]:
    return {"v": 1, "time": 100.0, "runs": [], "gone": [], **extra}


def test_a_kept_probe_and_the_client_agree_on_the_guard_cursor() -> None:
    """After an answer carrying the state, the next request line says nothing of it:
    an idle refresh stays a nonce."""
    state = BoxState(name="b")
    held = probe_request(state, ("/runs",))
    for part in ({"at": 5.0, "sig": "s1", "state": ARMED}, {"at": 6.0},
                 {"at": 7.0, "sig": "s2", "error": "not JSON"}, {"absent": True}):
        got = answer(guard=part)
        adopt(held, got)  # what the probe holds after answering
        state = fold_answer(state, got, 100.0)
        assert request_delta(held, probe_request(state, ("/runs",))) == {}, part
    assert state.guard is None and "guard_sig" not in probe_request(state, ("/runs",))


def test_a_huge_whole_number_in_the_state_is_no_value_not_a_crash() -> None:
    """JSON's integers have no bound: 1 followed by 400 zeros is read as nothing, as every
    other reader of untrusted documents reads it (tui/model/fields.py)."""
    huge = 10 ** 400
    raw = json.loads(json.dumps({"v": 1, "armed": True, "max_hours": huge, "armed_at": huge,
                                 "did": [{"action": "stop", "outcome": "done", "at": huge}]}))
    view = fold_guard(raw, 5.0)
    assert view.max_hours is None and view.armed_at is None
    assert [(s.action, s.outcome, s.at) for s in view.did] == [("stop", "done", None)]


def test_a_step_is_read_as_one_the_watchdog_writes() -> None:
    """Steps are typed: an action or outcome the watchdog never writes reads "?" (a hostile
    trigger name still shows that the watchdog fired); a step with no action is dropped."""
    raw = {"v": 1, "did": [{"action": "rm -rf", "outcome": "done"},
                           {"action": "push", "outcome": "exploded"},
                           {"action": "stop", "outcome": "sending"}, {"outcome": "done"}],
           "fired": {"trigger": "stalled", "at": 3.0, "why": "no progress"}}
    view = fold_guard(raw, 5.0)
    assert [(s.action, s.outcome) for s in view.did] == \
        [("?", "done"), ("push", "?"), ("stop", "sending")]
    assert view.fired is not None and (view.fired.action, view.fired.outcome) == \
        ("stalled", "fired")
    odd = fold_guard({"v": 1, "fired": {"trigger": "stalled\x1b]0;pwn\x07", "at": 3.0}}, 5.0)
    assert odd.fired is not None and odd.fired.action == "?"


ACTED = {**ARMED, "armed": False,
         "fired": {"trigger": "timeout", "at": 2000.0, "why": "the limit"},
         "did": [{"action": "fired", "outcome": "acting", "at": 2000.0, "detail": "x"},
                 {"action": "stop", "outcome": "ran", "at": 2001.0, "detail": "exit 0"}]}


def test_a_watchdog_that_acted_and_ended_reads_ended_not_lost() -> None:
    """Its heartbeat stops by design once it has acted: the header says it ended, as it
    wrote, not 'not running' as for one that died; status --json says it is not running."""
    view = fold_guard({**ACTED, "ended": "exited after acting"}, 2001.0)
    words, level = guard_summary(view, 2001.0 + 3600)
    assert words == ("guard fired 1h00m ago (timeout: the limit): stop ran: exit 0; guard "
                     "exited after acting") and level == "acted"
    assert guard_document(view, 2002.0)["running"] is False  # fresh heartbeat, still ended
    failed = [*ACTED["did"][:1], *[{"action": "stop", "outcome": "failed", "at": 2001.0 + i,
                                    "detail": "its stop_command failed"} for i in range(3)]]
    gave_up = fold_guard({**ACTED, "did": failed, "ended": "exited: the stop failed 3 "
                          "times; the box may still be billing"}, 2004.0)
    words, level = guard_summary(gave_up, 2010.0)
    assert words.endswith("; guard exited: the stop failed 3 times; the box may still be "
                          "billing") and level == "bad"
    died = fold_guard(ACTED, 2001.0)  # no word of ending: it died (or the box went down)
    assert guard_summary(died, 2001.0 + 3600)[0].endswith("; guard not running now")


def test_a_watchdog_staying_to_retry_says_when_and_which_attempt() -> None:
    raw = {**ACTED, "did": [*ACTED["did"][:1], {"action": "stop", "outcome": "failed",
                                                "at": 2001.0, "detail": "exit 1"}],
           "staying": {"action": "stop", "retry_at": 2121.0, "attempt": 2, "attempts": 3}}
    view = fold_guard(raw, 2001.0)
    words, level = guard_summary(view, 2031.0)
    assert words.endswith("; staying: retrying the stop in 1m (attempt 2 of 3)") and \
        level == "acted", words
    doc = guard_document(view, 2031.0)
    assert doc["running"] and doc["staying"] == {"action": "stop", "retry_at": 2121.0,
                                                 "attempt": 2, "attempts": 3}
    assert guard_summary(view, 9000.0)[0].endswith("; guard not running now")  # it died
    for bad in ({"action": "rm", "attempt": 2, "attempts": 3}, {"action": "stop"},
                {"action": "stop", "attempt": 4, "attempts": 3}, [1],
                {"action": "stop", "attempt": 10 ** 400, "attempts": 10 ** 401},
                {"action": "stop", "attempt": 1, "attempts": 3, "retry_at": 1e300}):
        odd = fold_guard(json.loads(json.dumps({**raw, "staying": bad})), 2001.0)
        assert odd.staying is None or odd.staying.retry_at is None, bad
        assert guard_summary(odd, 2031.0)[0].isprintable()


def test_files_kept_instead_of_a_destroy_are_named_in_the_guard_line() -> None:
    """A push,destroy watchdog that stopped because a destroy would lose files names them:
    the header says which, of which run, and why; status --json carries them."""
    kept = [{"run": "r1", "files": ["weights/best_ema.pt"], "more": 0,
             "why": "no push takes it (only best.pt, last.pt, epoch_<N>.pt and the history)"},
            {"run": "r2", "files": [f"weights/epoch_{n}.pt" for n in range(10, 70, 10)],
             "more": 0, "why": "not verified on the Hub: 401"}]
    view = fold_guard({**ACTED, "kept": kept, "ended": "exited after acting"}, 2001.0)
    words, level = guard_summary(view, 2002.0)
    assert ("; kept on the box: r1: weights/best_ema.pt (no push takes it (only best.pt, "
            "last.pt, epoch_<N>.pt and the history)); r2: weights/epoch_10.pt, "
            "weights/epoch_20.pt, weights/epoch_30.pt, weights/epoch_40.pt, +2 more (not "
            "verified on the Hub: 401); guard exited after acting") in words, words
    assert level == "acted"
    doc = guard_document(view, 2002.0)
    assert doc["kept"][0] == {"run": "r1", "files": ["weights/best_ema.pt"], "more": 0,
                              "why": kept[0]["why"]}
    assert len(doc["kept"][1]["files"]) == 6
    assert guard_summary(fold_guard(ACTED, 2001.0), 2002.0)[0].count("kept") == 0


@pytest.mark.parametrize("kept", [
    5, "x", {"run": "r1"}, [None, 3, [], {"files": ["a"]}, {"run": 7}],
    [{"run": "\x1b]0;owned\x07r" * 500, "files": ["\x1b[2Jw" * 200] * 50,
      "more": 10 ** 400, "why": "w\n" * 5000}] * 30,
    [{"run": "r", "files": "weights/x.pt", "more": -5, "why": None}],
])
def test_a_hostile_kept_list_is_bounded_and_clean(kept: object) -> None:
    """`kept` is written on the box: every entry typed, every text cleaned and cut, the
    lists bounded, a count that is no sane number read as none."""
    view = fold_guard(json.loads(json.dumps({**ACTED, "kept": kept, "kept_more": 10 ** 400})),
                      2001.0)
    assert len(view.kept) <= 20 and 0 <= view.kept_more <= 10 ** 6
    if isinstance(kept, list) and len(kept) > 20:
        assert view.kept_more == len(kept) - 20  # the runs past the bound are counted
    for k in view.kept:
        assert len(k.files) <= 20 and 0 <= k.more <= 10 ** 6
        assert all(len(t) <= 200 and t.isprintable() for t in (k.run, k.why, *k.files))
    words, _ = guard_summary(view, 2002.0)
    assert words.isprintable() and len(words) < 3000, len(words)
