"""The fetch screen: a staged data set onto a box, from the panel (ctrl+p).

Type the Hub dataset repo (ORG/NAME) and, if not the default, where to unpack
on the box; enter runs the same fetch as `gpurent-tui fetch` (the Hub asked
here, the download, sha256 check and safe unpacking on the box with its own
huggingface_hub, the token on the channel's stdin) over the panel's session to
the box, in its own worker. The download's and the unpacking's progress show
here, then the outcome; the journal records it. Escape goes back (and abandons
a fetch still running: its channel is closed). The first fetch that would send a
Hub token to the box asks first, as a push does (nothing is sent until yes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static

from tui.actions.stage import StageError, TokenConsent
from tui.model.sizing import human_bytes
from tui.model.staging import FetchReport, repo_problem
from tui.runtime.events import BoxBusy
from widgets.fleet_text import clean

Progress = Callable[[str, int, int], None]
Fetch = Callable[[str, str, Progress, bool], Awaitable[FetchReport]]  # bool: said yes


class FetchScreen(Screen[None]):
    """`fetch` for one box: repo and destination fields, progress, then the outcome."""

    DEFAULT_CSS = """
    FetchScreen #title { height: 1; text-style: bold; }
    FetchScreen Horizontal { height: 3; }
    FetchScreen Label { width: 14; padding: 1 1 0 0; }
    FetchScreen Input { width: 1fr; }
    FetchScreen #result { height: 1fr; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, box: str, fetch: Fetch, dest: str) -> None:
        super().__init__()
        self.box = box
        self.fetch = fetch
        self.dest = dest
        self.report: FetchReport | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"fetch a staged data set onto {clean(self.box)}"), id="title")
        with Horizontal():
            yield Label("dataset repo")
            yield Input(placeholder="ORG/NAME on the Hub (enter fetches)", id="repo")
        with Horizontal():
            yield Label("unpack into")
            yield Input(value=self.dest, placeholder="a folder on the box", id="dest")
        with VerticalScroll(id="result"):
            yield Static(Text("the box downloads the tar with its own huggingface_hub, "
                              "checks its sha256 against the Hub's and unpacks it safely",
                              style="dim"), id="body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#repo", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        repo = self.query_one("#repo", Input).value.strip()
        dest = self.query_one("#dest", Input).value.strip() or self.dest
        body = self.query_one("#body", Static)
        if problem := repo_problem(repo):
            body.update(Text(problem, style="red"))
            return
        self.report, self.error = None, None
        body.update(Text(f"asking the Hub about {clean(repo)}…", style="cyan"))
        self.run_worker(self._run(repo, dest), group="fetch", exclusive=True,
                        exit_on_error=False)

    def _confirmed(self, repo: str, dest: str, yes: bool | None) -> None:
        body = self.query_one("#body", Static)
        if not yes:
            self.error = "not fetched: the token stays on this machine"
            body.update(Text(self.error, style="yellow"))
            return
        body.update(Text(f"fetching {clean(repo)}…", style="cyan"))
        self.run_worker(self._run(repo, dest, True), group="fetch", exclusive=True,
                        exit_on_error=False)

    def _progress(self, step: str, done: int, total: int) -> None:
        share = f" ({100 * done // total}%)" if total else ""
        self.query_one("#body", Static).update(Text(
            f"{step}: {human_bytes(done)} of {human_bytes(total)}{share}", style="cyan"))

    async def _run(self, repo: str, dest: str, confirmed: bool = False) -> None:
        body = self.query_one("#body", Static)
        try:
            report = await self.fetch(repo, dest, self._progress, confirmed)
        except TokenConsent as asked:  # the first token to this box: nothing sent yet
            from tui.screens.confirm import ConfirmScreen

            body.update(Text("waiting for your answer: send the Hub token?", style="yellow"))
            self.app.push_screen(ConfirmScreen(f"Send your Hub token to {self.box}?",
                                               asked.notice),
                                 lambda yes: self._confirmed(repo, dest, yes))
            return
        except BoxBusy as busy:  # one action per box: the fetch waits its turn
            self.error = f"{busy} on {self.box} is still running"
            body.update(Text(f"{clean(self.error)}: fetch once it ends", style="yellow"))
            return
        except StageError as exc:  # the Hub's answer, in words (never the token)
            self.error = str(exc)
            body.update(Text(clean(str(exc)), style="red"))
            return
        except Exception as exc:  # a bug, never the box's trouble: say it, keep the screen
            self.error = f"{type(exc).__name__}: {exc}"
            body.update(Text(f"the fetch crashed: {type(exc).__name__}: {clean(str(exc))}",
                             style="red"))
            return
        self.report = report
        text = Text(clean(report.message), style="green" if report.verified else "red")
        for line in report.refused:
            text.append(f"\n  refused: {clean(line)}", style="red")
        body.update(text)
