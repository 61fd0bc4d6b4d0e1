"""Confirmations for what costs money or cannot be undone: stop, start, destroy.

Each says what will happen to the bill and to the weights before it asks.
Destroy with unpushed checkpoints offers "push, verify, then destroy", or an
override that needs the box's name typed out; when nothing but epoch snapshots
that were never pushed is refused, also "destroy without them" (the name typed
to confirm, as for any destroy). However long the list of what
is lost, the dialog fits the screen: the list scrolls, and the keys and the
name field stay in view below it (typing blind is how boxes get destroyed).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tui.model.guard import Unpushed, snapshot_words


class ConfirmScreen(ModalScreen[bool]):
    """y confirms, n or escape cancels; the body says what the action costs."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 76; max-width: 100%; height: auto; max-height: 100%;
                               border: thick $warning; background: $surface; padding: 0 2; }
    ConfirmScreen #body { height: auto; max-height: 60vh; }
    ConfirmScreen #keys { margin-top: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm_no"),
    ]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            with VerticalScroll(id="body"):
                yield Static(Text(self.body))
            yield Static(Text("y: go ahead    n / escape: cancel"), id="keys")

    def on_mount(self) -> None:
        # The panel focuses nothing by itself: the body takes the arrows and page keys
        # (y, n and escape are the screen's), so a body taller than the room scrolls.
        self.query_one("#body", VerticalScroll).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class DestroyScreen(ModalScreen[str | None]):
    """Answers "destroy", "push-then-destroy", "destroy-without-snapshots" or None
    (cancelled)."""

    DEFAULT_CSS = """
    DestroyScreen { align: center middle; }
    DestroyScreen > Vertical { width: 80; max-width: 100%; height: auto; max-height: 100%;
                               border: thick $error; background: $surface; padding: 0 2; }
    DestroyScreen #body { height: auto; max-height: 40vh; }
    DestroyScreen #keys { margin-top: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="destroy_cancel"),
        Binding("p", "push_first", "Push, verify, then destroy", id="destroy_push_first"),
        Binding("t", "type_name", "Type the name to override", id="destroy_override"),
        Binding("w", "without_snapshots", "Destroy without the epoch snapshots",
                id="destroy_without_snapshots"),
    ]

    def __init__(self, box: str, losses: list[str], unpushed: list[Unpushed]) -> None:
        super().__init__()
        self.box = box
        self.losses = losses
        self.unpushed = unpushed
        # Nothing refused but never-pushed epoch snapshots: they may be given up alone.
        self.only_snapshots = bool(unpushed) and all(u.snapshots for u in unpushed)
        self.answer = "destroy"  # what the typed name answers; w makes it the snapshots'

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Destroy {self.box}? Nothing on it survives; billing stops.",
                              style="bold"))
            with VerticalScroll(id="body"):
                lost = "\n".join(f"  - {line}" for line in self.losses) or "  (no runs seen)"
                yield Static(Text(f"Lost with it:\n{lost}"))
                if self.unpushed:
                    files = "\n".join(f"  ! {u.run}: {', '.join(u.files)} ({u.reason})"
                                      for u in self.unpushed)
                    yield Static(Text(f"REFUSED: {self._refused_head()}:\n{files}",
                                      style="bold red"))
            if self.only_snapshots:
                yield Static(Text("p: push them too (push --epochs, verify, then destroy)\n"
                                  f"w: destroy without them (then type {self.box!r} and "
                                  "press enter)\n"
                                  f"t: type {self.box!r} and press enter to destroy anyway\n"
                                  "escape: cancel"), id="keys")
            elif self.unpushed:
                yield Static(Text("p: push, verify, then destroy (one action)\n"
                                  f"t: type {self.box!r} and press enter to destroy anyway\n"
                                  "escape: cancel"), id="keys")
            else:
                yield Static(Text(f"type {self.box!r} and press enter to destroy; "
                                  "escape: cancel"), id="keys")
            yield Input(placeholder=f"type {self.box} to confirm", id="typed")

    def _refused_head(self) -> str:
        if self.only_snapshots:
            return (f"{snapshot_words(self.unpushed)}; best.pt, last.pt and the history are "
                    "verified")
        return "checkpoints not pushed as they are now, or places the panel cannot see"

    def on_mount(self) -> None:
        typed = self.query_one("#typed", Input)
        if self.unpushed:
            typed.display = False  # the override is a deliberate second step: t
            # The refusal's reasons sit below the list of what is lost: at 80x24 only
            # a scroll shows them, and the arrows and page keys reach the focused body.
            self.query_one("#body", VerticalScroll).focus()
        else:
            typed.focus()

    def action_push_first(self) -> None:
        if self.unpushed:
            self.dismiss("push-then-destroy")

    def action_type_name(self) -> None:
        self.answer = "destroy"
        self._show_name_field(f"type {self.box} to confirm")

    def action_without_snapshots(self) -> None:
        if self.only_snapshots:
            self.answer = "destroy-without-snapshots"
            self._show_name_field(f"type {self.box} to destroy it without the snapshots")
        elif self.unpushed:
            self.notify("w gives up only epoch snapshots that were never pushed; more is "
                        "refused here (p pushes it, t overrides)", severity="warning")

    def _show_name_field(self, placeholder: str) -> None:
        typed = self.query_one("#typed", Input)
        typed.placeholder = placeholder
        typed.display = True
        typed.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip() == self.box:
            self.dismiss(self.answer)
        else:
            event.input.value = ""
            self.notify(f"type the box name exactly ({self.box}) to destroy it",
                        severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)
