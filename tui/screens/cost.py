"""The cost screen (key `c`): every box's money in one table, the fleet's spend over time."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from tui.model.cost import Event, percent_words, spend_series, usd
from tui.model.meter import FleetCost


def cost_table(cost: FleetCost) -> Table:
    table = Table(expand=True, box=None, padding=(0, 1), header_style="bold")
    for column in ("box", "state", "$/hr now", "from", "spent", "today", "stopped $/hr",
                   "saving", "break-even", "budget"):
        table.add_column(column, justify="left" if column in ("box", "state", "from") else "right",
                         no_wrap=True)
    for name, box in cost.boxes.items():
        rates = box.rates
        rate = box.rate_now
        hours = rates.break_even_hours
        even = "-" if hours is None else ("never" if math.isinf(hours) else f"{hours:.1f} h")
        budget = "-"
        if box.budget_usd is not None:
            budget = f"{100 * box.accrued_usd / box.budget_usd:.0f}% of {usd(box.budget_usd)}"
        table.add_row(
            Text(name), rates.state,
            usd(rate.usd_per_hr) if rate else "?", rate.source if rate else "-",
            usd(box.accrued_usd), usd(box.today_usd),
            usd(rates.stopped.usd_per_hr) if rates.stopped else ("n/a" if not rates.can_stop
                                                                 else "?"),
            percent_words(rates.saving_pct) if rates.saving_pct is not None else "-",
            even, budget,
            style="bold red" if box.idle_alarm or box.budget_level == "alarm" else None)
    table.add_row("fleet", "", usd(cost.usd_per_hr), "", usd(cost.accrued_usd),
                  usd(cost.today_usd), "", "", "",
                  "-" if cost.budget_usd is None else
                  f"{100 * cost.accrued_usd / cost.budget_usd:.0f}% of {usd(cost.budget_usd)}",
                  style="bold", end_section=True)
    return table


def notes(cost: FleetCost) -> str:
    lines = [f"projected to finish every running run: {usd(cost.to_finish_usd)}"]
    for name, box in cost.boxes.items():
        verdict = box.rates.verdict()
        if verdict:
            lines.append(f"{name}: {verdict}")
        stopped = box.rates.stopped
        if stopped is not None:
            lines.append(f"{name}: stopped rate {stopped.note or stopped.source}; "
                         f"{box.rates.hours_per_month_source}")
    for name in cost.doubts:
        lines.append(f"{name}: {cost.boxes[name].doubt}")
    if cost.unpriced:
        lines.append("no rate known for " + ", ".join(cost.unpriced)
                     + ": set [box.pricing] running_usd_per_hr")
    return "\n".join(lines)


class CostScreen(Screen[None]):
    """The whole money picture; escape goes back."""

    DEFAULT_CSS = """
    CostScreen #table { height: auto; }
    CostScreen #notes { height: auto; color: $text-muted; margin: 1 0; }
    CostScreen PlotextPlot { height: 1fr; min-height: 8; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    def __init__(self, cost: FleetCost, events: Sequence[Event],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.cost = cost
        self.events = list(events)
        self._clock = clock

    def compose(self) -> ComposeResult:
        yield Static(id="table")
        yield Static(id="notes")
        yield PlotextPlot()
        yield Footer()

    def on_mount(self) -> None:
        self.show(self.cost, self.events)

    def show(self, cost: FleetCost, events: Sequence[Event]) -> None:
        self.cost = cost
        self.events = list(events)
        self.query_one("#table", Static).update(cost_table(cost))
        self.query_one("#notes", Static).update(Text(notes(cost)))
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        now = self._clock()
        series = spend_series(self.events, now)
        if series:
            hours = [(t - now) / 3600 for t, _ in series]
            plt.plot(hours, [v for _, v in series], marker="braille", label="fleet spend $")
            plt.xlabel("hours before now")
        plt.title("fleet spend over time (from the ledger)")
        plot.refresh()
