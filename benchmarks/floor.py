"""The framework's floor: the panel's rows drawn the cheapest idiomatic ways Textual has.

Why: "the panel answers a key in N ms" says little on a shared 2-core machine;
"N times what Textual itself needs to show the same rows" says where the cost
is. This module holds two minimal apps over the same runs (the same two lines
per run, made by the panel's own formatters), a key-latency harness shared
with benchmarks/panel.py, and a quick in-process comparison:

- `StaticFloor`: one `Static` per run in a `VerticalScroll`, the cursor a CSS
  class (the widget-per-row way);
- `LineFloor`: one `ScrollView` drawing every line with `render_line` (the
  line-API way of Textual's own Log and DataTable);
- the panel itself (`GpurentApp(live=False)`) over the same snapshots.

Each is measured the same way, headless, interleaved: idle CPU; key -> frame
(the key handed to the driver as a terminal's input thread does, until the
first frame in which the cursor is on the new row and the row is visible,
encoded for a terminal); CPU and frames per key press; the same under a
refresh of every box each second (the floors rewrite their rows' text, the
panel gets a new snapshot per box, as from its watchers).

    python benchmarks/floor.py [--boxes 20] [--runs 2] [--epochs 2000] [--presses 150]

No network, no boxes: benchmarks/panel.py measures the live panel over sshd.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

from _fleet import code_line, code_under_test, metrics_line, pct, vm_kib  # noqa: E402
from rich.console import RenderableType  # noqa: E402
from rich.text import Text  # noqa: E402
from textual import events  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.binding import Binding, BindingType  # noqa: E402
from textual.containers import VerticalScroll  # noqa: E402
from textual.geometry import Size  # noqa: E402
from textual.screen import Screen  # noqa: E402
from textual.scroll_view import ScrollView  # noqa: E402
from textual.strip import Strip  # noqa: E402
from textual.widgets import Static  # noqa: E402

from tui.messages import BoxUpdated  # noqa: E402
from tui.model.box import BoxState, fold_answer  # noqa: E402
from tui.model.config import FleetConfig, parse_config  # noqa: E402
from tui.model.runs import EpochPoint  # noqa: E402
from widgets.fleet_text import run_detail_line, run_main_line  # noqa: E402

SIZE = (160, 48)
NOW = 1_796_205_000.0
Key = tuple[str, str]
FrameHook = Callable[[float], bool]


# --- the same fleet for everyone ----------------------------------------------------


def fleet_config(boxes: int) -> FleetConfig:
    text = "\n".join(f'[[box]]\nname = "box{b:02d}"\nhost = "10.0.0.{b + 1}"\n'
                     'pricing = { running_usd_per_hr = 1.5 }\n' for b in range(boxes))
    return parse_config(text, "floor.toml")


def run_answer(b: int, r: int, epochs: int, start: int = 1, total: int | None = None
               ) -> dict[str, Any]:
    """One run as the probe sends it: status.json and metrics lines start..epochs."""
    text = "".join(metrics_line(e) for e in range(start, epochs + 1))
    total = total or epochs + 1000
    status = {"schema_version": 1, "state": "running", "current_epoch": epochs,
              "completed_epochs": epochs, "total_epochs": total, "eta_seconds": 80.0 * 1000,
              "mean_epoch_seconds": 80.0, "train_loss": 2.5, "best_metric": 0.4,
              "best_metric_name": "metrics/mAP50-95", "best_epoch": epochs - 3,
              "updated_at": datetime.fromtimestamp(NOW - 5, UTC).isoformat(), "pid": 4242}
    return {"path": f"/runs/yolox-n-{b}-{r}", "root": "/runs", "name": f"yolox-n-{b}-{r}",
            "s_sig": f"s{epochs}", "w_sig": "w", "status": status, "pid_alive": True,
            "metrics": {"text": text, "off": len(text), "id": "1:1", "head": "h"},
            "log": {"text": "", "off": 0, "id": "1:2"},
            "weights": [["last.pt", 11463045, NOW - 20]]}


def synthetic_states(boxes: int, runs: int, epochs: int) -> list[BoxState]:
    """Every box folded from probe-shaped answers (the real fold, no network)."""
    return [fold_answer(BoxState(name=f"box{b:02d}"), {
        "v": 1, "time": NOW, "runs": [run_answer(b, r, epochs) for r in range(runs)],
        "gpus": {"rows": ["0, NVIDIA GeForce RTX 4090, 97, 20480, 24564, 66, 412.5"]},
        "disks": []}, NOW) for b in range(boxes)]


def advanced(state: BoxState, epoch: int) -> BoxState:
    """The box one epoch later: each run's status and history move on (what its next
    refresh would fold; the floors only redraw the words, the panel its whole box)."""
    runs = []
    for run in state.runs:
        status = {**(run.status or {}), "current_epoch": epoch, "completed_epochs": epoch,
                  "train_loss": 2.0 + 1.0 / epoch}
        point = EpochPoint(epoch=epoch, loss=2.0 + 1.0 / epoch, metric=0.4,
                           metric_name="mAP50-95", seconds=80.0)
        runs.append(replace(run, status=status, history=(*run.history[1:], point),
                            reason=f"epoch {epoch}"))
    return replace(state, runs=tuple(runs))


def row_texts(state: BoxState) -> list[tuple[Key, Text, Text]]:
    """The two lines of each run, made by the panel's own formatters."""
    return [((state.name, run.path), run_main_line(run), run_detail_line(run, NOW))
            for run in state.runs]


# --- frame clock ---------------------------------------------------------------------


class Frames:
    """A frame clock for any app: the time of each frame, hooks called after each, and
    the frame encoded for a terminal (headless Textual skips that; a terminal pays it)."""

    frames: list[float]
    frame_hooks: list[FrameHook]

    def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
        app: Any = self
        if isinstance(renderable, CompositorUpdate) and app.is_headless:
            renderable.render_segments(app.console)
        super()._display(screen, renderable)  # type: ignore[misc]
        if renderable is not None:
            now = time.perf_counter()
            self.frames.append(now)
            if self.frame_hooks:
                self.frame_hooks = [h for h in self.frame_hooks if not h(now)]


# --- the floors -------------------------------------------------------------------


class FloorApp(App[None]):
    """What both floors share: the rows in order, a cursor moved by j/k, a refresh."""

    AUTO_FOCUS = None
    BINDINGS: ClassVar[list[BindingType]] = [Binding("j,down", "move(1)", "next"),
                                             Binding("k,up", "move(-1)", "previous")]

    def __init__(self, states: Sequence[BoxState]) -> None:
        super().__init__()
        self.frames: list[float] = []
        self.frame_hooks: list[FrameHook] = []
        self.rows = [row for state in states for row in row_texts(state)]
        self.order = [key for key, _, _ in self.rows]
        self.selected: Key = self.order[0]

    def action_move(self, step: int) -> None:
        index = self.order.index(self.selected)
        old, self.selected = self.selected, self.order[min(max(index + step, 0),
                                                           len(self.order) - 1)]
        self.cursor_moved(old)

    def cursor_moved(self, old: Key) -> None:
        raise NotImplementedError

    def is_visible(self, key: Key) -> bool:
        raise NotImplementedError

    def show_box(self, state: BoxState) -> None:
        raise NotImplementedError


class StaticFloor(Frames, FloorApp):
    """One Static per run (two lines), the cursor a CSS class."""

    CSS = """
    .row { height: 2; }
    .row.-cursor { background: $accent 25%; }
    """

    def compose(self) -> ComposeResult:
        self.widgets = {key: Static(Text.assemble(main, "\n  ", detail), classes="row")
                        for key, main, detail in self.rows}
        with VerticalScroll():
            yield from self.widgets.values()

    def on_mount(self) -> None:
        self.widgets[self.selected].add_class("-cursor")

    def cursor_moved(self, old: Key) -> None:
        self.widgets[old].remove_class("-cursor")
        widget = self.widgets[self.selected]
        widget.add_class("-cursor")
        widget.scroll_visible(animate=False, immediate=True)

    def is_visible(self, key: Key) -> bool:
        widget = self.widgets[key]
        return widget.has_class("-cursor") and widget in self.screen._compositor.visible_widgets

    def show_box(self, state: BoxState) -> None:
        for key, main, detail in row_texts(state):
            self.widgets[key].update(Text.assemble(main, "\n  ", detail))


class Lines(ScrollView):
    """Every run's two lines as strips; the cursor's rows drawn over its background."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"lines--cursor"}
    DEFAULT_CSS = "Lines > .lines--cursor { background: $accent 25%; }"

    def __init__(self, floor: LineFloor) -> None:
        super().__init__()
        self.floor = floor
        self.texts: list[Text] = []
        self.keys: list[Key] = []
        for key, main, detail in floor.rows:
            self.texts += [main, Text.assemble("  ", detail)]
            self.keys += [key, key]
        self.index = {key: 2 * i for i, key in enumerate(floor.order)}
        self.cache: dict[tuple[int, bool], Strip] = {}
        self.virtual_size = Size(0, len(self.texts))

    def render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if row >= len(self.texts):
            return Strip.blank(width, self.rich_style)
        cursor = self.keys[row] == self.floor.selected
        strip = self.cache.get((row, cursor))
        if strip is None:
            style = self.rich_style + (self.get_component_rich_style("lines--cursor")
                                       if cursor else self.rich_style)
            segments = self.app.console.render_lines(
                self.texts[row], self.app.console.options.update_width(width), pad=True,
                style=style)[0]
            strip = self.cache[(row, cursor)] = Strip(segments, width)
        return strip

    def refresh_key(self, key: Key) -> None:
        row = self.index[key]
        for y in (row, row + 1):
            self.cache.pop((y, True), None)
            self.cache.pop((y, False), None)
        self.refresh_lines(row, 2)


class LineFloor(Frames, FloorApp):
    """One line-API widget for every run (as Textual's Log and DataTable draw)."""

    def compose(self) -> ComposeResult:
        self.lines = Lines(self)
        yield self.lines

    def cursor_moved(self, old: Key) -> None:
        self.lines.refresh_key(old)
        self.lines.refresh_key(self.selected)
        row = self.lines.index[self.selected]
        self.lines.scroll_to_region(self.lines.region.__class__(0, row, 1, 2), animate=False,
                                    immediate=True)

    def is_visible(self, key: Key) -> bool:
        row = self.lines.index[key]
        top = self.lines.scroll_offset.y
        return self.selected == key and top <= row < top + self.lines.size.height - 1

    def show_box(self, state: BoxState) -> None:
        for key, main, detail in row_texts(state):
            row = self.lines.index[key]
            self.lines.texts[row] = main
            self.lines.texts[row + 1] = Text.assemble("  ", detail)
            self.lines.refresh_key(key)


# --- the panel, driven the same way ---------------------------------------------------


def panel_class() -> type:
    from tui.app import GpurentApp

    class PanelApp(Frames, GpurentApp):
        """The real panel with the frame clock; nothing of it is changed."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.frames = []
            self.frame_hooks = []
            self.box_updates = 0

        def post_message(self, message: Any) -> bool:
            if isinstance(message, BoxUpdated):
                self.box_updates += 1
            return super().post_message(message)

    return PanelApp


class Driven:
    """What the harness needs of any app: its runs in order, the cursor, visibility."""

    def __init__(self, app: Any) -> None:
        self.app = app

    @property
    def panel(self) -> bool:
        return not isinstance(self.app, FloorApp)

    def order(self) -> list[Key]:
        if not self.panel:
            return self.app.order
        screen = self.app.screen_stack[0] if self.app.screen_stack else None
        if screen is None or not screen.is_mounted:
            return []
        return screen.fleet_list.order

    def selected(self) -> Key | None:
        return self.app.screen_stack[0].selected if self.panel else self.app.selected

    def shows(self, key: Key) -> bool:
        """The cursor is on `key` and the row is inside the scrolled window."""
        if not self.panel:
            return self.app.is_visible(key)
        screen = self.app.screen_stack[0]
        return screen.selected == key and screen.fleet_list.is_visible(key)


# --- measuring ------------------------------------------------------------------------


def step_name(handle: asyncio.events.Handle) -> str:
    """What one step of the loop ran: the task it woke (Textual names each widget's message
    pump's task after the widget), else the callback."""
    owner = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
    if isinstance(owner, asyncio.Task):
        return f"task {owner.get_name()}"[:160]
    return repr(handle)[:160]


class LoopLag:
    """How long the event loop was held: a task that asks to wake every 5 ms records how
    late each wake-up came, and the CPU of every step the loop runs (a callback, a task's
    step between awaits). A late wake-up may be several short steps in one turn, or the
    machine busy elsewhere; a long step is the app's own."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.steps: list[float] = []
        self.longest: list[tuple[float, str]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(0.005)
            self.lags.append(max(0.0, loop.time() - start - 0.005))

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._original = asyncio.events.Handle._run
        steps, original = self.steps, self._original

        longest = self.longest

        def timed(handle: asyncio.events.Handle) -> None:
            start = time.thread_time()
            original(handle)
            took = time.thread_time() - start
            steps.append(took)
            if took > 0.015:
                longest.append((took, step_name(handle)))

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
        if self._task is not None:
            self._task.cancel()

    def summary(self) -> dict[str, Any]:
        if not self.lags:
            return {"n": 0}
        ms = [v * 1000 for v in self.lags]
        steps = [v * 1000 for v in self.steps] or [0.0]
        return {"n": len(ms), "max_ms": round(max(ms), 1), "p99_ms": round(pct(ms, 99), 1),
                "over_20ms": sum(v > 20 for v in ms),
                "longest_step_cpu_ms": round(max(steps), 1),
                "steps_over_20ms_cpu": sum(v > 20 for v in steps),
                "longest_steps": [{"cpu_ms": round(t * 1000, 1), "ran": what}
                                  for t, what in sorted(self.longest, reverse=True)[:3]]}


def summary(values: Sequence[float], misses: int = 0) -> dict[str, Any]:
    if not values:
        return {"n": 0, "misses": misses}
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "misses": misses, "median_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 95), 1), "max_ms": round(max(ms), 1)}


async def key_latencies(app: Any, presses: int, budget: float, rng: random.Random
                        ) -> dict[str, Any]:
    """Key handed to the driver -> first frame showing the cursor on the new row; with the
    CPU and the frames each press cost. j/k sweep down, then up (no wrap-around)."""
    driven = Driven(app)
    driver = app._driver
    loop = asyncio.get_running_loop()
    values: list[float] = []
    misses = 0
    direction = 1
    deadline = time.perf_counter() + budget
    cpu0, frames0, pressed = time.process_time(), len(app.frames), 0
    for _ in range(presses):
        if time.perf_counter() > deadline:
            break
        order = driven.order()
        selected = driven.selected()
        index = order.index(selected) if selected in order else 0
        if not 0 <= index + direction < len(order):
            direction = -direction
        target = order[index + direction]
        painted: asyncio.Future[float] = loop.create_future()

        def hook(now: float, target: Key = target,
                 painted: asyncio.Future[float] = painted) -> bool:
            if driven.shows(target):
                if not painted.done():
                    painted.set_result(now)
                return True
            return painted.done()

        app.frame_hooks.append(hook)
        key = "j" if direction > 0 else "k"
        event = events.Key(key, key)
        event.set_sender(app)
        start = time.perf_counter()
        driver.send_message(event)
        pressed += 1
        try:
            values.append(await asyncio.wait_for(painted, 5.0) - start)
        except TimeoutError:
            misses += 1
            app.frame_hooks = [h for h in app.frame_hooks if h is not hook]
        # 10-50 ms between a frame and the next key (a held key repeats every ~30 ms):
        # random, so presses land at every phase of a refresh.
        await asyncio.sleep(rng.uniform(0.01, 0.05))
    out = summary(values, misses)
    out["cpu_s"] = time.process_time() - cpu0
    out["frames"] = len(app.frames) - frames0
    out["presses"] = pressed
    return out


@dataclass
class Window:
    """CPU of this process over a wall-clock window, in % of one core."""

    wall: float = 0.0
    cpu: float = 0.0
    frames: int = 0
    app: Any = None
    _start: float = field(default=0.0, repr=False)

    def __enter__(self) -> Window:
        self._start, self.cpu = time.perf_counter(), time.process_time()
        self.frames = len(self.app.frames) if self.app is not None else 0
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._start
        self.cpu = time.process_time() - self.cpu
        if self.app is not None:
            self.frames = len(self.app.frames) - self.frames

    @property
    def pct(self) -> float:
        return 100 * self.cpu / self.wall if self.wall else 0.0


def per_press(keys: dict[str, Any], idle_pct: float) -> dict[str, Any]:
    """CPU and frames per press, the idle share of the window taken out."""
    wall_s = keys["n"] * (keys.get("median_ms", 0) / 1000 + 0.03) if keys.get("n") else 0
    presses = max(keys.get("presses", 0), 1)
    cpu = max(0.0, keys["cpu_s"] - idle_pct / 100 * wall_s)
    return {"cpu_ms_per_press": round(1000 * cpu / presses, 1),
            "frames_per_press": round(keys["frames"] / presses, 2)}


async def refresher(app: Any, states: list[BoxState], period: float) -> None:
    """Every box gets its next epoch each `period` seconds: the floors rewrite their rows,
    the panel gets new snapshots as from its watchers."""
    epoch = max((r.current_epoch or 0) for s in states for r in s.runs)
    current = list(states)
    while True:
        epoch += 1
        current = [advanced(s, epoch) for s in current]
        for state in current:
            if isinstance(app, FloorApp):
                app.show_box(state)
            else:
                app.runtime.box_updated(state)  # as from its watchers
        await asyncio.sleep(period)


async def measure(make: Callable[[], Any], states: list[BoxState], args: argparse.Namespace,
                  rng: random.Random) -> dict[str, Any]:
    """One app: idle CPU, keys idle, keys while every box refreshes every second."""
    rows = sum(len(s.runs) for s in states)
    rss_before = vm_kib("VmRSS")
    start = time.perf_counter()
    app = make()
    out: dict[str, Any] = {}
    shown: list[float] = []
    driven = Driven(app)

    def first_rows(now: float) -> bool:
        """Every row listed and the top one drawn: the floor of "first run on screen"."""
        order = driven.order()
        if len(order) == rows and driven.shows(order[0]):
            shown.append(now)
            return True
        return False

    app.frame_hooks.append(first_rows)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.perf_counter() + 60
        while not shown:
            assert time.perf_counter() < deadline, "the rows never appeared"
            await pilot.pause(0.01)
        out["first_rows_s"] = round(shown[0] - start, 3)
        await asyncio.sleep(1.0)
        out["rss_over_no_app_mib"] = round((vm_kib("VmRSS") - rss_before) / 1024, 1)
        with Window(app=app) as idle:
            await asyncio.sleep(args.idle)
        out["idle_cpu_pct"] = round(idle.pct, 2)
        out["idle_frames_per_s"] = round(idle.frames / idle.wall, 2)
        keys = await key_latencies(app, args.presses, args.key_budget, rng)
        out["keys_idle"] = {**keys, **per_press(keys, idle.pct)}
        task = asyncio.create_task(refresher(app, states, 1.0))
        try:
            await asyncio.sleep(1.5)
            with Window(app=app) as load:
                await asyncio.sleep(args.load_window)
            out["load_cpu_pct"] = round(load.pct, 2)
            with LoopLag() as lag:
                await asyncio.sleep(getattr(args, "lag_window", 3.0))
            out["load_loop_lag"] = lag.summary()
            keys = await key_latencies(app, args.presses, args.key_budget, rng)
            out["keys_load"] = {**keys, **per_press(keys, load.pct)}
        finally:
            task.cancel()
    return out


def median_of(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Field by field medians of repeated key phases (numbers only)."""
    keys = {k for r in results for k, v in r.items() if isinstance(v, int | float)}
    return {k: round(statistics.median(r[k] for r in results if k in r), 2) for k in keys}


def ratios(panel: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 1) if a is not None and b else None

    return {
        "idle_cpu": ratio(panel["idle_cpu_pct"], floor["idle_cpu_pct"]),
        "keys_idle_p95": ratio(panel["keys_idle"].get("p95_ms"),
                               floor["keys_idle"].get("p95_ms")),
        "keys_load_p95": ratio(panel["keys_load"].get("p95_ms"),
                               floor["keys_load"].get("p95_ms")),
        "cpu_per_press": ratio(panel["keys_idle"]["cpu_ms_per_press"],
                               floor["keys_idle"]["cpu_ms_per_press"]),
    }


def machine() -> dict[str, Any]:
    return {"nproc": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "textual": metadata.version("textual"), "platform": platform.platform(),
            "date": datetime.now(UTC).isoformat(),
            "loadavg": [round(v, 2) for v in os.getloadavg()]}


def print_table(results: dict[str, list[dict[str, Any]]]) -> None:
    """Medians over the repeats, one column per app."""
    names = list(results)

    def med(name: str, *path: str) -> float | None:
        values = []
        for result in results[name]:
            value: Any = result
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                values.append(value)
        return statistics.median(values) if values else None

    rows = [("idle CPU, % of a core", ("idle_cpu_pct",)),
            ("idle frames per second", ("idle_frames_per_s",)),
            ("key -> frame idle, median ms", ("keys_idle", "median_ms")),
            ("key -> frame idle, p95 ms", ("keys_idle", "p95_ms")),
            ("CPU per key press idle, ms", ("keys_idle", "cpu_ms_per_press")),
            ("frames per key press idle", ("keys_idle", "frames_per_press")),
            ("CPU under a 1 s refresh of every box, %", ("load_cpu_pct",)),
            ("key -> frame under refresh, median ms", ("keys_load", "median_ms")),
            ("key -> frame under refresh, p95 ms", ("keys_load", "p95_ms")),
            ("CPU per key press under refresh, ms", ("keys_load", "cpu_ms_per_press")),
            ("frames per key press under refresh", ("keys_load", "frames_per_press"))]
    print(f"  {'':<42}" + "".join(f"{n:>14}" for n in names))
    for label, path in rows:
        cells = []
        for name in names:
            value = med(name, *path)
            cells.append(f"{value:>14.2f}" if value is not None else f"{'-':>14}")
        print(f"  {label:<42}" + "".join(cells))
    if "panel" in results and "line floor" in results:
        print("  panel / line floor (medians): " + ", ".join(
            f"{k} x{v}" for k, v in ratios(
                {"idle_cpu_pct": med("panel", "idle_cpu_pct"),
                 "keys_idle": {"p95_ms": med("panel", "keys_idle", "p95_ms"),
                               "cpu_ms_per_press": med("panel", "keys_idle",
                                                       "cpu_ms_per_press")},
                 "keys_load": {"p95_ms": med("panel", "keys_load", "p95_ms")}},
                {"idle_cpu_pct": med("line floor", "idle_cpu_pct"),
                 "keys_idle": {"p95_ms": med("line floor", "keys_idle", "p95_ms"),
                               "cpu_ms_per_press": med("line floor", "keys_idle",
                                                       "cpu_ms_per_press")},
                 "keys_load": {"p95_ms": med("line floor", "keys_load", "p95_ms")}}
            ).items()))


async def compare(args: argparse.Namespace, states: list[BoxState], fleet: FleetConfig,
                  make_panel: Callable[[], Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every app `repeats` times, interleaved (so machine load hits them alike)."""
    panel = panel_class()
    makers: dict[str, Callable[[], Any]] = {
        "panel": make_panel or (lambda: panel(fleet, states=states, live=False,
                                              clock=lambda: NOW)),
        "line floor": lambda: LineFloor(states),
        "static floor": lambda: StaticFloor(states),
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in makers}
    rng = random.Random(7)
    for repeat in range(args.repeats):
        for name, make in makers.items():
            print(f"  repeat {repeat + 1}/{args.repeats}: {name} ...", flush=True)
            results[name].append(await measure(make, states, args, rng))
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--presses", type=int, default=150, help="j/k presses per phase")
    parser.add_argument("--key-budget", type=float, default=20.0,
                        help="at most this many seconds of presses per phase")
    parser.add_argument("--idle", type=float, default=10.0, help="idle CPU window, seconds")
    parser.add_argument("--load-window", type=float, default=5.0,
                        help="CPU window under refresh, seconds")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="runs per box")
    parser.add_argument("--epochs", type=int, default=2000, help="epochs of history per run")
    add_arguments(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    states = synthetic_states(args.boxes, args.runs, args.epochs)
    fleet = fleet_config(args.boxes)
    print(f"{args.boxes} boxes x {args.runs} runs x {args.epochs} epochs folded in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    results = asyncio.run(compare(args, states, fleet))
    info = machine()
    print()
    print(f"gpurent-tui panel against Textual's floor, {info['date']}")
    print(f"machine: nproc {info['nproc']}, python {info['python']}, textual "
          f"{info['textual']}, load average now {info['loadavg']}")
    print(code_line(code_under_test()))
    print(f"{args.boxes} boxes x {args.runs} runs, headless {SIZE[0]}x{SIZE[1]}, medians of "
          f"{args.repeats} interleaved repeats, {args.presses} presses per phase")
    print_table(results)
    print(json.dumps({"benchmark": "gpurent-tui/floor", "machine": info,
                      "code": code_under_test(), "args": vars(args), "results": results},
                     separators=(",", ":"), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
