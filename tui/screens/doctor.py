"""The doctor screen: LibreYOLO's own dataset doctor, run on a box, its report shown here.

Type the data set's YAML path as the box sees it and press enter; the screen
runs `libreyolo doctor --json` on the box (with the box's interpreter) in its
own worker and shows errors and warnings. Escape goes back (and abandons a
doctor still running: its channel is closed).
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

from tui.model.preflight import DoctorReport
from tui.runtime.events import BoxBusy
from widgets.fleet_text import clean
from widgets.preflight_text import doctor_text

Doctor = Callable[[str], Awaitable[DoctorReport]]


class DoctorScreen(Screen[None]):
    """`libreyolo doctor` for one box: a path field, then the report."""

    DEFAULT_CSS = """
    DoctorScreen #title { height: 1; text-style: bold; }
    DoctorScreen #data { margin: 1 0; }
    DoctorScreen #report { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, box: str, doctor: Doctor, data: str = "") -> None:
        super().__init__()
        self.box = box
        self.doctor = doctor
        self.data = data
        self.report: DoctorReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"libreyolo doctor on {clean(self.box)}"), id="title")
        yield Input(value=self.data, placeholder="the data set's YAML on the box, e.g. "
                    "/workspace/data/shapes/data.yaml (enter runs the doctor)", id="data")
        with VerticalScroll(id="report"):
            yield Static(Text("LibreYOLO's own checks: layout, labels, class ids, corrupt "
                              "images, leakage between splits.", style="dim"), id="body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#data", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if not path:
            self.notify("type the data set's YAML path first", timeout=3)
            return
        self.data = path
        body = self.query_one("#body", Static)
        body.update(Text(f"running libreyolo doctor {clean(path)} on {clean(self.box)} "
                         "(minutes on a large data set)…", style="cyan"))
        self.run_worker(self._run(path), group="doctor", exclusive=True, exit_on_error=False)

    async def _run(self, path: str) -> None:
        body = self.query_one("#body", Static)
        try:
            report = await self.doctor(path)
        except BoxBusy as busy:  # one action per box: the doctor waits its turn
            body.update(Text(f"{busy} on {clean(self.box)} is still running: run the doctor "
                             "once it ends", style="yellow"))
            return
        except Exception as exc:  # a bug, never the box's trouble: say it, keep the screen
            body.update(Text(f"the doctor crashed: {type(exc).__name__}: {clean(str(exc))}",
                             style="red"))
            return
        self.report = report
        body.update(doctor_text(report))
