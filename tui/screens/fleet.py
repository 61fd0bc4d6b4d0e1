"""The fleet view: a strip with the fleet at a glance, a section per box, a row per run.

Widgets here render immutable BoxState/RunState snapshots and are updated in
place (rows are added or removed only when runs appear or vanish), so a
refresh repaints what changed, not the whole screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Sparkline, Static

from tui.model.box import BoxState, Connection
from tui.model.cost import RunCost
from tui.model.guard import PushRecord, push_note
from tui.model.meter import BoxCost, FleetCost
from tui.model.runs import Health, RunState, format_age, parse_time
from tui.screens.money import box_money_line, fleet_money, run_money
from widgets import badge, bar

Clock = Callable[[], float]
SPARK_POINTS = 60


def put(widget: Static, text: Text) -> None:
    """Update a line only when its content changed: over a slow link every
    repaint costs bytes, and the 1 s tick would otherwise repaint every row."""
    if getattr(widget, "_shown", None) != text:
        widget._shown = text  # type: ignore[attr-defined]
        widget.update(text)


def run_main_line(run: RunState) -> Text:
    epoch = run.current_epoch
    total = run.total_epochs
    fraction = epoch / total if epoch is not None and total else None
    name = run.name if len(run.name) <= 20 else run.name[:19] + "…"
    text = Text(f"{name:<20} ", style="bold")
    text.append_text(badge(str(run.health), 11))
    done = "-" if epoch is None else str(epoch)
    text.append(f" {done:>5}/{total if total is not None else '?':<5} ")
    text.append_text(bar(fraction, 8))
    eta = run.eta_seconds
    text.append(f" ETA {format_age(eta) if eta is not None else '-':<6}")
    return text


def clock_time(stamp: float) -> str | None:
    """HH:MM on the local clock, or None for a time no clock can show (an ETA of 1e18 s
    in a hand-edited or corrupt status.json must not take the panel down)."""
    try:
        return time.strftime("%H:%M", time.localtime(stamp))
    except (OverflowError, OSError, ValueError):
        return None


def run_detail_line(run: RunState, now: float, cost: RunCost | None = None,
                    pushed: str | None = None) -> Text:
    """The second line: why (for runs in trouble), else best metric, end time, age."""
    if run.health in (Health.FAILED, Health.STALLED, Health.DEAD, Health.UNREADABLE):
        text = Text(run.reason, style="italic red" if run.health is Health.FAILED
                    else "italic yellow")
        if pushed:
            text.append(f" · {pushed}", style="dim")
        return text
    parts = []
    if run.best_metric is not None:
        best = f"best {run.best_metric_name or 'metric'} {run.best_metric:.4f}"
        if run.best_epoch is not None:
            best += f" @{run.best_epoch}"
        parts.append(best)
    if run.train_loss is not None:
        parts.append(f"loss {run.train_loss:.4g}")
    ends = clock_time(now + run.eta_seconds) if run.eta_seconds is not None else None
    if ends is not None:
        parts.append(f"ends {ends}")
    money = run_money(cost)
    if money:
        parts.append(money)
    if pushed:
        parts.append(pushed)
    updated = parse_time(run.updated_at)
    if updated is not None and run.box_time is not None:
        parts.append(f"updated {format_age(run.box_time - updated)} ago")
    return Text(" · ".join(parts), style="dim")


def spark_values(values: list[float]) -> list[float]:
    """Values the Sparkline can draw: it sums and subtracts them, so a loss of 1e308 next
    to -1e308 would overflow into NaN and kill the render. Such series are scaled into
    [-1, 1] (the shape is what a sparkline shows)."""
    peak = max((abs(v) for v in values), default=0.0)
    if peak <= 1e300:
        return values
    return [v / peak for v in values]


class RunRow(Vertical, can_focus=True):
    """One run: name, health, epoch bar, ETA and loss sparkline; the why below."""

    DEFAULT_CSS = """
    RunRow { height: auto; }
    RunRow:focus { background: $accent 25%; }
    RunRow > Horizontal { height: 1; }
    RunRow #main { width: 1fr; }
    RunRow Sparkline { width: 14; height: 1; margin-left: 1; }
    RunRow #detail { height: auto; padding-left: 2; }
    """

    def __init__(self, box_name: str, run: RunState, clock: Clock) -> None:
        super().__init__()
        self.box_name = box_name
        self.run = run
        self.cost: RunCost | None = None
        self.pushed: str | None = None
        self._clock = clock
        self._history_len = -1
        self._main: Static | None = None
        self._detail: Static | None = None
        self._spark: Sparkline | None = None

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="main")
            yield Sparkline([], id="loss")
        yield Static(id="detail")

    def on_mount(self) -> None:
        # Kept, not queried on every show: a refresh of 100 boxes must not pay for
        # thousands of CSS selector matches.
        self._main = self.query_one("#main", Static)
        self._detail = self.query_one("#detail", Static)
        self._spark = self.query_one(Sparkline)
        self.show(self.run)

    def show(self, run: RunState) -> None:
        self.run = run
        if self._main is None or self._detail is None or self._spark is None \
                or not self._main.is_attached:
            return  # not composed yet (on_mount shows the latest run), or being removed
        put(self._main, run_main_line(run))
        put(self._detail, run_detail_line(run, self._clock(), self.cost, self.pushed))
        if len(run.history) != self._history_len:
            # Sparkline redraws only when given a new list.
            self._history_len = len(run.history)
            self._spark.data = spark_values(run.loss_history[-SPARK_POINTS:])


def matches(run: RunState, text: str) -> bool:
    """The `/` filter: a health word, or part of the run's name (case-insensitive)."""
    text = text.strip().lower()
    return not text or str(run.health).startswith(text) or text in run.name.lower()


def box_head_line(box: BoxState, provider: str, now: float) -> Text:
    text = Text(f"■ {box.name} ", style="bold")
    text.append(f"({provider}) ", style="dim")
    text.append_text(badge(str(box.connection)))
    text.append(" ")
    age = box.data_age(now)
    if age is not None and (box.connection is not Connection.OK or age > 30):
        text.append(f"  data {format_age(age)} old", style="yellow")
    for gpu in box.gpus:
        util = f"{gpu.util_pct:.0f}%" if gpu.util_pct is not None else "?"
        text.append(f"  GPU{gpu.index} ")
        text.append_text(bar(gpu.util_pct / 100 if gpu.util_pct is not None else None, 3))
        text.append(f"{util:>4}")
        if gpu.mem_used_mib is not None and gpu.mem_total_mib:
            text.append(f" {gpu.mem_used_mib / 1024:.0f}/{gpu.mem_total_mib / 1024:.0f}G",
                        style="dim")
    if not box.gpus and box.gpu_note and box.connection is Connection.OK:
        text.append(f"  ({box.gpu_note})", style="dim")
    for disk in box.disks:
        text.append(f"  disk {disk.percent}%",
                    style="bold red" if disk.percent >= 90 else "")
    return text


def box_problem_line(box: BoxState, now: float) -> Text | None:
    lines = []
    if box.connection is not Connection.OK and box.error:
        retry = ""
        if box.retry_at is not None:
            retry = f" (retry in {format_age(max(0.0, box.retry_at - now))})"
        lines.append(f"{box.error}{retry}")
    lines.extend(str(p) for p in (*box.root_problems, *box.notices))
    if box.connection is Connection.OK and not box.runs:
        lines.append("no runs found under the runs roots")
    return Text("\n".join(lines), style="yellow") if lines else None


class BoxSection(Vertical):
    """One box: a head line (connection, GPUs, disk), its problems, and its runs."""

    DEFAULT_CSS = """
    BoxSection { height: auto; margin-bottom: 1; }
    BoxSection #head { height: 1; }
    BoxSection #problem { height: auto; padding-left: 2; }
    BoxSection #money { height: auto; padding-left: 2; }
    BoxSection #activity { height: auto; padding-left: 2; color: $accent; text-style: bold; }
    BoxSection #hidden { height: 1; color: $text-muted; padding-left: 2; }
    """

    def __init__(self, box: BoxState, provider: str, clock: Clock) -> None:
        super().__init__(id=f"box-{abs(hash(box.name))}")
        self.box = box
        self.provider = provider
        self._clock = clock
        self.filter = ""
        self.cost: BoxCost | None = None
        self.pushes: Mapping[str, PushRecord] = {}
        self.activity: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        yield Static(id="activity")
        yield Static(id="money")
        yield Static(id="problem")
        yield Static(id="hidden")

    def on_mount(self) -> None:
        self._lines = {name: self.query_one(f"#{name}", Static)
                       for name in ("head", "activity", "money", "problem", "hidden")}
        self.show(self.box)

    def _line(self, name: str, text: Text | None) -> None:
        widget = self._lines[name]
        widget.display = text is not None
        put(widget, text or Text())

    def show(self, box: BoxState) -> None:
        self.box = box
        lines = getattr(self, "_lines", None)
        if not lines or not lines["head"].is_attached:
            # Not composed yet (on_mount shows the latest box), or its children are being
            # removed while a refresh or the 1 s tick still arrives (the app is quitting).
            return
        now = self._clock()
        put(lines["head"], box_head_line(box, self.provider, now))
        self._line("activity", Text(self.activity) if self.activity is not None else None)
        self._line("money", box_money_line(self.cost, now))
        self._line("problem", box_problem_line(box, now))
        rows: dict[str, RunRow] = getattr(self, "_rows", {})
        self._rows = {}
        hidden = 0
        for run in box.runs:
            row = rows.pop(run.path, None)
            fresh = row is None
            if row is None:
                row = RunRow(box.name, run, self._clock)
            row.cost = self.cost.runs.get(run.path) if self.cost else None
            row.pushed = push_note(run, self.pushes, box.box_time or now)
            if fresh:
                self.mount(row)
            else:
                row.show(run)
            row.display = matches(run, self.filter)
            hidden += not row.display
            self._rows[run.path] = row
        for row in rows.values():
            row.remove()
        self._line("hidden", Text(f"{hidden} run(s) hidden by the filter") if hidden else None)


def fleet_line(boxes: list[BoxState], cost: FleetCost | None = None) -> Text:
    """The strip at the top: boxes reachable / total, runs by health, the fleet's burn."""
    reachable = sum(b.connection is Connection.OK for b in boxes)
    text = Text(f" {reachable}/{len(boxes)} boxes up ", style="bold")
    counts = {h: 0 for h in Health}
    for box in boxes:
        for run in box.runs:
            counts[run.health] += 1
    for health, count in counts.items():
        if count:
            text.append(" ")
            text.append_text(badge(str(health)))
            text.append(f" {count}")
    text.append_text(fleet_money(cost))
    return text


class FleetView(VerticalScroll, can_focus=False):
    """Every box of the fleet, in config order."""

    def __init__(self, boxes: list[BoxState], providers: dict[str, str], clock: Clock) -> None:
        super().__init__(id="fleet")
        self.boxes = {b.name: b for b in boxes}
        self.providers = providers
        self._clock = clock

    def compose(self) -> ComposeResult:
        self.sections = {
            box.name: BoxSection(box, self.providers.get(box.name, "manual"), self._clock)
            for box in self.boxes.values()}
        yield from self.sections.values()

    def show(self, box: BoxState) -> None:
        """One box's new snapshot redraws that box only."""
        self.boxes[box.name] = box
        if box.name in self.sections:
            self.sections[box.name].show(box)

    def tick(self) -> None:
        """Ages and countdowns move even when no box answered."""
        for section in self.sections.values():
            section.show(section.box)

    def show_cost(self, cost: FleetCost, only: str | None = None) -> None:
        """New money figures; `only` redraws one box (the others catch up at the tick)."""
        for name, section in self.sections.items():
            section.cost = cost.boxes.get(name)
            if only is None or name == only:
                section.show(section.box)

    def show_pushes(self, pushes: Mapping[str, Mapping[str, PushRecord]]) -> None:
        for name, section in self.sections.items():
            section.pushes = pushes.get(name, {})
            section.show(section.box)

    def set_activity(self, box: str, text: str | None) -> None:
        if box in self.sections:
            self.sections[box].activity = text
            self.sections[box].show(self.sections[box].box)

    def set_filter(self, text: str) -> None:
        for section in self.sections.values():
            section.filter = text
            section.show(section.box)
