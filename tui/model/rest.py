"""A box at rest: stopped or destroyed on purpose, so its silence is expected. Pure.

A box that does not answer after our own observed stop (the panel's or the CLI's, its
effect read back from the provider: the journal says "done") or destroy is not broken:
it reads "stopped (by you, 15:44)" or "destroyed", counts apart from the boxes that are
down, leaves `status` at exit 0, and is looked at rarely (REST_PROBE_SECONDS) rather than
retried every second. It is at rest only while it does not answer and the provider does
not read it running again: a box started from the provider's console answers and the
rest state goes at once.

The journal's record is the "why"; a box's on-box watchdog (tui.model.watchdog) could
become one more `by` here ("watchdog"), read from the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tui.model.cost import usd

RestKind = Literal["stopped", "destroyed"]
# How often a box at rest is looked at: it may be started from the provider's console, and
# then it reads as running again at the next look.
REST_PROBE_SECONDS = 60.0
# Provider states that say the box is up again, whatever our journal last said.
UP_STATES = ("running", "starting")
POWER_ACTIONS = ("stop", "start", "destroy")
# Outcomes that changed nothing: the provider or the box said no (a start answered 409
# because the GPU was rented out), or the panel never sent it.
CHANGED_NOTHING = ("failed", "refused")


def power_change(entry: Mapping[str, Any]) -> str | None:
    """The stop, start or destroy a journal entry records, if it may have changed the box's
    power: done, or unknown (sent, effect not read back: it may still have acted). A failed
    or refused one is not a power change; it must not hide the stop before it."""
    action = entry.get("action")
    if action not in POWER_ACTIONS or entry.get("outcome") in CHANGED_NOTHING:
        return None
    return str(action)


@dataclass(frozen=True)
class Rest:
    """Why a silent box is silent: what put it to rest, who, and when (the journal's time)."""

    kind: RestKind
    by: str = "you"  # "you" (the panel or the CLI), "watchdog", "budget"
    at: float | None = None

    def words(self, clock: str | None = None) -> str:
        """`stopped (by you, 15:44)` / `destroyed (by you, 15:50)`; `clock` is `at` shown."""
        who = f"by {self.by}" + (f", {clock}" if clock else "")
        return f"{self.kind} ({who})"


def journal_rest(entries: Iterable[Mapping[str, Any]], box: str) -> Rest | None:
    """The rest the journal's last power change on `box` puts it in: a stop or destroy
    whose effect was seen (outcome "done"). A stop whose effect was not seen ("unknown")
    proves nothing, and a failed or refused start after a stop leaves the stop standing."""
    rest: Rest | None = None
    for entry in entries:
        if entry.get("box") != box:
            continue
        action = power_change(entry)
        if action is None:
            continue
        if action in ("stop", "destroy") and entry.get("outcome") == "done":
            at = entry.get("time")
            by = entry.get("by")
            rest = Rest("stopped" if action == "stop" else "destroyed",
                        by if isinstance(by, str) and by else "you",
                        float(at) if isinstance(at, int | float) else None)
        else:
            rest = None  # a start, or a stop not seen to land
    return rest


def box_rest(entries: Iterable[Mapping[str, Any]], box: str,
             provider_state: str | None, read_at: float | None = None) -> Rest | None:
    """The rest a silent box is in, or None: the journal's, unless the provider, in an
    answer read (`read_at`) after our stop, reads the box up again (started from its
    console); an answer from before the stop says nothing of it. A provider that reads a
    stopped box destroyed (it reclaimed the disk) makes it destroyed."""
    rest = journal_rest(entries, box)
    if rest is None:
        return None
    if read_at is None or (rest.at is not None and read_at < rest.at):
        return rest
    if provider_state in UP_STATES:
        return None
    if provider_state == "destroyed" and rest.kind == "stopped":
        return Rest("destroyed", "the provider", read_at)
    return rest


def rest_words(rest: Rest, clock: str | None, disk_usd_per_hr: float | None) -> str:
    """The box's one line: `stopped (by you, 15:44) · disk $0.0300/hr`, saying so where
    what the stopped disk bills is unknown; `destroyed (by you, 15:50)`, nothing more."""
    words = rest.words(clock)
    if rest.kind == "destroyed":
        return words
    if disk_usd_per_hr is None:
        return f"{words} · disk rate unknown (set disk_gb and storage_usd_per_gb_month)"
    return f"{words} · disk {usd(disk_usd_per_hr)}/hr"


def rest_document(rest: Rest | None) -> dict[str, Any] | None:
    """`status --json`'s `rest`: what put the box to rest, who and when (ISO, UTC)."""
    if rest is None:
        return None
    at = None if rest.at is None else \
        datetime.fromtimestamp(rest.at, UTC).isoformat(timespec="seconds")
    return {"kind": rest.kind, "by": rest.by, "at": at}


# What needs the box itself to answer, so is not offered on a box at rest.
NEEDS_THE_BOX = ("push", "check", "doctor", "fetch", "launch")


def rest_refusal(action: str, box: str, rest: Rest | None) -> str | None:
    """Why `action` is not offered on a box at rest (one line), or None: a destroyed box has
    nothing left to act on; a stopped one is started first (S)."""
    if rest is None or action not in NEEDS_THE_BOX:
        return None
    if rest.kind == "destroyed":
        return f"{box} is destroyed: nothing is left to {action}"
    return f"{box} is stopped: start it first (S) to {action} on it"
