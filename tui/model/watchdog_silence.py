"""A watchdog that most likely fired just before its box went silent. Pure.

The guard line is the watchdog's state as the box last wrote it, read against
the box's clock from its last answer. A watchdog whose stop takes the box down
never gets to say it fired: the box goes silent first, its clock stops with
the last answer, and the line would read "stops in 0s" for ever. So once the
box stops answering, the box's clock as last seen is carried forward on the
panel's clock: a trigger whose condition held (on that carried clock) before the
silence began reads "stopped, most likely by its watchdog (timeout at 15:31)",
never a countdown. Decided here once for the panel, `status` and `watch`.

Only a watchdog that could act counts: armed, not a dry run, its heartbeat
fresh on the last answer, and not saying it cannot stop the box. A box that
answers again shows the watchdog's real state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tui.model.box import BoxState, Connection
from tui.model.runs import Health, parse_time
from tui.model.watchdog import TRIGGERS, GuardView, Trigger, guard_summary

# A box that does not answer at all (refused, timed out): what a stopped box looks like.
SILENT = frozenset({Connection.UNREACHABLE, Connection.TIMEOUT})
FINISHED = (Health.COMPLETED, Health.FAILED)


@dataclass(frozen=True)
class LikelyFired:
    """The trigger whose condition held before the box went silent, on the box's clock."""

    trigger: Trigger
    at: float            # when its condition held (box clock)
    since: float | None  # stalled: the last progress; idle: idle since (box clock)
    final: str           # "stop" or "destroy": what that trigger ends in
    offset: float        # panel clock minus box clock, from the last answer

    def words(self) -> str:
        """`stopped, most likely by its watchdog (timeout at 15:31)`."""
        done = "stopped or destroyed" if self.final == "destroy" else "stopped"
        return f"{done}, most likely by its watchdog ({self.condition()})"

    def condition(self) -> str:
        if self.trigger == "timeout":
            return f"timeout at {self._clock(self.at)}"
        if self.trigger == "done":
            return "every run finished"
        since = self._clock(self.since if self.since is not None else self.at)
        return (f"no progress since {since}" if self.trigger == "stalled"
                else f"GPUs idle since {since}")

    def _clock(self, box_stamp: float) -> str:
        return clock_words(box_stamp + self.offset)


def clock_words(stamp: float) -> str:
    """HH:MM on the local clock, or `?` for a time no clock can show."""
    try:
        return time.strftime("%H:%M", time.localtime(stamp))
    except (OverflowError, OSError, ValueError):
        return "?"


def silent(box: BoxState) -> bool:
    """The box answered before and answers no more."""
    return (box.connection in SILENT and box.box_time is not None
            and box.last_ok_at is not None)


def box_clock(box: BoxState, now: float) -> float | None:
    """The box's clock as last seen, carried forward on the panel's clock."""
    if box.box_time is None or box.last_ok_at is None:
        return None
    return box.box_time + max(0.0, now - box.last_ok_at)


def _could_act(view: GuardView, box_time: float) -> bool:
    cannot = view.can_stop is not None and ("cannot" in view.can_stop
                                            or view.can_stop.startswith("no "))
    return (view.error is None and view.fired is None and view.armed and not view.dry_run
            and view.ended is None and not view.stale(box_time) and not cannot)


def _done_at(box: BoxState, view: GuardView) -> float | None:
    """When every run had finished, if one finished after the watchdog was armed (it fires
    on `done` only once it saw a run unfinished since arming)."""
    if not box.runs or view.armed_at is None or box.box_time is None:
        return None
    if not all(run.health in FINISHED for run in box.runs):
        return None
    ends = [parse_time(run.updated_at) for run in box.runs]
    if not any(end is not None and end >= view.armed_at for end in ends):
        return None
    return box.box_time


def likely_fired(box: BoxState) -> LikelyFired | None:
    """The trigger that most likely fired and took the box down, or None: the box is silent,
    its watchdog could act, and a trigger's condition held before the silence began."""
    view = box.guard
    if view is None or not silent(box) or box.failed_since is None:
        return None
    assert box.box_time is not None and box.last_ok_at is not None  # silent() says so
    if not _could_act(view, box.box_time):
        return None
    went_silent = box.box_time + max(0.0, box.failed_since - box.last_ok_at)
    held: list[tuple[float, int, Trigger, float | None]] = []
    if view.deadline is not None:
        held.append((view.deadline, 0, "timeout", None))
    done = _done_at(box, view)
    if done is not None:
        held.append((done, 1, "done", None))
    minutes = view.no_progress_minutes
    if minutes is not None and view.last_progress_at is not None:
        held.append((view.last_progress_at + minutes * 60, 2, "stalled",
                     view.last_progress_at))
    if minutes is not None and view.idle_since is not None:
        held.append((view.idle_since + minutes * 60, 3, "idle", view.idle_since))
    held = [h for h in held if h[0] <= went_silent]
    if not held:
        return None
    at, _, trigger, since = min(held)
    assert trigger in TRIGGERS
    return LikelyFired(trigger=trigger, at=at, since=since, final=view.final(trigger),
                       offset=box.last_ok_at - box.box_time)


def guard_reading(box: BoxState, now: float) -> tuple[str, str] | None:
    """(words, level) of the box's watchdog line, or None when it has none: what it most
    likely did to a silent box, else its state, whose countdown runs on while the box is
    silent and stops at its deadline."""
    view = box.guard
    if view is None:
        return None
    fired = likely_fired(box)
    if fired is not None:
        return fired.words(), "acted"
    if not silent(box) or view.error is not None or view.fired is not None:
        return guard_summary(view, box.box_time)
    carried = box_clock(box, now)
    deadline = view.deadline
    if (carried is not None and deadline is not None and deadline <= carried
            and _could_act(view, box.box_time or carried)):
        offset = (box.last_ok_at or 0.0) - (box.box_time or 0.0)
        return (f"guard's timeout was due at {clock_words(deadline + offset)}; the box went "
                "silent before it, so whether it fired is not known"), "warn"
    return guard_summary(view, box.box_time, countdown_at=carried)


def likely_fired_document(box: BoxState) -> dict[str, Any] | None:
    """`likely_fired` in `status --json`'s guard part: times on the box's clock."""
    fired = likely_fired(box)
    if fired is None:
        return None
    return {"trigger": fired.trigger, "at": fired.at, "since": fired.since,
            "final": fired.final, "words": fired.words()}
