"""Cancelling a running action from the panel: what may be left half-done, and what is
still safe, in words true for each action. Pure: no I/O.

The panel runs one action per box (a push, a stop, a check...). Cancelling ends its
task on this machine: the SSH channel closes, the provider's answer is no longer
waited for. What the action had already set going elsewhere is not undone: a
provider may still carry out a stop it received, a run a launch started keeps
training. The confirmation says so before, the box's line after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The journal's names for the actions the panel can cancel (a subset of JournalAction).
CancelAction = Literal["push", "stop", "start", "destroy", "launch", "check", "profile"]
CANCELLED: Literal["cancelled"] = "cancelled"


@dataclass(frozen=True)
class CancelWords:
    """What a cancel of one action means: `ask` (None: nothing can be left half-done, so
    no confirmation) and `after` (the line the box shows once cancelled)."""

    action: CancelAction  # the journal's name for it
    ask: str | None
    after: str


_PUSH = CancelWords(
    "push",
    "The push stops where it is. Files an earlier push verified stay verified; this push "
    "verifies nothing and is journaled as cancelled (push again to finish). A file cut "
    "off mid-copy is not counted, and the push program on the box ends within seconds. "
    "The run's files on the box are untouched. An upload this machine already handed to "
    "the Hub (upload_from = \"panel\") may still finish in the background, unverified.",
    "nothing verified by this push; the box's files are untouched, earlier verified "
    "pushes still hold")
_POWER = (
    "The {what} request may already be with the provider, which may still carry it out: "
    "the panel stops waiting for it, and the box's state shows what happened (r "
    "refreshes). Weights on the box are not touched by cancelling.")
_WORDS: dict[str, CancelWords] = {
    "push": _PUSH,
    "stop": CancelWords("stop", _POWER.format(what="stop"),
                        "the provider may still stop the box: its state shows what happened"),
    "start": CancelWords("start", _POWER.format(what="start"),
                         "the provider may still start the box (and bill its running rate): "
                         "its state shows what happened"),
    "destroy": CancelWords(
        "destroy",
        _POWER.format(what="destroy") + " If it was still pushing first (p in the destroy "
        "dialog), no destroy was sent and that push verifies nothing.",
        "the provider may still destroy the box, if the request was sent: its state shows "
        "what happened"),
    "launch": CancelWords(
        "launch",
        "A run the launch already started goes on training on the box (it was started "
        "detached); cancelling only stops waiting for its status.json.",
        "a run it already started goes on and shows in the box's section"),
    "check": CancelWords("check", None, "nothing was changed on the box"),
    "profile": CancelWords("profile", None,
                           "nothing was changed on the box; its few profiled steps may still "
                           "finish there"),
}
_BUDGET = CancelWords(
    "push",
    "The push stops where it is (files an earlier push verified stay verified) and the "
    "box is NOT stopped: it keeps billing its running rate.",
    "nothing verified by this push; the box was not stopped and keeps billing")


def cancel_words(what: str) -> CancelWords:
    """The words for cancelling the action the panel names `what` ("push", "milestone
    push (on_best)", "budget: push and stop", "stop"...)."""
    if what.startswith("budget:"):
        return _BUDGET
    if what.startswith("milestone push"):
        return _PUSH
    if what in _WORDS:
        return _WORDS[what]
    # Not an action the panel runs today; said plainly rather than guessed.
    return CancelWords("push" if "push" in what else "check",
                       f"{what} may be left half-done.", "it may be left half-done")
