"""What the journal records of a box's watchdog stopping it. Pure.

The on-box watchdog's stop is not ours, so nothing journals it unless the runtime (the
panel or `watch`) reads it in the watchdog's state: a stop or destroy step done, or, for a
box gone silent, the trigger that most likely fired (tui.model.watchdog_silence). Each is
journalled once (`by: "watchdog"`), keyed by the arming's id and the step's time, so a
re-read, or a restart reading the same state, never records it twice: the journal is
the memory. `status` in a fresh process then says why the box is silent.

The state is the box's word: a step whose time is not near the box's own clock (absurd,
or older than MAX_AGE_SECONDS) is not journalled, nor one from before our last start.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tui.model.box import BoxState
from tui.model.watchdog_silence import likely_fired

# A step older than this on the box's clock is history, not news.
MAX_AGE_SECONDS = 30 * 86400.0
# A step a little after the box's clock as last read (written as the box went down).
SKEW_SECONDS = 300.0


@dataclass(frozen=True)
class WatchdogStop:
    """One record: the box's watchdog stopped (or most likely stopped) or destroyed it."""

    key: str  # "<guard id>:<step>:<box-clock time>": the dedupe key, in the entry too
    action: Literal["stop", "destroy"]
    outcome: Literal["done", "unknown"]
    at: float  # on the panel's clock
    message: str
    likely: bool
    trigger: str | None = None

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by": "watchdog", "guard_step": self.key}
        if self.likely:
            out["likely"] = True
            out["trigger"] = self.trigger
        return out


def journalled_keys(entries: Iterable[Mapping[str, Any]], box: str) -> set[str]:
    """The watchdog stops already journalled for `box` (their keys)."""
    return {str(e["guard_step"]) for e in entries
            if e.get("box") == box and e.get("by") == "watchdog"
            and isinstance(e.get("guard_step"), str)}


def watchdog_stops(box: BoxState, seen: Container[str], started_at: float | None
                   ) -> list[WatchdogStop]:
    """The watchdog stops to journal now for `box`: those its state shows (done), and the
    likely one of a silent box, minus those `seen`, those before `started_at` (our last
    start, panel clock) and those whose time is absurd."""
    guard = box.guard
    if guard is None or guard.dry_run or box.box_time is None or box.last_ok_at is None:
        return []
    offset = box.last_ok_at - box.box_time
    gid = guard.guard_id or "-"
    out: list[WatchdogStop] = []

    def sane(at: float | None) -> bool:
        assert box.box_time is not None
        return at is not None and box.box_time - MAX_AGE_SECONDS <= at \
            <= box.box_time + SKEW_SECONDS and \
            (started_at is None or at + offset >= started_at)

    for step in guard.did:
        if step.action in ("stop", "destroy") and step.outcome == "done" and sane(step.at):
            assert step.at is not None
            key = f"{gid}:{step.action}:{step.at:.3f}"
            if key in seen or any(o.key == key for o in out):
                continue
            past = "stopped" if step.action == "stop" else "destroyed"
            out.append(WatchdogStop(key, "stop" if step.action == "stop" else "destroy",
                                    "done", step.at + offset,
                                    f"{past} by its watchdog (seen in its state)", False))
    fired = likely_fired(box)
    if fired is not None and not out and sane(fired.at):
        key = f"{gid}:likely:{fired.at:.3f}"
        if key not in seen:
            out.append(WatchdogStop(key, "stop", "unknown", fired.at + offset, fired.words(),
                                    True, fired.trigger))
    return out
