"""A cancelled action in the journal says nothing about the box: the check before it
still stands (its verdict in the header, a launch refused after a failed one), and the
launch form is prefilled from the last launch that ran, not from the cancel."""

from __future__ import annotations

from typing import Any

from tui.model.launch import check_refusal, last_entry
from tui.model.preflight import last_check_verdicts


def entry(action: str, outcome: str, at: float, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "time": at, "box": "gpu-1", "action": action, "outcome": outcome,
            "message": f"{action} {outcome}", **extra}


def test_a_cancelled_check_leaves_the_last_verdict_and_its_refusal() -> None:
    entries = [entry("check", "problems", 1.0), entry("check", "cancelled", 2.0)]
    assert last_check_verdicts(entries)["gpu-1"].verdict == "problems"  # not "failed"
    assert check_refusal(entries, "gpu-1") is not None  # the cancel did not clear it
    ok = [entry("check", "ok", 1.0), entry("check", "cancelled", 2.0)]
    assert last_check_verdicts(ok)["gpu-1"].verdict == "ok"
    assert check_refusal(ok, "gpu-1") is None


def test_a_cancelled_launch_is_not_the_one_the_form_starts_from() -> None:
    entries = [entry("launch", "started", 1.0, args=["model=yolox-s"]),
               entry("launch", "cancelled", 2.0)]
    found = last_entry(entries, "gpu-1", "launch")
    assert found is not None and found["outcome"] == "started"
