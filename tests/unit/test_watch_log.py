"""watch's log sink: one line per event that says something, in the words `watch` has
always written (scripts grep them), none for those that only redraw the panel."""

from __future__ import annotations

from tui.model.alerts import PUSH_FAILED, event
from tui.model.box import BoxState, Connection
from tui.model.policy import Notice as CostNotice
from tui.runtime import events as ev
from tui.runtime.watch_sink import LogSink


def lines(*items: ev.Event) -> list[str]:
    said: list[str] = []
    sink = LogSink(said.append)
    for item in items:
        sink(item)
    return said


def test_actions_read_as_they_always_did() -> None:
    title = "milestone push of run1 (best mAP50-95 0.41)"
    assert lines(ev.ActionStarted("b", "milestone push (best mAP50-95 0.41)", title),
                 ev.ActionEnded("b", "milestone push (best mAP50-95 0.41)", title,
                                ("pushed 2 files", "verified\nat the destination"), 0),
                 ev.ActionEnded("b", "budget: push and stop", "budget: push and stop", (), 1,
                                "unknown")) == [
        f"box b: {title}: started",
        f"box b: {title}: done: pushed 2 files | verified at the destination",
        "box b: budget: push and stop: FAILED"]


def test_a_box_is_said_when_its_connection_changes_only() -> None:
    up = BoxState(name="b", connection=Connection.OK)
    down = BoxState(name="b", connection=Connection.UNREACHABLE, error="no route")
    crashed = BoxState(name="b", connection=Connection.WATCHER_CRASHED, error="watcher crashed")
    assert lines(ev.BoxChanged(up), ev.BoxChanged(up), ev.BoxChanged(down),
                 ev.Crashed("b", "RuntimeError: the clock broke", 2.4), ev.BoxChanged(crashed),
                 ev.BoxChanged(up)) == [
        "box b: ok", "box b: unreachable: no route",
        "box b: watcher crashed (RuntimeError: the clock broke); restarted in 2 s",
        "box b: ok"]


def test_alarms_notices_and_crashes() -> None:
    alert = event(PUSH_FAILED, "b", "b: push failed: no space", 0.0)
    assert lines(ev.Alarm((CostNotice("b", "b is over its budget"),), (alert,), "error", True),
                 ev.Crashed("providers", "RuntimeError: the rates broke", 1.2),
                 ev.Notice("cost ledger /x: 2 unreadable line(s) skipped", "warning"),
                 ev.PushesChanged({})) == [
        "box b: b is over its budget", alert.log_line(),
        "providers: poll failed (RuntimeError: the rates broke); restarted in 1 s",
        "cost ledger /x: 2 unreadable line(s) skipped"]
