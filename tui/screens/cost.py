"""The cost screen (key `c`): every box's money in one table, the fleet's spend over time."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import ClassVar, cast

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from tui.model.busy import coverage_words
from tui.model.cost import Event, percent_words, spend_series, usd
from tui.model.meter import FleetCost
from tui.model.rightsize import Measured, right_size_text, verdicts
from tui.model.serverless_doc import APPS_HEAD

COLUMNS = ("box", "state", "$/hr now", "from", "spent", "today", "stopped $/hr", "saving",
           "break-even", "budget")
LEFT = ("box", "state", "from")
# Too narrow for one table (80 columns): what a box costs now, then stop-or-destroy,
# each whole, rather than every money column cut to `$0.0…`.
SPLIT = (("box", "state", "$/hr now", "from", "spent", "today"),
         ("box", "stopped $/hr", "saving", "break-even", "budget"))


def cost_rows(cost: FleetCost) -> list[tuple[dict[str, str], str | None]]:
    """Each box's cells by column, then the fleet's; with the row's style."""
    rows: list[tuple[dict[str, str], str | None]] = []
    for name, box in cost.boxes.items():
        rates = box.rates
        rate = box.rate_now
        hours = rates.break_even_hours
        even = "-" if hours is None else ("never" if math.isinf(hours) else f"{hours:.1f} h")
        budget = "-"
        if box.budget_usd is not None:
            budget = f"{100 * box.accrued_usd / box.budget_usd:.0f}% of {usd(box.budget_usd)}"
        stopped = usd(rates.stopped.usd_per_hr) if rates.stopped else \
            ("n/a" if not rates.can_stop else "?")
        cells = dict(zip(COLUMNS, (
            name, rates.state, usd(rate.usd_per_hr) if rate else "?",
            rate.source if rate else "-", usd(box.accrued_usd), usd(box.today_usd), stopped,
            percent_words(rates.saving_pct) if rates.saving_pct is not None else "-", even,
            budget), strict=True))
        alarm = box.idle_alarm or box.budget_level == "alarm"
        rows.append((cells, "bold red" if alarm else None))
    fleet_budget = "-" if cost.budget_usd is None else \
        f"{100 * cost.accrued_usd / cost.budget_usd:.0f}% of {usd(cost.budget_usd)}"
    rows.append((dict(zip(COLUMNS, ("fleet", "", usd(cost.usd_per_hr), "", usd(cost.accrued_usd),
                                   usd(cost.today_usd), "", "", "", fleet_budget), strict=True)),
                 "bold"))
    return rows


def _table(columns: tuple[str, ...], rows: list[tuple[dict[str, str], str | None]]) -> Table:
    table = Table(expand=True, box=None, padding=(0, 1), header_style="bold")
    for column in columns:
        # Every cell as wide as its widest value: a number is never cut.
        wide = max(len(column), *(len(cells[column]) for cells, _ in rows))
        table.add_column(column, justify="left" if column in LEFT else "right",
                         no_wrap=True, min_width=wide)
    for cells, style in rows:
        table.add_row(*(Text(cells[c]) for c in columns), style=style)
    return table


def natural_width(columns: tuple[str, ...],
                  rows: list[tuple[dict[str, str], str | None]]) -> int:
    """The width a table of these columns needs to show every cell whole."""
    return sum(max(len(c), *(len(cells[c]) for cells, _ in rows)) + 2 for c in columns)


def cost_table(cost: FleetCost, width: int = 200) -> RenderableType:
    """Every box's money in one table when `width` allows, else in two, never cut."""
    rows = cost_rows(cost)
    if natural_width(COLUMNS, rows) <= width:
        return _table(COLUMNS, rows)
    first, second = (_table(columns, rows) for columns in SPLIT)
    return Group(first, Text(), second)


def time_axis(times: Sequence[float], now: float) -> tuple[list[float], str]:
    """Times as negative offsets from now, in the unit that suits the span (not -0.0066 h)."""
    span = now - min(times, default=now)
    unit, size = next(((unit, size) for below, unit, size in _UNITS if span < below),
                      ("days", 86400.0))
    return [(t - now) / size for t in times], f"{unit} before now"


# Below this span, this unit: a span under two hours reads in minutes.
_UNITS = ((120.0, "seconds", 1.0), (7200.0, "minutes", 60.0), (2 * 86400.0, "hours", 3600.0))


def notes(cost: FleetCost) -> str:
    lines = [f"projected to finish every running run: {usd(cost.to_finish_usd)}"]
    for name, box in cost.boxes.items():
        verdict = box.rates.verdict()
        if verdict:
            lines.append(f"{name}: {verdict}")
        if box.gpu_busy_pct is not None:
            idle = f": {usd(box.gpu_idle_usd)} of its GPU time went unused" \
                if box.gpu_idle_usd is not None else ""
            over = coverage_words(box.gpu_busy_covered_s, box.gpu_busy_billed_s)
            lines.append(f"{name}: GPUs {box.gpu_busy_pct:.0f}% busy {over}{idle} "
                         "(`gpurent-tui profile` says why)")
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
    """The whole money picture; escape goes back.

    `cost` is reactive: each new picture assigned to it is drawn, with the ledger's events
    read from `events` then. The screen follows the app's `cost` where the app has one."""

    DEFAULT_CSS = """
    CostScreen #page { height: 1fr; }
    CostScreen #table { height: auto; }
    CostScreen #notes { height: auto; color: $text-muted; margin: 1 0; }
    CostScreen PlotextPlot { height: 1fr; min-height: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
    ]

    cost: var[FleetCost] = var(cast(FleetCost, None), always_update=True, init=False)

    def __init__(self, cost: FleetCost, events: Callable[[], Sequence[Event]],
                 clock: Callable[[], float] = time.time,
                 right_size: Callable[[], list[Measured]] | None = None,
                 apps: Callable[[], list[str]] | None = None) -> None:
        """`apps`: the serverless apps' estimate lines (their own section: no ledger)."""
        super().__init__()
        self._right_size = right_size
        self._apps = apps
        self.set_reactive(CostScreen.cost, cost)  # drawn on mount
        self._events = events
        self._clock = clock

    def compose(self) -> ComposeResult:
        # One scrolling page: at 80x24 the tables and notes leave the chart too little room.
        with VerticalScroll(id="page"):
            yield Static(id="table")
            yield Static(id="notes")
            yield PlotextPlot()
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#page", VerticalScroll).focus()
        self.watch_cost(self.cost)
        self.watch(self.app, "cost", self._cost_changed, init=False)

    def _cost_changed(self, cost: FleetCost | None) -> None:
        if cost is not None:
            self.cost = cost

    def on_resize(self) -> None:
        self.query_one("#table", Static).update(cost_table(self.cost, self._table_width()))

    def _table_width(self) -> int:
        return self.query_one("#page", VerticalScroll).scrollable_content_region.width \
            or self.size.width

    def watch_cost(self, cost: FleetCost) -> None:
        self.query_one("#table", Static).update(cost_table(cost, self._table_width()))
        words = notes(cost)
        if self._right_size is not None:
            words += "\n\n" + right_size_text(verdicts(self._right_size()))
        apps = self._apps() if self._apps is not None else []
        if apps:
            words += "\n\n" + "\n".join([APPS_HEAD, *apps])
        self.query_one("#notes", Static).update(Text(words))
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        now = self._clock()
        series = spend_series(self._events(), now)
        if series:
            offsets, label = time_axis([t for t, _ in series], now)
            plt.plot(offsets, [v for _, v in series], marker="braille", label="fleet spend $")
            plt.xlabel(label)
        plt.title("fleet spend over time (from the ledger)")
        plot.refresh()
