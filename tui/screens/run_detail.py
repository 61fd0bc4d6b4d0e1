"""One run up close: loss and validation metric per epoch, the train.log tail, weights, status."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import ClassVar, cast

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Log, Static
from textual_plotext import PlotextPlot

from tui.messages import ProfileRequested
from tui.model.box import BoxState
from tui.model.guard import PushRecord
from tui.model.meter import BoxCost
from tui.model.runs import Health, RunState, format_age, short_metric_name
from tui.model.sizing import human_bytes
from tui.model.throughput import UnitCost, unit_usd
from tui.model.unpushed import AtStake, at_stake, box_timeline, rate_share
from widgets import badge

SERIES = ("both", "loss", "metric")
CHART_LIMIT = 1e100
_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d) \| (\w+)\s*\| ")


def compact_log_line(line: str) -> str:
    """LibreYOLO's `2026-12-02 10:05:11 | INFO     | msg` reads as `10:05:11 INFO msg`."""
    return _LOG_PREFIX.sub(lambda m: f"{m.group(1)} {m.group(2)} ", line, count=1)


_DIGITS = re.compile(r"([0-9]+)")
_FIRST = ("last.pt", "best.pt")
LABEL_CELLS = 24  # the fields' first column: labels and checkpoint names


def weight_order(name: str) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    """Sort key: last.pt, best.pt, then natural order (epoch_2 before epoch_10). A run of
    digits orders by its length, then its text, never by int(): a box's file name may
    hold 5000 digits, past int()'s limit."""
    rank = _FIRST.index(name) if name in _FIRST else len(_FIRST)
    parts = tuple((0, len(p.lstrip("0")), p.lstrip("0")) if p.isascii() and p.isdigit()
                  else (1, 0, p) for p in _DIGITS.split(name) if p)
    return rank, parts


def fields_table(run: RunState, stake: AtStake | None = None,
                 unit: UnitCost | None = None) -> Table:
    """The run's status fields and weights, as a two-column table; `stake`: what a crash
    would cost now (epochs since the last verified push, in GPU money)."""
    table = Table.grid(padding=(0, 1))
    # A box's checkpoint name (254 bytes, or 5000 digits in an answer) is cut here: at
    # its full width it took the whole panel and left every value unseen.
    table.add_column(style="bold", no_wrap=True, max_width=LABEL_CELLS, overflow="ellipsis")
    table.add_column()
    status = run.status or {}

    def row(label: str, value: object) -> None:
        # Text, not str: a str cell is parsed as Rich markup, and a run named
        # "[/]" (or a status field holding one) would crash the screen.
        if value is not None and value != "":
            table.add_row(label, Text(str(value)))

    row("state", run.state)
    row("epoch", f"{run.current_epoch}/{run.total_epochs}")
    if run.eta_seconds is not None:
        row("ETA", format_age(run.eta_seconds))
        row("ETA from", run.pace.method)
    if run.mean_epoch_seconds is not None:
        recent = run.epoch_seconds
        row("epoch time", f"{run.mean_epoch_seconds:.2f} s (mean)" if recent is None
            or abs(recent - run.mean_epoch_seconds) < 0.005
            else f"{recent:.2f} s recent, {run.mean_epoch_seconds:.2f} s mean")
    if run.train_loss is not None:
        row("train loss", f"{run.train_loss:.4f}")
    if run.best_metric is not None:
        row("best", f"{run.best_metric_name} {run.best_metric:.4f} @ epoch {run.best_epoch}")
    row("model", " ".join(str(status.get(k) or "") for k in ("model_family", "model_size",
                                                              "task")).strip())
    row("started", status.get("started_at"))
    row("updated", run.updated_at)
    if run.pid is not None:
        if run.state == "running":  # whether it lives is the point (dead, stalled)
            alive = {True: "alive", False: "gone", None: "unknown"}[run.pid_alive]
            row("pid", f"{run.pid} ({alive})")
        else:  # the run ended: its pid is history, and may belong to anything now
            row("pid", f"{run.pid} (while it ran)")
    row("path", run.shown_path)
    for label, value in unit_rows(run, unit):
        row(label, value)
    if stake is not None:
        row("unpushed", stake.words().removeprefix("unpushed: "))
    if run.restarts:
        row("restarts", run.restarts)
    for problem in run.problems:
        row("problem", problem)
    if run.weights:
        table.add_row("", "")
        table.add_row(Text("weights", style="bold underline"), "")
        for weight in sorted(run.weights, key=lambda w: weight_order(w.name)):
            age = ""
            if run.box_time is not None:
                age = f"{format_age(run.box_time - weight.mtime)} ago"
            table.add_row(Text(weight.name), f"{human_bytes(weight.size):>9}  {age}")
    return table


def unit_rows(run: RunState, unit: UnitCost | None) -> list[tuple[str, str]]:
    """The run's throughput and unit costs, each on its own short row (80x24 keeps them
    whole), and why a figure is missing."""
    rows = []
    data = run.dataset
    if data is not None:
        what = f"{data.images} train images" if data.images is not None else "unknown"
        size = f", {data.imgsz} px" if data.imgsz else ""
        rows.append(("images", what + size + (f", batch {data.batch}" if data.batch else "")))
    if unit is None:
        return rows
    if unit.images_per_second is not None:
        rows.append(("img/s", f"{unit.images_per_second:.1f} (over {unit.epochs} epochs)"))
    if unit.usd_per_epoch is not None:
        rows.append(("$/epoch", f"{unit_usd(unit.usd_per_epoch)} (billed)"))
    if unit.usd_per_1k_images is not None:
        rows.append(("$/1k img", unit_usd(unit.usd_per_1k_images)))
    if unit.note:
        rows.append(("unit cost", unit.note))
    return rows


def run_stake(run: RunState, box: BoxState | None, pushes: Mapping[str, PushRecord],
              cost: BoxCost | None) -> AtStake | None:
    """What a crash would cost now: from the box's last verified pushes and its share of
    the box's running rate (no money without a cost picture)."""
    running = sum(r.health is Health.RUNNING for r in box.runs) if box else 1
    return at_stake(run, pushes.get(run.path), rate_share(run, cost, running),
                    box_timeline(box, cost))


class RunDetail(Screen[None]):
    """Enter on a run opens this; escape goes back to the fleet.

    `run` is reactive: each newer snapshot of the run assigned to it is drawn. The screen
    follows the app's `box_state` where the app has one (the panel publishes every box's
    snapshot there); `stake` says what a crash would cost (the panel's pushes and money)."""

    DEFAULT_CSS = """
    RunDetail #title { height: auto; background: $panel; }
    RunDetail PlotextPlot { height: 1fr; min-height: 8; }
    RunDetail #lower { height: 1fr; }
    RunDetail #fields { width: 44; height: 1fr; }
    RunDetail Log { width: 1fr; height: 1fr; border-left: solid $panel-lighten-2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="back"),
        Binding("m", "cycle_series", "Chart series", id="series"),
        Binding("P", "profile", "Profile", id="profile"),
    ]

    run: var[RunState] = var(cast(RunState, None), always_update=True, init=False)
    series: var[str] = var(SERIES[0], init=False)

    def __init__(self, box_name: str, run: RunState, *,
                 stake: Callable[[RunState], AtStake | None] | None = None,
                 unit: Callable[[RunState], UnitCost | None] | None = None) -> None:
        super().__init__()
        self.box_name = box_name
        self.set_reactive(RunDetail.run, run)  # drawn on mount
        self._stake = stake or (lambda run: run_stake(run, None, {}, None))
        self._unit = unit or (lambda run: None)
        self._drawn: tuple[int, str] | None = None
        self._log_cursor: object = None

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield PlotextPlot()
        with Horizontal(id="lower"):
            # Focused from the start, so up/down, page keys and home/end scroll the
            # status and the weights list; tab moves to the log.
            with VerticalScroll(id="fields"):
                yield Static(id="field-table")
            yield Log(max_lines=2000, auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        self.watch_run(self.run)
        self.query_one("#fields", VerticalScroll).focus()
        # Follow the run as its box's snapshots arrive (the app publishes each one).
        self.watch(self.app, "box_state", self._box_changed, init=False)

    def _box_changed(self, state: BoxState | None) -> None:
        if state is not None and state.name == self.box_name:
            run = state.run(self.run.path)
            if run is not None:
                self.run = run

    def watch_run(self, run: RunState) -> None:
        """Redraw from a new snapshot: the chart only when history or series changed."""
        title = Text(f" {self.box_name} / {run.name}  ", style="bold")
        # The gap after the badge is the badge's: a span that opened with it would read
        # "runningepoch" wherever a span's leading blanks are dropped (screenshots' SVG).
        health = str(run.health)
        title.append_text(badge(health, len(health) + 4))
        title.append(run.reason, style="italic")
        self.query_one("#title", Static).update(title)
        self.query_one("#field-table", Static).update(fields_table(run, self._stake(run),
                                                                      self._unit(run)))
        if self._drawn != (len(run.history), self.series):
            self._draw_chart()
        log_cursor = (run.cursor.log_id, run.cursor.log_offset, len(run.log_tail))
        if log_cursor != self._log_cursor:
            self._log_cursor = log_cursor
            log = self.query_one(Log)
            log.clear()
            log.write_lines([compact_log_line(line) for line in run.log_tail])

    def _draw_chart(self) -> None:
        run = self.run
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        losses = [(p.epoch, p.loss) for p in run.history if p.loss is not None]
        metrics = [(p.epoch, p.metric) for p in run.history if p.metric is not None]
        # plotext overflows (and the screen dies) on a span near 1e308: a corrupt
        # metrics line with such a value is left off the chart and counted.
        drawable = len(losses) + len(metrics)
        losses = [(e, v) for e, v in losses if abs(v) <= CHART_LIMIT]
        metrics = [(e, v) for e, v in metrics if abs(v) <= CHART_LIMIT]
        off_chart = drawable - len(losses) - len(metrics)
        metric_name = short_metric_name(
            next((p.metric_name for p in reversed(run.history) if p.metric_name), None)
        ) or "metric"
        if self.series in ("both", "loss") and losses:
            plt.plot([e for e, _ in losses], [v for _, v in losses], label="train loss",
                     marker="braille")
        if self.series in ("both", "metric") and metrics:
            plt.plot([e for e, _ in metrics], [v for _, v in metrics], label=metric_name,
                     marker="braille", yside="right" if self.series == "both" else "left")
        epochs = sorted({p.epoch for p in run.history})
        if epochs:
            step = max(1, (epochs[-1] - epochs[0]) // 5)
            plt.xticks(list(range(epochs[0], epochs[-1] + 1, step)))
        plt.xlabel("epoch")
        shown = "loss and " + metric_name if self.series == "both" else self.series
        off = f" ({off_chart} value(s) beyond ±1e100 not drawn)" if off_chart else ""
        plt.title(f"{run.name}: {shown}{off}")
        plot.refresh()
        self._drawn = (len(run.history), self.series)

    def watch_series(self) -> None:
        self._draw_chart()

    def action_profile(self) -> None:
        """`P`: LibreYOLO's profiler on this run's box with the run's settings."""
        self.post_message(ProfileRequested(self.box_name, self.run.name))

    def action_cycle_series(self) -> None:
        self.series = SERIES[(SERIES.index(self.series) + 1) % len(SERIES)]
