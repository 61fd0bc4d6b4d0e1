"""The stage screen: a data set folder packed into one tar and uploaded to the Hub, from
the panel (ctrl+p).

Type the folder (on this machine) and the dataset repo (ORG/NAME); enter runs
the same stage as `gpurent-tui stage` (tui/actions/stage.py: a deterministic
tar, a private repo unless it exists public, the Hub's sha256 compared with
the packed tar's) in a worker thread, with its packing and upload progress
here, then the outcome. Links that lead out of the folder are refused and listed, as by
the command, unless "follow links out of the folder" is ticked (--follow-outside). The
token and endpoint come from this machine's environment (HF_TOKEN, HF_ENDPOINT), as for
the command.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Checkbox, Footer, Input, Label, Static

from tui.actions.stage import StageError, stage
from tui.model.sizing import human_bytes
from tui.model.staging import StageReport, repo_problem
from widgets.fleet_text import clean


class StageScreen(Screen[None]):
    """`stage`: folder and repo fields, progress, then the outcome."""

    DEFAULT_CSS = """
    StageScreen #title { height: 1; text-style: bold; }
    StageScreen Horizontal { height: 3; }
    StageScreen Label { width: 14; padding: 1 1 0 0; }
    StageScreen Input { width: 1fr; }
    StageScreen #result { height: 1fr; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.report: StageReport | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("stage a data set: one tar in a private Hub dataset repo"),
                     id="title")
        with Horizontal():
            yield Label("folder")
            yield Input(placeholder="the data set's folder on this machine", id="folder")
        with Horizontal():
            yield Label("dataset repo")
            yield Input(placeholder="ORG/NAME on the Hub (enter stages)", id="repo")
        yield Checkbox("follow links out of the folder (packs what they point to)",
                       id="follow-outside")
        with VerticalScroll(id="result"):
            yield Static(Text("packed with sorted names and no owners or times (a re-stage "
                              "uploads nothing), verified by the Hub's sha256", style="dim"),
                         id="body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#folder", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        folder = self.query_one("#folder", Input).value.strip()
        repo = self.query_one("#repo", Input).value.strip()
        body = self.query_one("#body", Static)
        if not folder:
            self.query_one("#folder", Input).focus()
            body.update(Text("type the data set's folder first", style="red"))
            return
        if problem := repo_problem(repo):
            self.query_one("#repo", Input).focus()
            body.update(Text(problem, style="red"))
            return
        self.report, self.error = None, None
        body.update(Text(f"packing {clean(folder)}…", style="cyan"))
        follow = self.query_one("#follow-outside", Checkbox).value
        self.run_worker(self._run(Path(folder).expanduser(), repo, follow), group="stage",
                        exclusive=True, exit_on_error=False)

    def _show_progress(self, step: str, done: int, total: int) -> None:
        if self.report is not None or self.error is not None:
            return  # the outcome is shown: a late progress event never hides it
        share = f" ({100 * done // total}%)" if total else ""
        self.query_one("#body", Static).update(Text(
            f"{step}: {human_bytes(done)} of {human_bytes(total)}{share}", style="cyan"))

    async def _run(self, folder: Path, repo: str, follow_outside: bool) -> None:
        body = self.query_one("#body", Static)
        loop = asyncio.get_running_loop()

        def progress(step: str, done: int, total: int) -> None:  # from the worker thread
            loop.call_soon_threadsafe(self._show_progress, step, done, total)

        try:
            report = await asyncio.to_thread(stage, folder, repo, progress=progress,
                                             follow_outside=follow_outside)
        except StageError as exc:
            self.error = str(exc)
            body.update(Text(clean(str(exc)), style="red"))
            return
        except Exception as exc:  # a bug: say it, keep the screen
            self.error = f"{type(exc).__name__}: {exc}"
            body.update(Text(f"the stage crashed: {type(exc).__name__}: {clean(str(exc))}",
                             style="red"))
            return
        self.report = report
        text = Text(clean(report.message), style="green" if report.verified else "red")
        text.append(f"\n{report.name}: {report.size} bytes, sha256 {report.sha256}",
                    style="dim")
        body.update(text)
