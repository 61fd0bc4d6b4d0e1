"""How an action on a box ended, in words for the box's line and for its toast.

A stop or destroy whose effect was not read back is not a failure: its command
may have worked, and the box may still be billing. It reads "unknown: may still
be billing" (yellow, a warning), never "failed", which would invite a second stop
of a box that may already be going down. Pure: no Textual, tested with plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.text import Text

from tui.model.text import clean
from tui.model.token_rule import notice_brief

SHOWN_LINES = 4
Severity = Literal["information", "warning", "error"]  # a toast's, as Textual names them


@dataclass(frozen=True)
class Ended:
    mark: str        # ✔, ✖, or ? when the effect was not seen
    verdict: str     # "done", "failed", "unknown: may still be billing"
    style: str       # the head's
    line_style: str  # the report lines'
    severity: Severity


def action_ended(code: int, outcome: str | None) -> Ended:
    """From a Report's exit code and its power outcome (None for actions without one)."""
    if code == 0:
        return Ended("✔", "done", "bold green", "", "information")
    if outcome == "cancelled":
        return Ended("✖", "cancelled by you", "bold yellow", "yellow", "warning")
    if outcome == "unknown":
        return Ended("?", "unknown: may still be billing", "bold yellow", "yellow", "warning")
    return Ended("✖", "failed", "bold red", "red", "error")


def ended_text(what: str, code: int, outcome: str | None, lines: Sequence[str],
               stamp: str) -> Text:
    """The box line's note: `? stop unknown: may still be billing 10:03`, then the first
    report lines (box-sourced words cleaned), and how to see the rest."""
    ended = action_ended(code, outcome)
    words = Text(f"{ended.mark} {what} {ended.verdict} {stamp}".rstrip(), style=ended.style)
    for line in lines[:SHOWN_LINES]:
        # a token note is one line here: its whole paragraph was in the dialog (or the CLI)
        words.append("\n" + (notice_brief(line) or clean(line)), style=ended.line_style)
    if len(lines) > SHOWN_LINES:
        words.append(f"\n… {len(lines) - SHOWN_LINES} more line(s): J shows the journal",
                     style="dim")
    return words


def ended_toast(box: str, what: str, code: int, outcome: str | None) -> tuple[str, Severity]:
    """The toast's words and severity."""
    ended = action_ended(code, outcome)
    return f"{box}: {what} {ended.verdict}", ended.severity
