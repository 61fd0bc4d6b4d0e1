"""The size form: the disk to rent for a training job, from the panel (ctrl+p).

The same arithmetic as `gpurent-tui size` (tui/model/sizing.py: data +
checkpoints + logs + 30% headroom, at least the fetch's peak), over four
fields: the staged data in GB, the model (or one checkpoint's MB), the epochs
and the save period (LibreYOLO's 10 unless changed). Opened for a box, the
stopped disk is priced at that box's rate, as `size --box` does. Enter in any
field sizes; nothing leaves this machine.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static

from tui.model.config import Pricing
from tui.model.sizing import (
    CHECKPOINT_BYTES,
    DEFAULT_SAVE_PERIOD,
    GB,
    DiskPlan,
    disk_rate,
    model_checkpoint,
    plan_disk,
)
from widgets.fleet_text import clean

FIELDS = (("data", "data GB", "the staged tar's size in GB, e.g. 12.5"),
          ("model", "model", "yolox-s, yolo9-c, ... or one checkpoint's MB"),
          ("epochs", "epochs", "e.g. 100"),
          ("save_period", "save period", "epochs between epoch_<N>.pt; 0: none"))


def read_form(values: dict[str, str]) -> DiskPlan | str:
    """The plan the fields ask for, or what is wrong with them (in words)."""
    try:
        data_gb = float(values["data"])
    except ValueError:
        return "data: a number of GB, e.g. 12.5"
    if not data_gb >= 0 or data_gb == float("inf"):
        return "data: a number of GB, e.g. 12.5"
    model = values["model"].strip()
    checkpoint = model_checkpoint(model) if model else None
    if checkpoint is None:
        try:
            megabytes = float(model)
        except ValueError:
            return (f"model: one of {', '.join(CHECKPOINT_BYTES)}, or one checkpoint's MB")
        if not 0 < megabytes < 10**6:
            return "model: one checkpoint's MB is a positive number"
        checkpoint = int(megabytes * 1e6)
    try:
        epochs = int(values["epochs"])
        period = int(values["save_period"] or DEFAULT_SAVE_PERIOD)
    except ValueError:
        return "epochs and save period are whole numbers"
    if epochs < 1 or period < 0:
        return "epochs: 1 or more; save period: 0 (none) or more"
    return plan_disk(int(data_gb * GB), checkpoint, epochs, period)


class SizeScreen(Screen[None]):
    """The disk for one training job, priced stopped at a box's rate when opened for one."""

    DEFAULT_CSS = """
    SizeScreen #title { height: 1; text-style: bold; }
    SizeScreen Horizontal { height: 3; }
    SizeScreen Label { width: 14; padding: 1 1 0 0; }
    SizeScreen Input { width: 1fr; }
    SizeScreen #plan { height: 1fr; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, box: str | None = None, provider: str | None = None,
                 pricing: Pricing | None = None) -> None:
        super().__init__()
        self.box = box
        self.provider = provider
        self.pricing = pricing
        self.plan: DiskPlan | None = None

    def compose(self) -> ComposeResult:
        where = f" (priced at box {clean(self.box)}'s rate)" if self.box else ""
        yield Static(Text(f"size a disk: data + checkpoints + 30% headroom{where}"),
                      id="title")
        for key, label, hint in FIELDS:
            with Horizontal():
                yield Label(label)
                yield Input(value=str(DEFAULT_SAVE_PERIOD) if key == "save_period" else "",
                            placeholder=hint, id=key)
        with VerticalScroll(id="plan"):
            yield Static(Text("enter in any field sizes the disk", style="dim"), id="body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#data", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        values = {key: self.query_one(f"#{key}", Input).value.strip() for key, _, _ in FIELDS}
        body = self.query_one("#body", Static)
        plan = read_form(values)
        if isinstance(plan, str):
            self.plan = None
            body.update(Text(plan, style="red"))
            return
        self.plan = plan
        rate, hours, source = disk_rate(self.provider, self.pricing, box=self.box)
        lines = plan.lines(rate, hours, source)
        if rate is None:  # the command's hint names its flags; here the box's config decides
            lines[-1] = ("stopped, the disk costs  (no storage rate known: set "
                         "storage_usd_per_gb_month in the box's [box.pricing])")
        text = Text("\n".join(lines))
        text.append(f"\n\nallocate {plan.allocate_gb} GB", style="bold green")
        body.update(text)
