"""The launch form (`L`): a run to start detached on a box, prefilled from its last launch.

Either a script of yours (then the model/data/... fields are not used, and
"more arguments" go to the script) or `libreyolo train` with the fields below.
Enter or ctrl+s launches once every field reads right; what is wrong is
said under the fields, and nothing is sent. Switching the box refills the
form from that box's last launch. It fits 80x24.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Label, Select, Static

from tui.model.launch import LaunchForm, LaunchRequest, form_problems

LABELS = {
    "script": "script", "model": "model", "data": "data", "epochs": "epochs",
    "batch": "batch", "imgsz": "imgsz", "device": "device", "save_period": "save period",
    "extra": "more args", "name": "run name", "project": "project",
}
HINTS = {
    "script": "a .py of yours to upload and run instead of libreyolo train",
    "data": "the data set's YAML on the box",
    "batch": "-1: the largest that fits",
    "extra": "more train arguments (or the script's), as in a shell",
    "name": "empty: run-<UTC time>",
    "project": "empty: the box's first runs root",
}
FLAGS = {"resume": "resume its run dir", "force": "despite a failed check",
         "no_doctor": "skip the doctor"}


def flag_label(words: str, ticked: bool) -> Text:
    """`[x] resume its run dir`: ticked or not in words, not only in colour."""
    return Text(f"[{'x' if ticked else ' '}] {words}")


class Flag(Checkbox, inherit_bindings=False):
    """A form checkbox: space ticks it; Enter is the form's (it launches, as the hint
    says), never a silent tick."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_button", "Toggle", show=False),
        Binding("enter", "screen.submit", "Launch", show=False),  # as Enter in a field does
    ]

    def __init__(self, words: str, *, id: str) -> None:
        super().__init__(flag_label(words, False), compact=True, id=id)
        self.words = words

    def watch_value(self) -> None:
        super().watch_value()  # the -on class and the Changed message
        self.label = flag_label(self.words, self.value)


class LaunchScreen(ModalScreen[LaunchRequest | None]):
    """Answers a LaunchRequest, or None when cancelled."""

    DEFAULT_CSS = """
    LaunchScreen { align: center middle; }
    LaunchScreen > Vertical { width: 80; max-width: 100%; height: auto; max-height: 100%;
                              border: thick $accent; background: $surface; padding: 0 1; }
    LaunchScreen Horizontal { height: 1; }
    LaunchScreen Label { width: 12; }
    LaunchScreen Input { width: 1fr; }
    LaunchScreen Select { width: 1fr; }
    LaunchScreen #flags Checkbox { width: auto; margin-right: 1; }
    LaunchScreen #problems { color: $error; height: auto; }
    LaunchScreen #keys { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Launch", id="launch_go"),
        Binding("escape", "cancel", "Cancel", id="launch_cancel"),
    ]

    def __init__(self, boxes: list[str], box: str, form_for: Callable[[str], LaunchForm]
                 ) -> None:
        super().__init__()
        self.boxes = boxes
        self.box = box
        self.form_for = form_for

    def compose(self) -> ComposeResult:
        form = self.form_for(self.box)
        with Vertical():
            with Horizontal():
                yield Label(Text("launch on", style="bold"))
                yield Select([(b, b) for b in self.boxes], value=self.box, allow_blank=False,
                             compact=True, id="box")
            for f in fields(LaunchForm):
                with Horizontal():
                    yield Label(LABELS[f.name])
                    # the cursor at the end, nothing selected: a first key must not
                    # replace a prefilled path
                    yield Input(getattr(form, f.name), placeholder=HINTS.get(f.name, ""),
                                compact=True, select_on_focus=False, id=f"f-{f.name}")
            with Horizontal(id="flags"):
                for key, words in FLAGS.items():
                    yield Flag(words, id=key)
            yield Static("", id="problems")
            yield Static(Text("enter / ctrl+s: launch    space: tick    tab: next    "
                              "escape: cancel"),
                         id="keys")

    def on_mount(self) -> None:
        self.query_one("#f-data" if not self.form_for(self.box).script else "#f-script",
                       Input).focus()

    def form(self) -> LaunchForm:
        return LaunchForm(**{f.name: self.query_one(f"#f-{f.name}", Input).value
                             for f in fields(LaunchForm)})

    def _fill(self, form: LaunchForm) -> None:
        for f in fields(LaunchForm):
            self.query_one(f"#f-{f.name}", Input).value = getattr(form, f.name)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "box" and isinstance(event.value, str) and event.value != self.box:
            self.box = event.value
            self._fill(self.form_for(self.box))
            self.query_one("#problems", Static).update("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def action_submit(self) -> None:
        form = self.form()
        problems = form_problems(form)
        if problems:
            self.query_one("#problems", Static).update(Text("\n".join(problems)))
            return
        self.dismiss(LaunchRequest(
            box=self.box, form=form, resume=self.query_one("#resume", Checkbox).value,
            force=self.query_one("#force", Checkbox).value,
            doctor=not self.query_one("#no_doctor", Checkbox).value))

    def action_cancel(self) -> None:
        self.dismiss(None)
