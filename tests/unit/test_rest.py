"""A box at rest, from the journal's records and the provider's answer (tui.model.rest)."""

from __future__ import annotations

from typing import Any

from tui.model.preemption import last_power_action
from tui.model.rest import Rest, box_rest, rest_refusal, rest_words

T = 1_800_000_000.0


def entry(action: str, outcome: str, at: float, box: str = "b", **more: Any) -> dict[str, Any]:
    return {"box": box, "action": action, "outcome": outcome, "time": at, **more}


def test_only_a_stop_or_destroy_seen_to_land_puts_a_box_at_rest() -> None:
    assert box_rest([entry("stop", "done", T)], "b", None) == Rest("stopped", "you", T)
    assert box_rest([entry("stop", "unknown", T)], "b", None) is None  # not seen: no proof
    assert box_rest([entry("stop", "done", T), entry("start", "done", T + 1)], "b", None) \
        is None
    assert box_rest([entry("destroy", "done", T)], "b", None) == Rest("destroyed", "you", T)
    assert box_rest([entry("stop", "done", T, box="other")], "b", None) is None


def test_a_failed_or_refused_start_leaves_the_stop_standing() -> None:
    for outcome in ("failed", "refused"):
        entries = [entry("stop", "done", T), entry("start", outcome, T + 5)]
        assert box_rest(entries, "b", "stopped", T + 10) == Rest("stopped", "you", T)
        assert last_power_action(entries, "b") == "stop"
    # A start whose effect was not seen may have started it: the stop no longer stands.
    assert last_power_action([entry("stop", "done", T), entry("start", "unknown", T + 5)],
                             "b") == "start"


def test_the_provider_reading_it_up_after_our_stop_ends_the_rest() -> None:
    stop = [entry("stop", "done", T)]
    assert box_rest(stop, "b", "running", T - 30) == Rest("stopped", "you", T)  # old answer
    assert box_rest(stop, "b", "running", T + 30) is None  # started from the console
    assert box_rest(stop, "b", "starting", T + 30) is None
    assert box_rest(stop, "b", "destroyed", T + 30) == Rest("destroyed", "the provider",
                                                             T + 30)


def test_words_and_refusals() -> None:
    stopped, gone = Rest("stopped", "you", T), Rest("destroyed", "you", T)
    assert rest_words(stopped, "15:44", 0.0548) == "stopped (by you, 15:44) · disk $0.0548/hr"
    assert "disk rate unknown" in rest_words(stopped, "15:44", None)
    assert rest_words(gone, "15:50", 0.0548) == "destroyed (by you, 15:50)"
    assert rest_refusal("check", "b", gone) == "b is destroyed: nothing is left to check"
    assert rest_refusal("push", "b", stopped) == "b is stopped: start it first (S) to push on it"
    assert rest_refusal("check", "b", None) is None
