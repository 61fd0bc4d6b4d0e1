"""The fleet screen's words: pure functions from model snapshots to Rich Text.

No Textual here, no I/O: every line the fleet list draws is made by one of
these from an immutable BoxState/RunState (and the money picture), so they
are tested with plain values and the widget only lays the lines out.

Text from a box (run names, reasons, errors) is a stranger's: it goes through
tui.model.text's cleaner before it reaches the terminal, and widths are
counted in terminal cells (CJK and emoji take two), not characters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from tui.model.box import BoxState, Connection, DiskRow
from tui.model.cost import RunCost, usd
from tui.model.guard import PushRecord, push_note
from tui.model.meter import BoxCost, FleetCost
from tui.model.rest import Rest, rest_words
from tui.model.runs import Health, RunState, format_age, parse_time
from tui.model.serverless_runs import ServerlessState
from tui.model.text import clean, clean_block
from tui.model.throughput import UnitCost, unit_usd
from tui.model.unpushed import at_stake, box_timeline, rate_share
from tui.model.watchdog_silence import box_clock, likely_fired, silent
from widgets.badges import badge, bar
from widgets.guard_text import guard_line
from widgets.money_text import box_money_line, busy_note, fleet_money, run_money

NAME_CELLS = 20
SPARK_POINTS = 60
SPARK_CELLS = 14
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


def fit(text: str, cells: int) -> str:
    """Exactly `cells` terminal cells: cut with an ellipsis, or padded with spaces."""
    if cell_len(text) <= cells:
        return set_cell_size(text, cells)
    return set_cell_size(text, cells - 1) + "…"


class Due:
    """Collects when the lines drawn at `now` would next read differently.

    Ages and countdowns are drawn through it; the fleet list redraws a box at its
    due time, not every second, and draws nothing when no shown figure moved."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.at = math.inf

    def _within(self, seconds: float) -> None:
        self.at = min(self.at, self.now + max(seconds, 0.05))

    def age(self, seconds: float) -> str:
        """A growing age (`data 5m old`): changes when its last shown unit rolls over."""
        seconds = max(0.0, seconds)
        unit = 1 if seconds < 60 else 60 if seconds < 86400 else 3600
        self._within(unit - seconds % unit)
        return format_age(seconds)

    def countdown(self, seconds: float) -> str:
        """A shrinking time (`retry in 12s`): changes when it drops below its shown value."""
        seconds = max(0.0, seconds)
        if seconds > 0:
            unit = 1 if seconds < 60 else 60 if seconds < 86400 else 3600
            self._within(seconds % unit or unit)
        return format_age(seconds)

    def clock(self, stamp: float) -> str | None:
        """HH:MM on the local clock of a time that moves with now (an end time)."""
        self._within(60 - stamp % 60)
        return clock_time(stamp)


def coarse_age(seconds: float) -> str:
    """`<1m ago`, `3m ago`: how long since a run wrote its status, to the
    minute (a run's epochs take minutes; a seconds counter would redraw every row at
    every refresh and say nothing the health does not)."""
    return "<1m ago" if seconds < 60 else f"{format_age(seconds)} ago"


def clock_time(stamp: float) -> str | None:
    """HH:MM on the local clock, or None for a time no clock can show (an ETA of 1e18 s
    in a hand-edited or corrupt status.json must not take the panel down)."""
    try:
        return time.strftime("%H:%M", time.localtime(stamp))
    except (OverflowError, OSError, ValueError):
        return None


def run_main_line(run: RunState, rest: Rest | None = None) -> Text:
    """`name  ▶ running  37/100 ███▌──── ETA 1h24m`: columns by cell width. On a box at
    `rest` a run last seen running is not running: it reads as the box does, no ETA."""
    epoch = run.current_epoch
    total = run.total_epochs
    fraction = epoch / total if epoch is not None and total else None
    halted = rest is not None and run.health is Health.RUNNING
    text = Text(fit(clean(run.name), NAME_CELLS) + " ", style="bold")
    text.append_text(badge(rest.kind if halted and rest else str(run.health), 11))
    done = "-" if epoch is None else str(epoch)
    text.append(f" {done:>5}/{total if total is not None else '?':<5} ")
    text.append_text(bar(fraction, 8))
    eta = None if halted else run.eta_seconds
    text.append(f" ETA {format_age(eta) if eta is not None else '-':<6}")
    return text


def run_detail_line(run: RunState, now: float, cost: RunCost | None = None,
                    pushed: str | None = None, due: Due | None = None,
                    unit: UnitCost | None = None, *, ends: bool = True) -> Text:
    """The second line: why (for runs in trouble), else best metric, end time, age.
    `ends`: whether an end time applies (not on a box at rest)."""
    due = due or Due(now)
    if run.health in (Health.FAILED, Health.STALLED, Health.DEAD, Health.UNREADABLE):
        text = Text(clean(run.reason), style="italic red" if run.health is Health.FAILED
                    else "italic yellow")
        if pushed:
            text.append(f" · {pushed}", style="dim")
        return text
    parts = []
    if run.best_metric is not None:
        best = f"best {clean(run.best_metric_name or 'metric')} {run.best_metric:.4f}"
        if run.best_epoch is not None:
            best += f" @{run.best_epoch}"
        parts.append(best)
    if run.train_loss is not None:
        parts.append(f"loss {run.train_loss:.4g}")
    end = due.clock(now + run.eta_seconds) if ends and run.eta_seconds is not None else None
    if end is not None:
        parts.append(f"ends {end}")
    money = run_money(cost)
    if money:
        parts.append(money)
    gpu = busy_note(run.busy, unit.billed_usd if unit is not None else None,
                    unit.billed_s if unit is not None else None)
    if gpu:
        parts.append(gpu)
    if unit is not None and unit.images_per_second is not None:
        parts.append(f"{unit.images_per_second:.0f} img/s")
        if unit.usd_per_1k_images is not None:
            parts.append(f"{unit_usd(unit.usd_per_1k_images)}/1k img")
    if pushed:
        parts.append(pushed)
    updated = parse_time(run.updated_at)
    if updated is not None and run.box_time is not None:
        parts.append(f"updated {coarse_age(run.box_time - updated)}")
    return Text(" · ".join(parts), style="dim")


def run_push_note(run: RunState, pushes: Mapping[str, PushRecord], box: BoxState,
                  due: Due) -> str | None:
    """The push note of a run, aged on the box's clock (the panel's while it has none)."""
    if box.box_time is None and run.path in pushes:
        due.age(0.0)  # aged on the panel's clock: it moves every second
    return push_note(run, pushes, box.box_time or due.now)


def spark_values(values: list[float]) -> list[float]:
    """Values a sparkline can draw: a series holding 1e308 next to -1e308 would overflow
    into NaN when its span is taken, so such series are scaled into [-1, 1] (the shape
    is what a sparkline shows)."""
    peak = max((abs(v) for v in values), default=0.0)
    if peak <= 1e300:
        return values
    return [v / peak for v in values]


_SPARKS: dict[tuple[str, int, object], str] = {}


def run_sparkline(run: RunState) -> str:
    """The run's loss sparkline, drawn again only when its history changed (a refresh that
    added nothing keeps the same history)."""
    key = (run.path, len(run.history), run.history[-1] if run.history else None)
    spark = _SPARKS.get(key)
    if spark is None:
        if len(_SPARKS) > 4096:
            _SPARKS.clear()
        spark = _SPARKS[key] = sparkline(loss_tail(run))
    return spark


def loss_tail(run: RunState, count: int = SPARK_POINTS) -> list[float]:
    """The run's last `count` losses, read from the end of its history (a refresh must
    not walk 2,000 epochs to draw 14 cells)."""
    tail: list[float] = []
    for point in reversed(run.history):
        if point.loss is not None:
            tail.append(point.loss)
            if len(tail) == count:
                break
    tail.reverse()
    return tail


def sparkline(values: list[float], cells: int = SPARK_CELLS) -> str:
    """The last values as eighth-block bars, `cells` wide, bucketed and scaled as
    Textual's Sparkline draws them (each cell the max of its bucket, the lowest value
    the lowest bar); the fleet list colours a bar by its height."""
    data = spark_values(values[-SPARK_POINTS:])
    if not data:
        return SPARK_BLOCKS[0] * cells
    if len(data) == 1:
        return SPARK_BLOCKS[-1] * cells
    low, high = min(data), max(data)
    extent = high - low or 1
    count = len(data)
    buckets = [part for i in range(cells)
               if (part := data[i * count // cells:(i + 1) * count // cells])]
    bars = []
    index, step = 0.0, len(buckets) / cells
    for _ in range(cells):
        ratio = (max(buckets[int(index)]) - low) / extent
        bars.append(SPARK_BLOCKS[int(ratio * (len(SPARK_BLOCKS) - 1))])
        index += step
    return "".join(bars)


def matches(run: RunState, text: str) -> bool:
    """The `/` filter: a health word, or part of the run's name (case-insensitive)."""
    text = text.strip().lower()
    return not text or str(run.health).startswith(text) or text in run.name.lower()


def shown_runs(box: BoxState, text: str) -> tuple[tuple[str, ...], bool]:
    """The paths of the runs the `/` filter shows on a box, and whether the box shows at
    all. Part of the box's name shows every run of it (so `/NAME` narrows the list to that
    box); with a filter on, a box with no run shown is left out, so that at 1,000 boxes a
    filter leaves the runs it found, not 1,000 box heads."""
    text = text.strip().lower()
    if not text or text in box.name.lower():
        return tuple(r.path for r in box.runs), True
    shown = tuple(r.path for r in box.runs if matches(r, text))
    return shown, bool(shown)


def box_health(box: BoxState) -> str | None:
    """One word for a box in the strip's count: its worst run's trouble, `ok`, or why it
    does not answer; None for a box at rest (stopped or destroyed: counted apart)."""
    if box.rest is not None:
        return None
    if box.connection is Connection.CONNECTING:
        return "connecting"
    if box.connection is not Connection.OK:
        return "unreachable"
    healths = {r.health for r in box.runs}
    for worst in (Health.DEAD, Health.FAILED, Health.STALLED, Health.UNREADABLE):
        if worst in healths:
            return str(worst)
    return "ok"


RUN_TROUBLE = ("dead", "failed", "stalled", "unreadable")  # worst first


def box_counts(healths: Sequence[str]) -> Text:
    """`· 67 ok · 67 need a look · 66 unreachable`: the boxes by their state, so that at
    1,000 boxes the strip says how many need a look without scrolling. A box whose runs
    are in trouble answers fine (its own line reads ok), so it is counted as needing a
    look, in the colour of the worst such run, never as `dead` or `failed` itself: the
    runs' own counts beside it say which."""
    text = Text()
    trouble = [h for h in healths if h in RUN_TROUBLE]
    for word in ("ok", "need a look", "unreachable", "connecting"):
        count = len(trouble) if word == "need a look" else healths.count(word)
        if count:
            worst = next(h for h in RUN_TROUBLE if h in trouble) if trouble else word
            text.append("· ", style="dim")
            text.append(f"{count} {word} ",
                        style=badge(worst if word == "need a look" else word).style)
    return text


def box_head_line(box: BoxState, provider: str, now: float, due: Due | None = None,
                  items: tuple[Text, ...] = (), disk_usd_per_hr: float | None = None
                  ) -> Text:
    """`■ name (provider) ● ok  GPU0 ██▌ 97% 20/24G  disk 41% of / (overlay)`, then any
    extra `items`
    (a verdict, a badge) the screen adds for this box. A box at rest reads
    `■ stopped (by you, 15:44) · disk $0.0300/hr` (`disk_usd_per_hr`: what its stopped
    disk bills, None where unknown) and shows no GPU bars: its GPUs are not its own now."""
    due = due or Due(now)
    text = Text(f"■ {box.name} ", style="bold")
    text.append(f"({provider}) ", style="dim")
    if box.rest is not None:
        symbol = badge(box.rest.kind)
        text.append(f"{symbol.plain[0]} ", style=symbol.style)
        text.append(rest_words(box.rest, clock_time(box.rest.at) if box.rest.at else None,
                               disk_usd_per_hr), style=symbol.style)
        for item in items:
            text.append("  ")
            text.append_text(item)
        return text
    if likely_fired(box) is not None:
        text.append("○ silent", style="dim")  # expected: its watchdog took it down
    else:
        text.append_text(badge(str(box.connection)))
    text.append(" ")
    age = box.data_age(now)
    if age is not None and (box.connection is not Connection.OK or age > 30):
        text.append(f"  data {due.age(age)} old", style="yellow")
    elif age is not None:
        due._within(30 - age)  # "data ... old" appears at 30 s
    for gpu in box.gpus:
        util = f"{gpu.util_pct:.0f}%" if gpu.util_pct is not None else "?"
        text.append(f"  GPU{gpu.index} ")
        text.append_text(bar(gpu.util_pct / 100 if gpu.util_pct is not None else None, 3))
        text.append(f"{util:>4}")
        if gpu.mem_used_mib is not None and gpu.mem_total_mib:
            text.append(f" {gpu.mem_used_mib / 1024:.0f}/{gpu.mem_total_mib / 1024:.0f}G",
                        style="dim")
    if box.loading and box.connection is Connection.OK:
        text.append("  loading history…", style="dim")
    if not box.gpus and box.gpu_note and box.connection is Connection.OK:
        text.append(f"  ({clean(box.gpu_note)})", style="dim")
    for disk in box.disks:
        text.append(f"  disk {disk_words(disk)}",
                    style="bold red" if disk.percent >= 90 else "")
    for item in items:
        text.append("  ")
        text.append_text(item)
    return text


DISK_PLACE_CELLS = 24


def disk_words(disk: DiskRow) -> str:
    """`28% of / (overlay)`: `df`'s Use% and the filesystem it is of (its mount point, cut
    to fit, and type; the device is in `status`); a probe that named no mount: the runs
    root it measured. Box-sourced names were made printable when the answer was folded."""
    def cut(place: str) -> str:
        return place if cell_len(place) <= DISK_PLACE_CELLS else fit(place, DISK_PLACE_CELLS)

    if disk.mount is None:
        return f"{disk.percent}% at {cut(disk.root)}"
    kind = f" ({disk.fstype})" if disk.fstype else ""
    return f"{disk.percent}% of {cut(disk.mount)}{kind}"


def box_problem_line(box: BoxState, now: float, due: Due | None = None) -> Text | None:
    """Why a box is down (with the retry countdown), its roots' problems and notices."""
    due = due or Due(now)
    lines = []
    if box.connection is not Connection.OK and box.error and box.rest is None \
            and likely_fired(box) is not None:
        since = clock_time(box.failed_since) if box.failed_since is not None else None
        quiet = Text(f"not answering{f' since {since}' if since else ''}: "
                     f"{clean_block(box.error)}", style="dim")
        rest = box_problem_line(replace(box, error=None), now, due)
        return Text("\n").join([quiet, rest]) if rest is not None else quiet
    if box.connection is not Connection.OK and box.error and box.rest is None:
        retry = ""
        if box.retry_at is not None:
            retry = f" (retry in {due.countdown(box.retry_at - now)})"
        lines.append(f"{clean_block(box.error)}{retry}")
    lines.extend(clean(str(p)) for p in (*box.root_problems, *box.notices))
    if box.connection is Connection.OK and not box.runs:
        lines.append("no runs found under the runs roots")
    return Text("\n".join(lines), style="yellow") if lines else None


def fleet_line(boxes: list[BoxState], cost: FleetCost | None = None,
               apps: Sequence[ServerlessState] = (),
               apps_usd_per_hr: float | None = None) -> Text:
    """The strip at the top: boxes reachable / total, the serverless apps, runs by health
    (the apps' too), the fleet's burn, then the apps' estimated burn apart from it."""
    reachable = sum(b.connection is Connection.OK for b in boxes)
    resting = [b.rest.kind for b in boxes if b.rest is not None]
    text = Text(" ", style="bold")
    if boxes or not apps:
        text.append(f"{reachable}/{len(boxes) - len(resting)} boxes up ")
    if apps:
        running = sum(a.app is not None and a.app.state == "running" for a in apps)
        text.append(f"{'· ' if boxes else ''}{len(apps)} app{'s' if len(apps) != 1 else ''}"
                    f" ({running} running) ")
    if resting:  # stopped or destroyed on purpose: counted apart, not as down
        text.append("· ", style="dim")
        text.append(", ".join(f"{resting.count(k)} {k}" for k in ("stopped", "destroyed")
                              if k in resting) + " ", style="dim")
    text.append_text(box_counts([h for h in map(box_health, boxes) if h is not None]))
    counts = {h: 0 for h in Health}
    for box in boxes:
        for run in box.runs:
            if box.rest is None or run.health is not Health.RUNNING:  # not running now
                counts[run.health] += 1
    for state in apps:
        for run in state.runs:
            counts[run.health] += 1
    for health, count in counts.items():
        if count:
            text.append(" ")
            text.append_text(badge(str(health)))
            text.append(f" {count}")
    text.append_text(fleet_money(cost))
    if apps_usd_per_hr:
        text.append(f" · serverless ~{usd(apps_usd_per_hr)}/hr est.", style="dim")
    return text


@dataclass(frozen=True)
class BoxView:
    """Everything one box's lines are drawn from: its snapshot, and what the panel adds."""

    state: BoxState
    provider: str = "manual"
    cost: BoxCost | None = None
    pushes: Mapping[str, PushRecord] = field(default_factory=dict)
    activity: Text | None = None  # an action in flight, or how the last one ended
    items: tuple[Text, ...] = ()  # extra head items (a verdict, a badge)
    at_stake: bool = False  # each run says what a crash would cost (the panel's fleet list)


@dataclass(frozen=True)
class Line:
    """One logical line of the fleet list; `run` is the path of the run it belongs to.

    A line wraps at the list's width (each part indented by `indent`); a run's main
    line never wraps and carries its loss sparkline at the right edge."""

    text: Text
    indent: int = 0
    run: str | None = None
    spark: str | None = None
    style: str = ""  # a component of the list's CSS ("activity", "muted") for the line


@dataclass(frozen=True)
class BoxLines:
    lines: tuple[Line, ...]
    runs: tuple[str, ...]  # the paths of the runs shown, in order
    due: float  # when some shown age or countdown next reads differently


def _lines_of(text: Text | None, indent: int, style: str = "") -> list[Line]:
    return [Line(part, indent, style=style) for part in text.split("\n")] if text else []


def _with_stake(pushed: str | None, run: RunState, view: BoxView, box: BoxState
                ) -> str | None:
    """`unpushed: 7 epochs, $1.84 of GPU time` after the push note, while anything is."""
    running = sum(r.health is Health.RUNNING for r in box.runs)
    stake = at_stake(run, view.pushes.get(run.path), rate_share(run, view.cost, running),
                     box_timeline(box, view.cost))
    if stake is None or stake.epochs == 0:
        return pushed
    return f"{pushed} · {stake.words()}" if pushed else stake.words()


def box_lines(view: BoxView, filter_text: str, now: float) -> BoxLines:
    """A box as the fleet list shows it: head, activity, money, problems, then a main
    and a detail line per run the filter shows, a count of the hidden ones, a gap."""
    box = view.state
    paths, visible = shown_runs(box, filter_text)
    if not visible:  # a filter on, and nothing of this box matches it
        return BoxLines((), (), math.inf)
    due = Due(now)
    stopped = view.cost.rates.stopped if view.cost is not None else None
    lines = [Line(box_head_line(box, view.provider, now, due, view.items,
                                stopped.usd_per_hr if stopped is not None else None))]
    if view.activity is not None:
        lines += _lines_of(view.activity, 2, "activity")
    if view.cost is not None:
        if view.cost.idle_alarm and view.cost.idle_since is not None:
            due.age(now - view.cost.idle_since)
        destroyed = box.rest is not None and box.rest.kind == "destroyed"
        lines += _lines_of(box_money_line(view.cost, now, box.busy, advice=not destroyed), 2)
    if box.guard is not None and silent(box) and box.guard.deadline is not None:
        carried = box_clock(box, now)  # its countdown runs on, and stops at the deadline
        if carried is not None and box.guard.deadline > carried:
            due.countdown(box.guard.deadline - carried)
    lines += _lines_of(guard_line(box, now), 2)
    lines += _lines_of(box_problem_line(box, now, due), 2)
    for run in box.runs:
        if run.path not in paths:
            continue
        cost = view.cost.runs.get(run.path) if view.cost else None
        pushed = run_push_note(run, view.pushes, box, due)
        if view.at_stake:
            pushed = _with_stake(pushed, run, view, box)
        lines.append(Line(run_main_line(run, box.rest), run=run.path,
                          spark=run_sparkline(run)))
        unit = view.cost.units.get(run.path) if view.cost else None
        lines.append(Line(run_detail_line(run, now, cost, pushed, due, unit,
                                          ends=box.rest is None), 2, run=run.path))
    hidden = len(box.runs) - len(paths)
    if hidden:
        lines.append(Line(Text(f"{hidden} run(s) hidden by the filter"), 2, style="muted"))
    lines.append(Line(Text()))
    return BoxLines(tuple(lines), paths, due.at)
