"""The profile screen: LibreYOLO's profiler on a box for a few steps, and its verdict.

Opened from a run (its settings and last.pt) or from the palette for a box; the
field takes the command's options (`--try workers=1,8,12 batch=16,64`,
`--force`, or `--data D --weights W` without a run). Enter runs it under the
box's lock, so `x` on the fleet cancels it as any action; progress and the
verdict show here. Escape goes back (and abandons a profile still running).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from tui.model.profile import (
    ProfileError,
    ProfileReport,
    ProfileRequest,
    parse_options,
    table_rows,
)
from tui.runtime.events import BoxBusy
from widgets.fleet_text import clean

Profile = Callable[[ProfileRequest, Callable[[str], None]], Awaitable[ProfileReport]]
HEADER = ("batch", "workers", "img/s", "dataload", "GPU busy", "$/1k img", "LibreYOLO")


def report_text(report: ProfileReport) -> Text:
    """The verdict first, then the table of settings measured (or what went wrong)."""
    if report.outcome == "usage":
        return Text(clean(report.message), style="yellow")
    if report.outcome != "done":
        return Text(f"profile {report.outcome}: {clean(report.message)}", style="yellow")
    text = Text(clean(report.verdict) + "\n\n", style="bold")
    rows = [list(HEADER), *table_rows(report.cells, report.usd_per_hr)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    for row in rows:
        text.append("  ".join(clean(c).ljust(w) for c, w in zip(row, widths, strict=True))
                    + "\n")
    if report.usd_per_hr is None:
        text.append("no $/1k images: this box has no running_usd_per_hr and never ran on "
                    "record\n", style="dim")
    if report.beside:
        text.append(clean(report.beside) + "\n", style="dim")
    return text


class ProfileScreen(Screen[None]):
    """`libreyolo profile run` for one box (a run's settings, when opened from one)."""

    DEFAULT_CSS = """
    ProfileScreen #title { height: 1; text-style: bold; }
    ProfileScreen #options { margin: 1 0; }
    ProfileScreen #report { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, box: str, run: str | None, profile: Profile) -> None:
        super().__init__()
        self.box = box
        self.run = run
        self.profile = profile
        self.report: ProfileReport | None = None

    def compose(self) -> ComposeResult:
        what = f"{clean(self.box)}/{clean(self.run)}" if self.run else clean(self.box)
        yield Static(Text(f"libreyolo profile run on {what}"), id="title")
        hint = ("options, e.g. --try workers=1,8,12 batch=16,64 (enter runs it)" if self.run
                else "--data YAML --weights PT on the box [--try workers=1,8,12] "
                     "(enter runs it)")
        yield Input(placeholder=hint, id="options")
        with VerticalScroll(id="report"):
            yield Static(Text("A few training steps per setting: what limits the step, and "
                              "what a change is worth per 1k images.", style="dim"), id="body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#options", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        body = self.query_one("#body", Static)
        try:
            request = parse_options(event.value, self.run)
        except ProfileError as exc:
            body.update(Text(str(exc), style="yellow"))
            return
        body.update(Text(f"profiling on {clean(self.box)} (a minute or so per setting)…",
                         style="cyan"))
        self.run_worker(self._run(request), group="profile", exclusive=True,
                        exit_on_error=False)

    def _say(self, line: str) -> None:
        self.query_one("#body", Static).update(Text(clean(line), style="cyan"))

    async def _run(self, request: ProfileRequest) -> None:
        body = self.query_one("#body", Static)
        try:
            report = await self.profile(request, self._say)
        except BoxBusy as busy:
            body.update(Text(f"{busy} on {clean(self.box)} is still running: profile once "
                             "it ends", style="yellow"))
            return
        except Exception as exc:  # a bug, never the box's trouble: say it, keep the screen
            body.update(Text(f"the profile crashed: {type(exc).__name__}: {clean(str(exc))}",
                             style="red"))
            return
        self.report = report
        body.update(report_text(report))
