"""The journal screen (key `J`): every action and how it ended, newest first."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.model.sizing import human_bytes

OUTCOME_STYLE = {"done": "green", "failed": "bold red", "unknown": "bold yellow",
                 "refused": "yellow", "cancelled": "yellow"}


def journal_table(entries: Sequence[Mapping[str, Any]], limit: int = 500) -> Table:
    table = Table(expand=True, box=None, padding=(0, 1), header_style="bold")
    for column in ("time", "box", "run", "action", "outcome", "what happened"):
        table.add_column(column, no_wrap=column != "what happened",
                         ratio=1 if column == "what happened" else None)
    for entry in list(reversed(entries))[:limit]:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(float(entry.get("time") or 0)))
        outcome = str(entry.get("outcome") or "")
        files = entry.get("files") or []
        words = str(entry.get("message") or "")
        if entry.get("action") == "push" and files:
            size = sum(int(f.get("size") or 0) for f in files)
            verified = "verified" if entry.get("verified") else "NOT verified"
            words = (f"{len(files)} files, {human_bytes(size)} -> {entry.get('destination')} "
                     f"({verified}). {words}")
        # Text cells, never str: a str is parsed as markup, and a run named "[/]" must
        # not break the screen.
        table.add_row(Text(stamp), Text(str(entry.get("box") or "")),
                      Text(str(entry.get("run") or "")), Text(str(entry.get("action") or "")),
                      Text(outcome, style=OUTCOME_STYLE.get(outcome, "")), Text(words))
    return table


class JournalScreen(Screen[None]):
    DEFAULT_CSS = """
    JournalScreen #empty { color: $text-muted; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        super().__init__()
        self.entries = entries

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            if self.entries:
                yield Static(journal_table(self.entries))
            else:
                yield Static(Text("no actions yet: p pushes a run, s stops a box, "
                                  "D destroys one"), id="empty")
        yield Footer()

    def on_mount(self) -> None:
        # The app focuses nothing by itself (AUTO_FOCUS = None): without this, up, down,
        # page up/down, home and end reach no scroll, and at 80x24 one push's words
        # already fill the screen.
        self.query_one("#page", VerticalScroll).focus()
