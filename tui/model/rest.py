"""A box at rest: stopped or destroyed on purpose, so its silence is expected. Pure.

A box that does not answer after our own observed stop (the panel's or the CLI's, its
effect read back from the provider: the journal says "done") or destroy is not broken:
it reads "stopped (by you, 15:44)" or "destroyed", counts apart from the boxes that are
down, leaves `status` at exit 0, and is looked at rarely (REST_PROBE_SECONDS) rather than
retried every second. It is at rest only while it does not answer and the provider does
not read it running again: a box started from the provider's console answers and the
rest state goes at once.

The journal's record is the "why", and `by` says whose: "you" (the panel or the CLI),
"budget" (on_budget = "push-and-stop"), "watchdog" (its on-box watchdog's stop, seen in
its state by the panel or `watch`, journalled once). A silent box whose watchdog most
likely took it down (tui.model.watchdog_silence) is journalled as such, `likely`: it
rests too, `sure` False, in the words the runtime decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from tui.model.cost import usd
from tui.model.text import clean

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
    by: str = "you"  # "you" (the panel or the CLI), "watchdog", "budget", "the provider"
    at: float | None = None
    sure: bool = True  # False: most likely, not seen (a silent box's watchdog)
    note: str | None = None  # the words of an unsure rest, as the runtime decided them

    def words(self, clock: str | None = None) -> str:
        """`stopped (by you, 15:44)` / `stopped (by its watchdog, 15:31)`; `clock` is `at`
        shown. An unsure rest says its own words (`stopped, most likely by its watchdog
        (timeout at 15:31)`)."""
        if self.note:
            return self.note
        who = f"by {BY_WORDS.get(self.by, self.by)}" + (f", {clock}" if clock else "")
        return f"{self.kind} ({who})"


# Who may put a box to rest, as the journal's `by` names them, and in words.
BY_WORDS = {"you": "you", "watchdog": "its watchdog", "budget": "its budget",
            "the provider": "the provider"}
NOTE_CELLS = 160  # an unsure rest's words, as read back from the journal


def _by(entry: Mapping[str, Any]) -> str:
    by = entry.get("by")
    return by if isinstance(by, str) and by in BY_WORDS else "you"


def _likely(entry: Mapping[str, Any]) -> bool:
    """The runtime's record that a silent box's watchdog most likely stopped it."""
    return entry.get("action") == "stop" and entry.get("outcome") == "unknown" \
        and entry.get("by") == "watchdog" and entry.get("likely") is True


def journal_rest(entries: Iterable[Mapping[str, Any]], box: str) -> Rest | None:
    """The rest the journal's last power change on `box` puts it in: a stop or destroy
    whose effect was seen (outcome "done"). A stop whose effect was not seen ("unknown")
    proves nothing, and a failed or refused start after a stop leaves the stop standing.
    A watchdog's likely stop, journalled by the runtime, rests the box unsure."""
    rest: Rest | None = None
    for entry in entries:
        if entry.get("box") != box:
            continue
        action = power_change(entry)
        if action is None:
            continue
        at = entry.get("time")
        when = float(at) if isinstance(at, int | float) else None
        if action in ("stop", "destroy") and entry.get("outcome") == "done":
            rest = Rest("stopped" if action == "stop" else "destroyed", _by(entry), when)
        elif _likely(entry):
            said = entry.get("message")
            note = clean(said)[:NOTE_CELLS] if isinstance(said, str) and said else None
            rest = Rest("stopped", "watchdog", when, sure=False,
                        note=note or "stopped, most likely by its watchdog")
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
    """`status --json`'s `rest`: what put the box to rest, who and when (ISO, UTC), and
    whether that was seen (`sure`) or is the watchdog's most likely stop."""
    if rest is None:
        return None
    at = None if rest.at is None else \
        datetime.fromtimestamp(rest.at, UTC).isoformat(timespec="seconds")
    return {"kind": rest.kind, "by": rest.by, "at": at, "sure": rest.sure,
            "words": rest.words()}


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
