"""What the panel itself costs: idle CPU, key-to-screen latency, memory, start-up time.

Why: the panel stays open for days next to the training jobs' terminals, on a
laptop that runs everything else too. It must cost next to nothing while
nothing changes, answer a key within a frame or two even while every box is
refreshing, hold long histories without growing without bound, and open
fast. refresh.py measures the watch core alone; this script measures the
real Textual app (`GpurentApp`) on top of it, headless, with real sshd boxes.

Setup (as refresh.py): N OpenSSH servers on 127.0.0.1, each with R
LibreYOLO-shaped runs of E epochs of history (metrics.jsonl lines of real
LibreYOLO shape, every float full precision), every sshd with an empty HOME.
Then, in this order:

0. parsing and folding alone (no app, no SSH, a few seconds): one box's answers
   built by the probe from its run files and timed as the loop's step that
   decodes and folds each (the first look, every answer the history streams in,
   and, for contrast, one answer of up to 1 MiB a run), so the "loop never held
   over 20 ms by parsing or folding" target is measured apart from the GC and
   Textual's work that share the same steps in the live app;
1. one live app (`GpurentApp(fleet)`, refresh 5 s): start-up to the first
   frame, the first run on screen, every run on screen; RSS before and after
   the whole history is loaded; idle CPU over a window where no run changes;
   key-to-screen latency of j/k; then the same under load: every run writes
   one epoch per second (from a thread, as LibreYOLO's own process would) and
   every box is poked right after, so all 20 refresh together each second (a
   stress case: real epochs take minutes);
2. fixed snapshots (`GpurentApp(fleet, states=..., live=False)`) of that
   same loaded fleet: start-up to the first frame, and Textual's own idle CPU;
3. tracemalloc of the BoxState snapshots and of the panel's widgets;
4. Textual's floor over the same loaded runs (benchmarks/floor.py: one line-API
   view, one Static per run), measured the same way, interleaved;
5. a second fleet of --big-boxes (100) boxes with short histories: the watch
   core's refresh round alone (BoxWatchers, no app), the live panel's round
   (poke -> every new epoch held), key -> frame idle and under a 1 s refresh,
   and the floors over those runs;
6. the CLI's start-up (`python -m tui --help`, `import tui.app`) in subprocesses.

It ends with the issue's targets in one table: the panel, both floors, the
ratio to the line-API floor, the target and whether it holds in this run, with
the load average at start and end. Each fleet's loop steps are set beside the
floors over that same fleet (20 boxes, then 100). On a shared machine only the side-by-side
figures and the ratios mean much; absolute times move with the load.

Key-to-screen latency is measured from the moment a Key event is handed to
the app's driver (as a terminal's input thread does) until the first frame the
compositor renders in which the cursor is on the new row and the row is visible,
encoded to terminal escape codes (headless mode skips that encoding; this
script does it so the figure includes it). Not included: the terminal
emulator and the tty write. The `pilot.press` + `pilot.pause()` figure is also
given; it includes Pilot's idle detection (20 ms sleeps until the process
looks idle), so it is an upper bound that measures the harness as much as
the app. Each latency phase stops after --presses or --key-budget seconds.

CPU is in % of one core, from this process's CPU seconds (the SSH client
included) and, apart, the boxes' sshd and probe processes. On a real fleet the
boxes' share runs on the boxes; here it competes with the panel for the same
cores, as does anything else running on the machine ("others", from
/proc/stat): a warning is printed when that was significant.

    python benchmarks/panel.py [--quick] [--boxes 20] [--runs 2] [--epochs 2000]
                               [--big-boxes 100] [--presses 200] [--profile SECONDS]

A full run (the defaults) takes about 10-11 minutes on 2 cores (616 s with
--profile 10 on 2026-12-03); --quick (about 6 minutes) takes fewer presses, one repeat and shorter
windows; --profile adds cProfile of idle at 20 boxes and of key presses at 100
boxes under a 1 s refresh, and every phase names what ran in the event loop's
longest steps.

Only 127.0.0.1; every sshd is stopped and the temp dir removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pickle
import platform
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

import floor  # noqa: E402
from _fleet import (  # noqa: E402
    Run,
    advance_all,
    code_under_test,
    fleet_config,
    machine_busy_seconds,
    make_runs,
    pct,
    sshd_pids,
    start_servers,
    tree_cpu_seconds,
    vm_kib,
)
from floor import LoopLag  # noqa: E402
from refresh import full_refresh  # noqa: E402
from rich.console import RenderableType  # noqa: E402
from support.sshd import Sshd, make_keypair  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402
from textual.message import Message  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.screen import Screen  # noqa: E402

import tui  # noqa: E402
from tui.app import GpurentApp  # noqa: E402
from tui.messages import BoxUpdated  # noqa: E402
from tui.model.box import (  # noqa: E402
    BoxState,
    Connection,
    fold_answer,
    needs_more,
    probe_request,
)
from tui.model.config import FleetConfig  # noqa: E402
from tui.onbox import probe as probe_script  # noqa: E402
from tui.remote.hostkeys import host_key_store  # noqa: E402
from tui.remote.session import decode_answer  # noqa: E402
from tui.remote.watch import STREAM_BUDGET, STREAM_CAP, BoxWatcher  # noqa: E402
from tui.screens.fleet import FleetScreen  # noqa: E402
from widgets.fleet_list import RunKey  # noqa: E402

SIZE = (160, 48)
# --quick: what changes (an option given explicitly is kept).
QUICK: dict[str, Any] = {"presses": 80, "repeats": 1, "idle": 10.0, "settle": 2.0,
                         "load_window": 5.0, "lag_window": 5.0, "baseline": 0.0,
                         "startups": 1, "cli_repeats": 2, "floor_idle": 3.0,
                         "pilot_presses": 0, "big_rounds": 5, "big_idle": 5.0,
                         "key_budget": 15.0}
FrameHook = Callable[[float], bool]


# --- the app under test, with a frame clock --------------------------------------


class BenchApp(GpurentApp):
    """The real panel, plus a timestamp for every frame and a count of box updates.

    Nothing of the panel is changed: `_display` still runs as shipped; in
    headless mode Textual skips encoding the frame for the terminal, so it is
    done here, to count what a real terminal session pays.
    """

    def __init__(self, fleet: FleetConfig, **kwargs: Any) -> None:
        super().__init__(fleet, **kwargs)
        self.frames: list[float] = []
        self.frame_hooks: list[FrameHook] = []  # called after each frame; True removes it
        self.box_updates = 0

    def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
        if isinstance(renderable, CompositorUpdate) and self.is_headless:
            renderable.render_segments(self.console)
        super()._display(screen, renderable)
        if renderable is not None:
            now = time.perf_counter()
            self.frames.append(now)
            if self.frame_hooks:
                self.frame_hooks = [h for h in self.frame_hooks if not h(now)]

    def post_message(self, message: Message) -> bool:
        if isinstance(message, BoxUpdated):
            self.box_updates += 1
        return super().post_message(message)


def fleet_screen(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


def run_rows(app: GpurentApp) -> list[RunKey]:
    """The runs on the fleet list, top to bottom (none before the screen is composed)."""
    if not app.screen_stack or not fleet_screen(app).is_mounted:
        return []
    return fleet_screen(app).fleet_list.order


def on_screen(app: GpurentApp, key: RunKey) -> bool:
    """Whether the run is the cursor's and inside the scrolled window."""
    screen = fleet_screen(app)
    return screen.selected == key and screen.fleet_list.is_visible(key)


def fully_loaded(states: Sequence[BoxState], runs: dict[str, list[Run]]) -> bool:
    """Every box answered and holds every epoch of every run written so far."""
    for state in states:
        expected = {str(r.path): r.epoch for r in runs[state.name]}
        if state.connection is not Connection.OK or len(state.runs) != len(expected):
            return False
        for run in state.runs:
            epoch = expected.get(run.path)
            if epoch is None or run.current_epoch != epoch or len(run.history) != epoch:
                return False
    return True


async def until(app: GpurentApp, check: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait for a condition; a panel that crashed (Textual keeps its exception) ends the run."""
    deadline = time.perf_counter() + timeout
    while not check():
        crash = getattr(app, "_exception", None)
        if crash is not None:
            raise SystemExit(f"the panel crashed while waiting for {what}: {crash!r}")
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.01)


# --- measuring -------------------------------------------------------------------


def mib(kib: float) -> float:
    return round(kib / 1024, 1)


def latency_summary(values: Sequence[float], misses: int) -> dict[str, Any]:
    if not values:
        return {"n": 0, "misses": misses}
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "misses": misses, "median_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 95), 1), "max_ms": round(max(ms), 1),
            "min_ms": round(min(ms), 1)}


@dataclass
class CpuWindow:
    """CPU of this process and of the boxes' sshd trees over a wall-clock window."""

    app: BenchApp
    sshd_pids: Sequence[int]
    start: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    boxes: float = 0.0
    frames: int = 0
    updates: int = 0
    machine: float = 0.0

    def __enter__(self) -> CpuWindow:
        self.start, self.cpu = time.perf_counter(), time.process_time()
        self.boxes = tree_cpu_seconds(self.sshd_pids)
        self.machine = machine_busy_seconds()
        self.frames, self.updates = len(self.app.frames), self.app.box_updates
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu
        self.boxes = tree_cpu_seconds(self.sshd_pids) - self.boxes
        self.machine = machine_busy_seconds() - self.machine
        self.frames = len(self.app.frames) - self.frames
        self.updates = self.app.box_updates - self.updates

    def summary(self, harness_cpu: float = 0.0) -> dict[str, Any]:
        """Percent of one core; harness_cpu (the benchmark's own writer) is taken out."""
        return {"wall_s": round(self.wall, 1),
                "app_cpu_pct": round(100 * (self.cpu - harness_cpu) / self.wall, 2),
                "boxes_cpu_pct": round(100 * self.boxes / self.wall, 2),
                # Whatever else ran on this machine meanwhile (other people's tests...).
                "others_cpu_pct": round(100 * max(0.0, self.machine - self.cpu - self.boxes)
                                        / self.wall, 1),
                "frames_per_s": round(self.frames / self.wall, 2),
                "box_updates": self.updates,
                "box_updates_per_box_s": round(self.updates / len(self.app.watchers)
                                               / self.wall, 3) if self.app.watchers else 0}


async def key_phase(app: BenchApp, args: argparse.Namespace, rng: random.Random,
                    background_pct: float) -> dict[str, Any]:
    """The shared harness (benchmarks/floor.py): key -> frame, CPU and frames per press."""
    keys = await floor.key_latencies(app, args.presses, args.key_budget, rng)
    return {**keys, **floor.per_press(keys, background_pct)}


async def pilot_latencies(pilot: Pilot[None], app: BenchApp, presses: int,
                          budget: float) -> dict[str, Any]:
    """`await pilot.press(key); await pilot.pause()` wall time: what a test would see."""
    driven = floor.Driven(app)
    deadline = time.perf_counter() + budget
    values: list[float] = []
    misses = 0
    direction = 1
    for _ in range(presses):
        if time.perf_counter() > deadline:
            break
        order = driven.order()
        index = order.index(driven.selected()) if driven.selected() in order else 0
        if not 0 <= index + direction < len(order):
            direction = -direction
        target = order[index + direction]
        start = time.perf_counter()
        await pilot.press("j" if direction > 0 else "k")
        await pilot.pause()
        elapsed = time.perf_counter() - start
        if driven.selected() == target:
            values.append(elapsed)
        else:
            misses += 1
    return latency_summary(values, misses)


def profile_summary(profile: cProfile.Profile, seconds: float, top: int = 12) -> dict[str, Any]:
    """Own CPU time by package, and the functions with the most own time."""
    stats = pstats.Stats(profile)
    groups: dict[str, float] = {}
    rows = []
    ours = []
    screen_updates = 0.0
    for (filename, line, name), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        path = filename.replace("\\", "/")
        if filename.startswith("~") or filename.startswith("<"):
            group = "builtins"
        elif "/site-packages/" in path:
            group = path.split("/site-packages/")[1].split("/")[0].removesuffix(".py")
        elif path.startswith(str(REPO)):
            group = "gpurent (" + path[len(str(REPO)) + 1:].split("/")[0] + ")"
            if "/benchmarks/" not in path:
                ours.append((cum, calls, f"{path[len(str(REPO)) + 1:]}:{line}({name})"))
        elif "/asyncio/" in path:
            group = "asyncio"
        else:
            group = "stdlib"
        if path.endswith("textual/screen.py") and name == "_on_timer_update":
            screen_updates += cum
        groups[group] = groups.get(group, 0.0) + own
        rows.append((own, calls, f"{Path(filename).name}:{line}({name})"))
    rows.sort(reverse=True)
    ours.sort(reverse=True)
    return {"seconds": seconds,
            "screen_update_cum_ms": round(screen_updates * 1000, 1),
            "gpurent_cumulative": [{"cum_ms": round(c * 1000, 1), "calls": n, "where": w}
                                   for c, n, w in ours[:top]],
            "own_cpu_ms_by_package": {k: round(v * 1000, 1) for k, v in
                                      sorted(groups.items(), key=lambda kv: -kv[1])[:10]},
            "top_functions": [{"own_ms": round(o * 1000, 1), "calls": c, "where": w}
                              for o, c, w in rows[:top]]}


# --- phases ----------------------------------------------------------------------


@dataclass
class Writer:
    """Every run writes one epoch per tick in a thread (as LibreYOLO's own process would),
    then every box is poked; the thread's CPU is counted so it can be taken out."""

    runs: dict[str, list[Run]]
    cpu: float = 0.0
    ticks: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def advance_all(self) -> None:
        start = time.thread_time()
        for box_runs in self.runs.values():
            for run in box_runs:
                run.advance()
        with self.lock:
            self.cpu += time.thread_time() - start
            self.ticks += 1

    def cpu_so_far(self) -> float:
        with self.lock:
            return self.cpu

    async def loop(self, app: GpurentApp, period: float) -> None:
        start = time.perf_counter()
        tick = 0
        while True:
            await asyncio.to_thread(self.advance_all)
            for watcher in app.watchers.values():
                watcher.poke()
            tick += 1
            await asyncio.sleep(max(0.0, start + tick * period - time.perf_counter()))


async def live_phase(args: argparse.Namespace, fleet: FleetConfig, runs: dict[str, list[Run]],
                     sshd_pids: Sequence[int]) -> dict[str, Any]:
    """One live app: start-up, memory, idle CPU, latency idle and under load."""
    rng = random.Random(7)
    expected_rows = args.boxes * args.runs
    gc.collect()
    rss_before = vm_kib("VmRSS")
    marks: dict[str, float] = {}
    start = time.perf_counter()
    app = BenchApp(fleet)

    def first_frame(now: float) -> bool:
        marks["rss_first_frame"] = vm_kib("VmRSS")  # the empty panel: no box answered yet
        return True

    def first_data(now: float) -> bool:
        rows = run_rows(app)
        if rows and fleet_screen(app).fleet_list.is_visible(rows[0]):
            marks["first_data"] = now
            return True
        return False

    def all_data(now: float) -> bool:
        """Every history is in the app's state and every run is listed. Checked after each
        frame and every 10 ms besides: the last part of a history may change nothing that
        is drawn (the panel then paints no frame), so a frame alone cannot say when."""
        if "all_data" in marks:
            return True
        rows = run_rows(app)
        if fully_loaded(list(app.states.values()), runs) and len(rows) == expected_rows \
                and on_screen(app, rows[0]):
            marks["all_data"] = now
            return True
        return False

    app.frame_hooks += [first_frame, first_data, all_data]
    out: dict[str, Any] = {}
    completed = False
    try:
        async with app.run_test(size=SIZE) as pilot:
            completed = await measure_live(app, pilot, args, runs, sshd_pids, rng, marks,
                                           start, rss_before, out, all_data)
    except Exception as exc:
        # A panel that raises while it shuts down (a box update landing after the
        # screens are gone) is a finding, not a reason to lose every figure.
        if not completed:
            raise
        out["exit_error"] = f"{type(exc).__name__}: {exc}"
    return out


async def measure_live(app: BenchApp, pilot: Pilot[None], args: argparse.Namespace,
                       runs: dict[str, list[Run]], sshd_pids: Sequence[int], rng: random.Random,
                       marks: dict[str, float], start: float, rss_before: int,
                       out: dict[str, Any], loaded: FrameHook) -> bool:
    """The live app's measurements, in order; fills `out` and returns True when all done."""
    expected_rows = args.boxes * args.runs
    marks["run_test_entered"] = time.perf_counter()
    with LoopLag() as lag:
        await until(app, lambda: loaded(time.perf_counter()), args.load_timeout,
                    "every run's history")
    await pilot.pause()
    gc.collect()
    out["startup"] = {
        "first_frame_s": round(app.frames[0] - start, 3),
        "run_test_entered_s": round(marks["run_test_entered"] - start, 3),
        "first_run_on_screen_s": round(marks["first_data"] - start, 3),
        "all_history_on_screen_s": round(marks["all_data"] - start, 3),
        "loop_lag": lag.summary()}
    out["memory"] = {"rss_before_app_mib": mib(rss_before),
                     "rss_empty_panel_mib": mib(marks["rss_first_frame"]),
                     "rss_over_empty_panel_mib": mib(vm_kib("VmRSS") - marks["rss_first_frame"]),
                     "rss_loaded_mib": mib(vm_kib("VmRSS")),
                     "rss_delta_mib": mib(vm_kib("VmRSS") - rss_before),
                     "rss_peak_mib": mib(vm_kib("VmHWM")),
                     "ru_maxrss_mib": mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)}
    print(f"  loaded {expected_rows} runs x {args.epochs} epochs in "
          f"{marks['all_data'] - start:.1f} s; settling {args.settle:.0f} s, then "
          f"{args.idle:.0f} s idle ...", flush=True)

    await asyncio.sleep(args.settle)
    with CpuWindow(app, sshd_pids) as idle:
        await asyncio.sleep(args.idle)
    # Apart from the CPU window: waking every 5 ms costs CPU of its own.
    with LoopLag() as lag:
        await asyncio.sleep(args.lag_window)
    out["idle"] = {**idle.summary(), "loop_lag": lag.summary()}
    if args.profile > 0:
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        await asyncio.sleep(args.profile)
        profile.disable()
        out["idle_profile"] = profile_summary(profile, args.profile)

    idle_pct = 100 * idle.cpu / idle.wall
    out["keys_idle_repeats"] = []
    for repeat in range(args.repeats):
        print(f"  {args.presses} key presses idle ({repeat + 1}/{args.repeats}) ...",
              flush=True)
        with CpuWindow(app, sshd_pids) as keys:
            out["keys_idle_repeats"].append(await key_phase(app, args, rng, idle_pct))
        out["keys_idle_cpu"] = keys.summary()
    out["keys_idle"] = floor.median_of(out["keys_idle_repeats"])
    out["pilot_idle"] = await pilot_latencies(pilot, app, args.pilot_presses,
                                              args.pilot_budget)

    print(f"  {args.presses} key presses while every box refreshes every "
          f"{args.load_period:g} s and every run advances ...", flush=True)
    writer = Writer(runs)
    ticker = asyncio.create_task(writer.loop(app, args.load_period))
    try:
        await asyncio.sleep(2 * args.load_period)
        cpu0 = writer.cpu_so_far()
        with CpuWindow(app, sshd_pids) as load:  # no keys: what the refreshes cost
            await asyncio.sleep(args.load_window)
        with LoopLag() as lag:
            await asyncio.sleep(args.lag_window)
        harness = writer.cpu_so_far() - cpu0
        load_pct = 100 * load.cpu / load.wall  # the writer's thread included, as in keys
        out["keys_load_repeats"] = []
        for _ in range(args.repeats):
            with CpuWindow(app, sshd_pids) as keys:
                out["keys_load_repeats"].append(await key_phase(app, args, rng, load_pct))
        out["keys_load"] = floor.median_of(out["keys_load_repeats"])
        out["keys_load_cpu"] = keys.summary()
        out["pilot_load"] = await pilot_latencies(pilot, app, args.pilot_presses,
                                                  args.pilot_budget)
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
    out["load"] = {**load.summary(harness), "writer_cpu_s": round(harness, 3),
                   "epochs_written_per_run": writer.ticks, "loop_lag": lag.summary()}
    for watcher in app.watchers.values():
        watcher.poke()
    caught = time.perf_counter()
    await until(app, lambda: fully_loaded(list(app.states.values()), runs), 30.0,
                "the panel to catch up with the advanced runs")
    out["load"]["caught_up_after_s"] = round(time.perf_counter() - caught, 2)
    out["states"] = list(app.states.values())
    return True


async def fixed_phase(args: argparse.Namespace, fleet: FleetConfig, states: list[BoxState],
                      sshd_pids: Sequence[int]) -> dict[str, Any]:
    """`live=False` apps over the loaded snapshots: start-up (median of N), Textual idle."""
    expected_rows = args.boxes * args.runs
    first, full, entered = [], [], []
    idle: dict[str, Any] = {}
    for attempt in range(args.startups):
        gc.collect()
        marks: dict[str, float] = {}
        start = time.perf_counter()
        app = BenchApp(fleet, states=states, live=False)

        def all_rows(now: float, app: BenchApp = app, marks: dict[str, float] = marks) -> bool:
            rows = run_rows(app)
            if len(rows) == expected_rows and on_screen(app, rows[0]):
                marks["full"] = now
                return True
            return False

        app.frame_hooks.append(all_rows)
        async with app.run_test(size=SIZE):
            entered.append(time.perf_counter() - start)
            await until(app, partial(dict.__contains__, marks, "full"), 60,
                        "the fixed fleet on screen")
            first.append(app.frames[0] - start)
            full.append(marks["full"] - start)
            if attempt == 0 and args.baseline > 0:
                await asyncio.sleep(1.0)
                with CpuWindow(app, sshd_pids) as window:
                    await asyncio.sleep(args.baseline)
                idle = window.summary()
    return {"first_frame_s": round(statistics.median(first), 3),
            "all_rows_on_screen_s": round(statistics.median(full), 3),
            "run_test_entered_s": round(statistics.median(entered), 3),
            "samples": len(first), "first_frame_all_s": [round(v, 3) for v in first],
            "idle_textual_only": idle}


async def traced_memory(args: argparse.Namespace, fleet: FleetConfig,
                        states: list[BoxState]) -> dict[str, Any]:
    """tracemalloc of the loaded snapshots (rebuilt from a pickle, so every object is
    allocated while traced) and of a live=False panel's widgets over them."""
    blob = pickle.dumps(states)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        copy = pickle.loads(blob)
        gc.collect()
        snapshots = tracemalloc.get_traced_memory()[0] - base
        points = sum(len(r.history) for s in copy for r in s.runs)
        base = tracemalloc.get_traced_memory()[0]
        app = BenchApp(fleet, states=copy, live=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(app, lambda: len(run_rows(app)) == args.boxes * args.runs, 60,
                        "the traced panel")
            await pilot.pause()
            gc.collect()
            widgets = tracemalloc.get_traced_memory()[0] - base
            top = tracemalloc.take_snapshot().statistics("filename")[:5]
    finally:
        tracemalloc.stop()
    return {"snapshots_mib": round(snapshots / 2**20, 2), "epoch_points": points,
            "bytes_per_epoch_point": round(snapshots / points, 1) if points else None,
            "panel_widgets_mib": round(widgets / 2**20, 2),
            "top_files_while_panel_open": [
                {"file": str(s.traceback[0].filename).replace(str(REPO) + "/", ""),
                 "mib": round(s.size / 2**20, 2)} for s in top]}


def parse_fold_step(state: BoxState, request: dict[str, Any], refresh_seconds: float,
                    repeats: int = 3) -> tuple[BoxState, dict[str, Any], dict[str, Any]]:
    """One answer's step on the event loop, alone: decode (inflate + JSON) and fold.

    The probe builds the answer from the run files here (the box's work, not timed); the
    step is timed in this thread's CPU ms, the median of `repeats` (both are pure: the same
    answer folds into the same state each time)."""
    request = {**request, "gpu": False}  # no nvidia-smi here: not the step measured
    payload, _, _ = probe_script.answer_payload(request)
    decode_ms, fold_ms = [], []
    answer: dict[str, Any] = {}
    folded = state
    for _ in range(repeats):
        t0 = time.thread_time()
        answer = decode_answer(payload)
        t1 = time.thread_time()
        folded = fold_answer(state, answer, time.time(), refresh_seconds)
        t2 = time.thread_time()
        decode_ms.append((t1 - t0) * 1000)
        fold_ms.append((t2 - t1) * 1000)
    history = sum(len(str((r.get("metrics") or {}).get("text") or ""))
                  for r in answer.get("runs") or [] if isinstance(r, dict))
    step = {"answer_kib": round(len(json.dumps(answer, separators=(",", ":"))) / 1024, 1),
            "history_kib": round(history / 1024, 1),
            "compressed_kib": round(len(payload) / 1024, 1),
            "decode_ms": round(statistics.median(decode_ms), 2),
            "fold_ms": round(statistics.median(fold_ms), 2)}
    step["step_ms"] = round(step["decode_ms"] + step["fold_ms"], 2)
    return folded, answer, step


def parse_fold_phase(root: Path, refresh_seconds: float) -> dict[str, Any]:
    """What parsing and folding alone cost per loop step, on one box's real run files
    (--runs runs of --epochs epochs), without the app, SSH or the rest of the heap: the
    answers the panel's watcher asks for (a first look with no history, then the history
    in answers of STREAM_BUDGET bytes, STREAM_CAP per run), and for contrast the same box
    in one answer of up to 1 MiB per run (the probe's default read, what a one-shot look
    parsed in one step). Garbage collection runs as it would, but over this small heap;
    in the panel a gen2 collection walks every object the panel holds."""
    roots = (str(root),)
    state = BoxState(name="parse-fold", refresh_seconds=refresh_seconds)
    state, _, first = parse_fold_step(state, probe_request(state, roots, metrics_budget=0),
                                      refresh_seconds)
    steps = []
    for _ in range(100_000):  # ends when the history is in (each answer moves the cursors)
        request = probe_request(state, roots, metrics_cap=STREAM_CAP,
                                metrics_budget=STREAM_BUDGET)
        state, answer, step = parse_fold_step(state, request, refresh_seconds)
        steps.append(step)
        if not needs_more(answer):
            break
    whole = BoxState(name="parse-fold", refresh_seconds=refresh_seconds)
    _, _, unbounded = parse_fold_step(whole, probe_request(whole, roots), refresh_seconds)
    worst = max(steps, key=lambda s: s["step_ms"])
    return {"first_look": first, "streamed_answers": len(steps),
            "streamed_median_step_ms": round(statistics.median(s["step_ms"] for s in steps), 2),
            "streamed_worst": worst,
            "points_held": sum(len(r.history) for r in state.runs),
            "unbounded": unbounded}


async def floor_phase(args: argparse.Namespace, states: list[BoxState]
                      ) -> dict[str, list[dict[str, Any]]]:
    """Textual's floor over the same loaded runs, measured the same way (benchmarks/floor.py):
    one line-API view and one Static per run, each `repeats` times, interleaved."""
    makers = {"line floor": lambda: floor.LineFloor(states),
              "static floor": lambda: floor.StaticFloor(states)}
    settings = argparse.Namespace(**{**vars(args), "idle": args.floor_idle})
    rng = random.Random(11)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in makers}
    for repeat in range(args.repeats):
        for name, make in makers.items():
            print(f"  Textual's floor: {name} ({repeat + 1}/{args.repeats}) ...", flush=True)
            results[name].append(await floor.measure(make, states, settings, rng))
    return results


def cli_startup(repeats: int) -> dict[str, Any]:
    """Wall time of the CLI in fresh interpreters, and where `import tui.app` spends it."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}

    def wall(*argv: str) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, *argv], cwd=REPO, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        return round(statistics.median(times), 3)

    bare = wall("-c", "pass")
    help_ = wall("-m", "tui", "--help")
    app_import = wall("-c", "import tui.app")
    trace = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tui.app"],
                           cwd=REPO, env=env, check=True, capture_output=True, text=True).stderr
    by_package: dict[str, int] = {}
    for line in trace.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        package = parts[2].strip().split(".")[0]
        by_package[package] = by_package.get(package, 0) + int(parts[0])
    top = sorted(by_package.items(), key=lambda kv: -kv[1])
    return {"python_bare_s": bare, "tui_help_s": help_, "import_tui_app_s": app_import,
            "repeats": repeats,
            "import_tui_app_self_ms_by_package": {n: round(us / 1000, 1) for n, us in top[:8]},
            "import_tui_app_total_ms": round(sum(by_package.values()) / 1000, 1)}


def panel_code() -> dict[str, Any]:
    """The commit measured, uncommitted edits, and which tui package was imported."""
    return {**code_under_test(), "tui_from": str(Path(tui.__file__).parent)}


# --- 100 boxes ------------------------------------------------------------------


def round_summary(walls: Sequence[float]) -> dict[str, Any]:
    ms = [w * 1000 for w in walls]
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 95), 1), "max_ms": round(max(ms), 1)}


async def core_rounds(fleet: FleetConfig, runs: dict[str, list[Run]], pids: Sequence[int],
                      rounds: int) -> dict[str, Any]:
    """The watch core alone (a BoxWatcher per box, kept probes, no app): a cold load, then
    rounds in which every run writes an epoch and every box is refreshed at once. The
    floor of the panel's refresh round: what SSH and the probes take."""
    store = host_key_store(fleet)
    watchers = [BoxWatcher(box, fleet, store=store) for box in fleet.boxes]
    try:
        cold = await full_refresh(watchers, pids, catch_up=True)
        walls = []
        for _ in range(rounds):
            await asyncio.to_thread(advance_all, runs)
            walls.append((await full_refresh(watchers, pids)).wall)
    finally:
        await asyncio.gather(*(w.close() for w in watchers))
    return {"cold_s": round(cold.wall, 2), **round_summary(walls)}


async def panel_rounds(app: BenchApp, runs: dict[str, list[Run]], rounds: int
                       ) -> dict[str, Any]:
    """The live panel's refresh round: every run writes an epoch, every box is poked, until
    the app holds every new epoch of every run (what the user sees move)."""
    walls = []
    for _ in range(rounds):
        await asyncio.to_thread(advance_all, runs)
        start = time.perf_counter()
        for watcher in app.watchers.values():
            watcher.poke()
        await until(app, lambda: fully_loaded(list(app.states.values()), runs), 60.0,
                    "a refresh round of every box")
        walls.append(time.perf_counter() - start)
    return round_summary(walls)


async def hundred_phase(args: argparse.Namespace, tmp: Path, servers: list[Sshd]
                        ) -> dict[str, Any]:
    """The same measures at `--big-boxes` boxes (short histories: what grows here is the
    number of boxes): the watch core's refresh round, the live panel's round, key -> frame
    idle and under a 1 s refresh, and Textual's floor over the same runs."""
    n = args.big_boxes
    big = tmp / "big"
    key = make_keypair(big / "client", "id_ed25519")
    host = make_keypair(big / "hostkey", "ssh_host_ed25519_key")  # key generation: not measured
    t0 = time.perf_counter()
    first = len(servers)
    start_servers(big, n, key, servers, host_key=host)
    mine = servers[first:]
    pids = sshd_pids(mine)
    for pid in pids:
        os.setpriority(os.PRIO_PROCESS, pid, args.box_nice)
    roots, runs = make_runs(big, n, args.runs, args.big_epochs, time.time())
    fleet = fleet_config(big, mine, key, roots, "big")
    print(f"{n} sshd started and {n * args.runs} runs x {args.big_epochs} epochs written in "
          f"{time.perf_counter() - t0:.1f} s; the watch core alone ...", flush=True)
    out: dict[str, Any] = {"boxes": n, "epochs": args.big_epochs}
    try:
        out["core_round"] = await core_rounds(fleet, runs, pids, args.big_rounds)
        print(f"  the live panel at {n} boxes ...", flush=True)
        rng = random.Random(13)
        app = BenchApp(fleet)
        start = time.perf_counter()
        async with app.run_test(size=SIZE):
            await until(app, lambda: fully_loaded(list(app.states.values()), runs)
                        and len(run_rows(app)) == n * args.runs, args.load_timeout,
                        f"{n} boxes loaded")
            out["all_loaded_s"] = round(time.perf_counter() - start, 2)
            await asyncio.sleep(args.settle)
            with CpuWindow(app, pids) as idle:
                await asyncio.sleep(args.big_idle)
            out["idle"] = idle.summary()
            out["keys_idle"] = await key_phase(app, args, rng, 100 * idle.cpu / idle.wall)
            with LoopLag() as lag:
                out["panel_round"] = await panel_rounds(app, runs, args.big_rounds)
            out["panel_round"]["loop_lag"] = lag.summary()
            print(f"  {n} boxes refreshed every {args.load_period:g} s, key presses ...",
                  flush=True)
            writer = Writer(runs)
            ticker = asyncio.create_task(writer.loop(app, args.load_period))
            try:
                await asyncio.sleep(2 * args.load_period)
                with CpuWindow(app, pids) as load:
                    await asyncio.sleep(args.load_window)
                out["load"] = load.summary()
                out["keys_load"] = await key_phase(app, args, rng, 100 * load.cpu / load.wall)
                with LoopLag() as lag:
                    await asyncio.sleep(args.lag_window)
                out["load"]["loop_lag"] = lag.summary()
                if args.profile > 0:  # where a key press and the refreshes go at n boxes
                    profile = cProfile.Profile(time.process_time)
                    profile.enable()
                    await key_phase(app, argparse.Namespace(
                        **{**vars(args), "key_budget": args.profile}), rng, 0.0)
                    profile.disable()
                    out["load_profile"] = profile_summary(profile, args.profile)
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            states = list(app.states.values())
    finally:
        for server in mine:
            with contextlib.suppress(Exception):
                server.stop()
    if args.floor:
        settings = argparse.Namespace(**{**vars(args), "idle": args.floor_idle, "repeats": 1})
        out["floors"] = await floor_phase(settings, states)
    return out


# --- the fleet -------------------------------------------------------------------


async def benchmark(args: argparse.Namespace, tmp: Path, servers: list[Sshd]) -> dict[str, Any]:
    started = time.time()
    key = make_keypair(tmp / "client", "id_ed25519")
    t0 = time.perf_counter()
    start_servers(tmp, args.boxes, key, servers)
    print(f"{args.boxes} sshd started in {time.perf_counter() - t0:.1f} s; writing "
          f"{args.boxes * args.runs} runs x {args.epochs} epochs ...", flush=True)
    t0 = time.perf_counter()
    roots, runs = make_runs(tmp, args.boxes, args.runs, args.epochs, started)
    metrics_bytes = (roots[0] / "yolox-n-0" / "metrics.jsonl").stat().st_size
    print(f"  written in {time.perf_counter() - t0:.1f} s ({metrics_bytes / 2**20:.1f} MiB of "
          f"metrics.jsonl per run); live panel ...", flush=True)
    fleet = fleet_config(tmp, servers, key, roots, "panel")
    print("  parsing and folding one box's answers alone (no app, no SSH) ...", flush=True)
    parse_fold = parse_fold_phase(roots[0], fleet.refresh_seconds)
    pids = sshd_pids(servers)
    for pid in pids:
        # On a real fleet the boxes' CPU is theirs: here they share this machine's cores,
        # so they run at a lower priority than the panel (their probes inherit it).
        os.setpriority(os.PRIO_PROCESS, pid, args.box_nice)
    live = await live_phase(args, fleet, runs, pids)
    states = live.pop("states")
    print("  fixed snapshots (live=False) ...", flush=True)
    fixed = await fixed_phase(args, fleet, states, pids)
    traced = await traced_memory(args, fleet, states) if args.tracemalloc else {}
    floors = await floor_phase(args, states) if args.floor else {}
    for server in servers:  # done with these boxes: the next phase starts its own
        with contextlib.suppress(Exception):
            server.stop()
    hundred = await hundred_phase(args, tmp, servers) if args.big_boxes else {}
    return {**live, "fixed": fixed, "traced": traced, "floors": floors, "hundred": hundred,
            "parse_fold": parse_fold,
            "metrics_line_bytes": round(metrics_bytes / args.epochs, 1),
            "box_python": states[0].python or "?"}


# --- report ----------------------------------------------------------------------


def print_profile(label: str, prof: dict[str, Any]) -> None:
    print(f"  cProfile of {prof['seconds']:g} s {label}, own CPU ms by package: "
          + ", ".join(f"{k} {v}" for k, v in prof["own_cpu_ms_by_package"].items()))
    print(f"  Textual screen updates (layout + render) {prof['screen_update_cum_ms']} ms "
          "cumulative; own time by function:")
    for item in prof["top_functions"][:6]:
        print(f"      {item['own_ms']:>8} ms {item['calls']:>7} calls  {item['where']}")
    print("  cumulative CPU in the panel's own code:")
    for item in prof["gpurent_cumulative"][:8]:
        print(f"      {item['cum_ms']:>8} ms {item['calls']:>7} calls  {item['where']}")


def print_longest_steps(label: str, lag: dict[str, Any]) -> None:
    for step in lag.get("longest_steps", []):
        print(f"      {label}: {step['cpu_ms']:>6} ms  {step['ran']}")


def print_report(r: dict[str, Any], args: argparse.Namespace) -> None:
    def row(label: str, value: object, note: str = "") -> None:
        print(f"  {label:<46} {value!s:>14}  {note}")

    def lat(label: str, d: dict[str, Any]) -> None:
        if d.get("n"):
            value = f"{d['median_ms']:.1f} / {d['p95_ms']:.1f}"
            row(label, value, f"ms median / p95; max {d['max_ms']:.1f}, n {d['n']:.0f}, "
                f"misses {d['misses']:.0f}")

    idle, load, mem, st, fx = r["idle"], r["load"], r["memory"], r["startup"], r["fixed"]
    print("1. idle, refresh every 5 s, no run changes (% of one core)")
    row("panel process (Textual + SSH client)", f"{idle['app_cpu_pct']:.2f} %",
        f"over {idle['wall_s']} s")
    row("boxes (sshd + probe processes)", f"{idle['boxes_cpu_pct']:.2f} %",
        f"other processes on this machine meanwhile: {idle['others_cpu_pct']} %")
    row("frames painted per second", idle["frames_per_s"])
    row("box updates in the window", idle["box_updates"],
        f"{idle['box_updates_per_box_s']} per box per s")
    if fx["idle_textual_only"]:
        base = fx["idle_textual_only"]
        row("same fleet live=False (no watchers, no tick)", f"{base['app_cpu_pct']:.2f} %",
            f"{base['frames_per_s']} frames/s, over {base['wall_s']} s")
    if "idle_profile" in r:
        print_profile("idle", r["idle_profile"])
    print(f"2. key -> frame showing the cursor on the new row ({args.presses} presses of j/k, "
          f"medians of {args.repeats} repeats)")
    lat("idle", r["keys_idle"])
    row("  CPU per key press, idle; frames per press",
        f"{r['keys_idle']['cpu_ms_per_press']:.1f} ms", f"{r['keys_idle']['frames_per_press']}")
    ki = r["keys_idle_cpu"]
    row("  panel CPU while pressing keys, idle", f"{ki['app_cpu_pct']:.1f} %",
        f"{ki['frames_per_s']} frames/s; others {ki['others_cpu_pct']} %")
    lat(f"boxes refreshed every {args.load_period:g} s, runs advancing", r["keys_load"])
    row("  CPU per key press, under load; frames per press",
        f"{r['keys_load']['cpu_ms_per_press']:.1f} ms", f"{r['keys_load']['frames_per_press']}")
    kl = r["keys_load_cpu"]
    row("  panel CPU while pressing keys, under load", f"{kl['app_cpu_pct']:.1f} %",
        f"boxes {kl['boxes_cpu_pct']:.1f} %, {kl['frames_per_s']} frames/s; "
        f"others {kl['others_cpu_pct']} %")
    row("  panel CPU under load, no keys", f"{load['app_cpu_pct']:.1f} %",
        f"over {load['wall_s']} s; boxes {load['boxes_cpu_pct']:.1f} %, "
        f"{load['frames_per_s']} frames/s, {load['box_updates_per_box_s']} updates/box/s; "
        f"others {load['others_cpu_pct']} %")
    for name, window in (("idle", idle), ("under load", load)):
        lag = window.get("loop_lag", {})
        if lag.get("n"):
            row(f"  event loop held, {name}", f"{lag['max_ms']:.1f} ms",
                f"max late wake-up; p99 {lag['p99_ms']} ms, {lag['over_20ms']} over 20 ms; "
                f"longest step {lag['longest_step_cpu_ms']} ms CPU, "
                f"{lag['steps_over_20ms_cpu']} steps over 20 ms")
            print_longest_steps(name, lag)
    lat("pilot.press + pilot.pause, idle", r["pilot_idle"])
    lat("pilot.press + pilot.pause, under load", r["pilot_load"])
    print(f"3. memory, {args.boxes} x {args.runs} runs x {args.epochs} epochs "
          f"({r['metrics_line_bytes']:.0f} B per metrics line)")
    row("RSS before the app", f"{mem['rss_before_app_mib']} MiB")
    row("RSS of the empty panel (first frame, no answer yet)",
        f"{mem['rss_empty_panel_mib']} MiB")
    row("RSS with every run's history on screen", f"{mem['rss_loaded_mib']} MiB",
        f"+{mem['rss_over_empty_panel_mib']} MiB over the empty panel, +{mem['rss_delta_mib']} "
        f"MiB over no app; peak (VmHWM) {mem['rss_peak_mib']} MiB")
    if r["traced"]:
        tr = r["traced"]
        row("BoxState snapshots (tracemalloc)", f"{tr['snapshots_mib']} MiB",
            f"{tr['bytes_per_epoch_point']} B per epoch point, {tr['epoch_points']} points")
        row("panel widgets over them (tracemalloc)", f"{tr['panel_widgets_mib']} MiB")
    print("4. start-up")
    row("live=False: constructor -> first frame", f"{fx['first_frame_s'] * 1000:.0f} ms",
        f"median of {fx['samples']}")
    row("live=False: -> every run row laid out", f"{fx['all_rows_on_screen_s'] * 1000:.0f} ms")
    row("live: constructor -> first frame", f"{st['first_frame_s'] * 1000:.0f} ms")
    row("live: -> first run on screen", f"{st['first_run_on_screen_s']:.2f} s",
        "its box's first answer: states, no history yet")
    row("live: -> every run's history on screen", f"{st['all_history_on_screen_s']:.2f} s")
    lag = st.get("loop_lag", {})
    if lag.get("n"):
        row("  event loop held, while history streamed in", f"{lag['max_ms']:.1f} ms",
            f"max late wake-up; p99 {lag['p99_ms']} ms, {lag['over_20ms']} over 20 ms; "
            f"longest step {lag['longest_step_cpu_ms']} ms CPU, "
            f"{lag['steps_over_20ms_cpu']} steps over 20 ms")
        print_longest_steps("streaming", lag)
    if r.get("parse_fold"):
        print_parse_fold(r["parse_fold"], args)
    cli = r["cli"]
    if r.get("floors"):
        print_floors(r, args)
    row("python -c pass", f"{cli['python_bare_s'] * 1000:.0f} ms",
        f"median of {cli['repeats']}")
    row("python -m tui --help", f"{cli['tui_help_s'] * 1000:.0f} ms")
    row("python -c 'import tui.app' (the panel's imports)",
        f"{cli['import_tui_app_s'] * 1000:.0f} ms",
        "-X importtime self ms: " + ", ".join(
            f"{k} {v:.0f}" for k, v in list(cli["import_tui_app_self_ms_by_package"].items())[:5]))


def print_parse_fold(pf: dict[str, Any], args: argparse.Namespace) -> None:
    """The loop step that decodes and folds one answer, measured alone."""
    def row(label: str, step: dict[str, Any], note: str = "") -> None:
        print(f"  {label:<46} {step['step_ms']:>8.2f} ms  decode {step['decode_ms']} + fold "
              f"{step['fold_ms']} ms CPU; {step['answer_kib']} KiB of JSON ({step['history_kib']} "
              f"KiB history, {step['compressed_kib']} KiB compressed){note}")

    print(f"  parse + fold of one answer alone, one box of {args.runs} runs x {args.epochs} "
          "epochs (no app, no SSH; medians of 3):")
    row("  first look (states, no history)", pf["first_look"])
    row("  worst streamed answer", pf["streamed_worst"],
        f"; median step {pf['streamed_median_step_ms']} ms over {pf['streamed_answers']} "
        f"answers, {pf['points_held']} points held after")
    row("  unbounded: up to 1 MiB a run (contrast)", pf["unbounded"])


def print_floors(r: dict[str, Any], args: argparse.Namespace) -> None:
    """The live panel beside Textual's floor over the same runs, and the ratios."""
    floors = {name: {"idle_cpu_pct": statistics.median(x["idle_cpu_pct"] for x in runs),
                     "keys_idle": floor.median_of([x["keys_idle"] for x in runs]),
                     "keys_load": floor.median_of([x["keys_load"] for x in runs])}
              for name, runs in r["floors"].items()}
    panel = {"idle_cpu_pct": r["idle"]["app_cpu_pct"], "keys_idle": r["keys_idle"],
             "keys_load": r["keys_load"]}
    apps = {"live panel": panel, **floors}
    print(f"5. against Textual's floor: the same {args.boxes * args.runs} runs, headless "
          f"{SIZE[0]}x{SIZE[1]}, medians of {args.repeats} repeats")
    print(f"  {'':<44}" + "".join(f"{name:>14}" for name in apps))
    rows = [("idle CPU, % of a core", ("idle_cpu_pct",)),
            ("key -> frame idle, median ms", ("keys_idle", "median_ms")),
            ("key -> frame idle, p95 ms", ("keys_idle", "p95_ms")),
            ("CPU per key press idle, ms", ("keys_idle", "cpu_ms_per_press")),
            ("frames per key press idle", ("keys_idle", "frames_per_press")),
            ("key -> frame under a 1 s refresh, median ms", ("keys_load", "median_ms")),
            ("key -> frame under a 1 s refresh, p95 ms", ("keys_load", "p95_ms")),
            ("CPU per key press under refresh, ms", ("keys_load", "cpu_ms_per_press"))]
    for label, path in rows:
        cells = []
        for values in apps.values():
            value: Any = values
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            cells.append(f"{value:>14.2f}" if isinstance(value, int | float) else f"{'-':>14}")
        print(f"  {label:<44}" + "".join(cells))
    if "line floor" in floors:
        print("  live panel / line-API floor: " + ", ".join(
            f"{k} x{v}" for k, v in floor.ratios(panel, floors["line floor"]).items()))
    print("  (the floors are idle for real: no SSH, no watchers, no clock; under refresh they "
          "redraw every row each second, the panel folds real answers from real sshd)")


def floor_medians(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One floor app's repeats, medians field by field (the key phases' too)."""
    def med(*path: str) -> float | None:
        values = []
        for run in runs:
            value: Any = run
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, int | float):
                values.append(value)
        return statistics.median(values) if values else None

    return {"idle_cpu_pct": med("idle_cpu_pct"), "first_rows_s": med("first_rows_s"),
            "rss_over_no_app_mib": med("rss_over_no_app_mib"),
            "longest_step_cpu_ms": med("load_loop_lag", "longest_step_cpu_ms"),
            "keys_idle": floor.median_of([r["keys_idle"] for r in runs]),
            "keys_load": floor.median_of([r["keys_load"] for r in runs])}


def print_hundred(h: dict[str, Any], args: argparse.Namespace) -> None:
    n = h["boxes"]
    print(f"6. {n} boxes x {args.runs} runs x {h['epochs']} epochs (live, real sshd)")
    core, panel = h["core_round"], h["panel_round"]
    print(f"  {'refresh round of every box, ms':<46} {'median':>8} {'p95':>8} {'max':>8}")
    for label, r in (("watch core alone (BoxWatchers, no app)", core),
                     ("live panel (poke -> every new epoch held)", panel)):
        print(f"  {label:<46} {r['median_ms']:>8.0f} {r['p95_ms']:>8.0f} {r['max_ms']:>8.0f}")
    lag = panel.get("loop_lag", {})
    if lag.get("n"):
        print(f"  {'event loop during the rounds':<46} longest step {lag['longest_step_cpu_ms']} "
              f"ms CPU, max late wake-up {lag['max_ms']} ms, {lag['over_20ms']} over 20 ms")
        print_longest_steps("rounds", lag)
    print_longest_steps("1 s refresh", h["load"].get("loop_lag", {}))
    print(f"  {'every history held, from start':<46} {h['all_loaded_s']:>8.1f} s "
          f"(cold load of the core alone {core['cold_s']} s)")
    idle, load = h["idle"], h["load"]
    print(f"  {'panel CPU idle / under a 1 s refresh':<46} {idle['app_cpu_pct']:>7.1f}% "
          f"{load['app_cpu_pct']:>7.1f}%  (boxes {load['boxes_cpu_pct']:.0f}%, others "
          f"{load['others_cpu_pct']:.0f}% of a core)")
    for name, keys in (("idle", h["keys_idle"]), ("under a 1 s refresh", h["keys_load"])):
        if keys.get("n"):
            print(f"  {'key -> frame ' + name:<46} {keys['median_ms']:>5.1f} / "
                  f"{keys['p95_ms']:.1f} ms median / p95; {keys['cpu_ms_per_press']} ms CPU, "
                  f"{keys['frames_per_press']} frames per press, misses {keys['misses']}")
    if "load_profile" in h:
        print_profile(f"of key presses at {n} boxes under a 1 s refresh", h["load_profile"])


def print_targets(r: dict[str, Any], args: argparse.Namespace,
                  machine: dict[str, Any]) -> None:
    """Every target of the panel beside Textual's floor over the same runs, the ratio to the
    line-API floor, and whether the target holds on this machine in this run."""
    floors = {name: floor_medians(runs) for name, runs in r.get("floors", {}).items()}
    big = r.get("hundred") or {}
    big_floors = {name: floor_medians(runs) for name, runs in big.get("floors", {}).items()}
    line, static = floors.get("line floor", {}), floors.get("static floor", {})
    bline, bstatic = big_floors.get("line floor", {}), big_floors.get("static floor", {})

    def get(d: dict[str, Any], *path: str) -> float | None:
        value: Any = d
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, int | float) else None

    def longest(*values: float | None) -> float | None:
        return max((v for v in values if v is not None), default=None)

    # Each fleet's panel beside the floors over that same fleet.
    longest_small = longest(*(get(r, w, "loop_lag", "longest_step_cpu_ms")
                              for w in ("idle", "load")))
    longest_big = longest(get(big, "panel_round", "loop_lag", "longest_step_cpu_ms"),
                          get(big, "load", "loop_lag", "longest_step_cpu_ms"))
    n, big_n = args.boxes, big.get("boxes", args.big_boxes)
    mb30 = 30e6 / 2**20  # 30 MB in MiB
    # label, panel, line floor, static floor, limit (panel must be under it), unit
    rows: list[tuple[str, float | None, float | None, float | None, float | None, str]] = [
        (f"key -> frame idle, median ({n} boxes)", get(r, "keys_idle", "median_ms"),
         get(line, "keys_idle", "median_ms"), get(static, "keys_idle", "median_ms"), None, "ms"),
        (f"key -> frame idle, p95 ({n} boxes)", get(r, "keys_idle", "p95_ms"),
         get(line, "keys_idle", "p95_ms"), get(static, "keys_idle", "p95_ms"), 40, "ms"),
        (f"key -> frame, 1 s refresh, median ({n})", get(r, "keys_load", "median_ms"),
         get(line, "keys_load", "median_ms"), get(static, "keys_load", "median_ms"), None, "ms"),
        (f"key -> frame, 1 s refresh, p95 ({n})", get(r, "keys_load", "p95_ms"),
         get(line, "keys_load", "p95_ms"), get(static, "keys_load", "p95_ms"), 60, "ms"),
        (f"key -> frame idle, median ({big_n} boxes)", get(big, "keys_idle", "median_ms"),
         get(bline, "keys_idle", "median_ms"), get(bstatic, "keys_idle", "median_ms"), None,
         "ms"),
        (f"key -> frame idle, p95 ({big_n} boxes)", get(big, "keys_idle", "p95_ms"),
         get(bline, "keys_idle", "p95_ms"), get(bstatic, "keys_idle", "p95_ms"), 100, "ms"),
        (f"key -> frame, 1 s refresh, median ({big_n})", get(big, "keys_load", "median_ms"),
         get(bline, "keys_load", "median_ms"), get(bstatic, "keys_load", "median_ms"), None,
         "ms"),
        (f"key -> frame, 1 s refresh, p95 ({big_n})", get(big, "keys_load", "p95_ms"),
         get(bline, "keys_load", "p95_ms"), get(bstatic, "keys_load", "p95_ms"), 100, "ms"),
        (f"frames per key press, idle ({n})", get(r, "keys_idle", "frames_per_press"),
         get(line, "keys_idle", "frames_per_press"),
         get(static, "keys_idle", "frames_per_press"), 1.05, ""),
        (f"frames per key press, 1 s refresh ({n})", get(r, "keys_load", "frames_per_press"),
         get(line, "keys_load", "frames_per_press"),
         get(static, "keys_load", "frames_per_press"), None, ""),
        (f"CPU per key press, idle ({n})", get(r, "keys_idle", "cpu_ms_per_press"),
         get(line, "keys_idle", "cpu_ms_per_press"),
         get(static, "keys_idle", "cpu_ms_per_press"), None, "ms"),
        (f"CPU per key press, 1 s refresh ({n})", get(r, "keys_load", "cpu_ms_per_press"),
         get(line, "keys_load", "cpu_ms_per_press"),
         get(static, "keys_load", "cpu_ms_per_press"), None, "ms"),
        (f"idle CPU, % of a core ({n} boxes)", get(r, "idle", "app_cpu_pct"),
         get(line, "idle_cpu_pct"), get(static, "idle_cpu_pct"), 2, "%"),
        ("first run on screen (floor: rows of snapshots)",
         get(r, "startup", "first_run_on_screen_s"), get(line, "first_rows_s"),
         get(static, "first_rows_s"), 1, "s"),
        (f"memory, {n}x{args.runs}x{args.epochs} epochs over empty (floor: view)",
         get(r, "memory", "rss_over_empty_panel_mib"), get(line, "rss_over_no_app_mib"),
         get(static, "rss_over_no_app_mib"), round(mb30, 1), "MiB"),
        (f"refresh round of {big_n} boxes, p95 (floor: core)",
         get(big, "panel_round", "p95_ms"), get(big, "core_round", "p95_ms"), None, 1000, "ms"),
        ("loop's longest step, histories streaming in", get(r, "startup", "loop_lag",
                                                             "longest_step_cpu_ms"),
         None, None, 20, "ms"),
        (f"loop's longest step, idle and 1 s refresh ({n})", longest_small,
         get(line, "longest_step_cpu_ms"), get(static, "longest_step_cpu_ms"), 20, "ms"),
        (f"loop's longest step, rounds and 1 s refresh ({big_n})", longest_big,
         get(bline, "longest_step_cpu_ms"), get(bstatic, "longest_step_cpu_ms"), 20, "ms"),
        ("parse + fold of one streamed answer, alone, worst", get(
            r, "parse_fold", "streamed_worst", "step_ms"), None, None, 20, "ms"),
        ("parse + fold of one 1 MiB-a-run answer, alone", get(
            r, "parse_fold", "unbounded", "step_ms"), None, None, None, "ms"),
    ]
    print(f"7. the targets beside Textual's floor (same runs, same run of this script; load "
          f"average {machine['loadavg_at_start']} at start, {machine['loadavg']} at the end)")
    head = ("", "panel", "line floor", "Static floor", "/ line", "target", "holds")
    print(f"  {head[0]:<52}{head[1]:>9}{head[2]:>11}{head[3]:>13}{head[4]:>8}{head[5]:>12}"
          f"{head[6]:>7}")

    def cell(v: float | None, width: int) -> str:
        if v is None:
            return f"{'-':>{width}}"
        return f"{v:>{width}.{0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2}f}"

    for label, panel, lin, sta, limit, unit in rows:
        ratio = f"x{panel / lin:.1f}" if panel is not None and lin else "-"
        target = f"< {limit:g} {unit}".strip() if limit is not None else "-"
        holds = "-" if limit is None or panel is None else "yes" if panel < limit else "NO"
        print(f"  {label + (' ' + unit if unit else ''):<52}{cell(panel, 9)}{cell(lin, 11)}"
              f"{cell(sta, 13)}{ratio:>8}{target:>12}{holds:>7}")
    print("  floors: the same rows drawn by one line-API view and by one Static per run, "
          "headless, no SSH (first run: their first frame over the loaded snapshots; memory: "
          "the view over data already held; round: the watch core alone; loop: their longest "
          "step while every row changes each second, over the same fleet as the panel's row; "
          "parse + fold: one box's answers decoded and folded outside the app, see 4.)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="runs per box")
    parser.add_argument("--epochs", type=int, default=2000, help="epochs of history per run")
    parser.add_argument("--presses", type=int, default=200, help="j/k presses per latency phase")
    parser.add_argument("--key-budget", type=float, default=30.0,
                        help="at most this many seconds of presses per latency phase")
    parser.add_argument("--pilot-presses", type=int, default=20,
                        help="presses timed with pilot.press + pilot.pause")
    parser.add_argument("--pilot-budget", type=float, default=10.0,
                        help="at most this many seconds of pilot presses per phase")
    parser.add_argument("--idle", type=float, default=30.0, help="idle CPU window, seconds")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds after the first load before the idle window")
    parser.add_argument("--load-period", type=float, default=1.0,
                        help="seconds between epochs (and box pokes) under load")
    parser.add_argument("--load-window", type=float, default=10.0,
                        help="CPU window under load, before the key presses, seconds")
    parser.add_argument("--baseline", type=float, default=5.0,
                        help="idle window of the live=False app, seconds (0: skip)")
    parser.add_argument("--startups", type=int, default=3, help="live=False start-ups timed")
    parser.add_argument("--profile", type=float, default=0.0,
                        help="cProfile this many seconds of idle and print where it goes")
    parser.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false")
    parser.add_argument("--box-nice", type=int, default=10,
                        help="nice value of the boxes' sshd and probes (0: same as the panel)")
    parser.add_argument("--lag-window", type=float, default=10.0,
                        help="seconds the event loop's stalls are watched, idle and under load")
    parser.add_argument("--repeats", type=int, default=2,
                        help="repeats of each key phase (live panel and floors; medians)")
    parser.add_argument("--no-floor", dest="floor", action="store_false",
                        help="skip Textual's floor (benchmarks/floor.py) over the same runs")
    parser.add_argument("--floor-idle", type=float, default=5.0,
                        help="idle CPU window of each floor app, seconds")
    parser.add_argument("--cli-repeats", type=int, default=5)
    parser.add_argument("--load-timeout", type=float, default=180.0)
    parser.add_argument("--big-boxes", type=int, default=100,
                        help="boxes of the second fleet (0: skip it)")
    parser.add_argument("--big-epochs", type=int, default=100,
                        help="epochs of history per run in the second fleet")
    parser.add_argument("--big-rounds", type=int, default=10,
                        help="refresh rounds timed at --big-boxes (core alone, then the panel)")
    parser.add_argument("--big-idle", type=float, default=10.0,
                        help="idle CPU window at --big-boxes, seconds")
    parser.add_argument("--quick", action="store_true",
                        help="fewer presses and repeats, shorter windows: every figure in a "
                        "few minutes (noisier)")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)

    tmp = Path(tempfile.mkdtemp(prefix="gpurent-panel-bench-"))
    # The panel's own files (pinned keys) go to the temp dir; no agent is consulted.
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ[var] = str(tmp / "xdg" / var.lower())
    os.environ.pop("SSH_AUTH_SOCK", None)
    os.environ.pop("GPURENT_CONFIG", None)
    servers: list[Sshd] = []
    t0 = time.perf_counter()
    load_at_start = [round(v, 2) for v in os.getloadavg()]
    try:
        print("CLI start-up in fresh interpreters (before any box starts) ...", flush=True)
        cli = cli_startup(args.cli_repeats)
        result = asyncio.run(benchmark(args, tmp, servers))
        result["cli"] = cli
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.perf_counter() - t0

    code = panel_code()
    machine = {"nproc": len(os.sched_getaffinity(0)), "python": platform.python_version(),
               "box_python": result.pop("box_python"),
               "textual": metadata.version("textual"), "asyncssh": metadata.version("asyncssh"),
               "platform": platform.platform(), "date": datetime.now(UTC).isoformat(),
               "loadavg_at_start": load_at_start,
               "loadavg": [round(v, 2) for v in os.getloadavg()]}
    print()
    print(f"gpurent-tui panel benchmark, {machine['date']}")
    print(f"machine: nproc {machine['nproc']}, python {machine['python']}, textual "
          f"{machine['textual']}, asyncssh {machine['asyncssh']}, {machine['platform']}, "
          f"load average at start {load_at_start}, at the end {machine['loadavg']}")
    print(f"code: {code['tui_from']} at {code['commit']}" + (
        f", uncommitted changes in {len(code['uncommitted'])} file(s): "
        + ", ".join(code["uncommitted"][:6]) if code["uncommitted"] else ", clean"))
    print(f"fleet: {args.boxes} sshd boxes on 127.0.0.1 x {args.runs} runs x {args.epochs} "
          f"epochs; headless {SIZE[0]}x{SIZE[1]}; CPU in % of one core")
    print()
    print_report(result, args)
    if result.get("hundred"):
        print_hundred(result["hundred"], args)
    print_targets(result, args, machine)
    if "exit_error" in result:
        print(f"NOTE: the live panel raised as it shut down: {result['exit_error']}")
    others = max(w["others_cpu_pct"] for w in (result["idle"], result["keys_idle_cpu"],
                                                 result["keys_load_cpu"], result["load"]))
    if others > 20:
        print(f"WARNING: other processes used up to {others:.0f} % of a core during the "
              f"windows (load average {machine['loadavg']}): wall-clock figures (latency, "
              "start-up) are inflated; CPU seconds of the panel much less so")
    print(f"total benchmark time {total:.0f} s")
    doc = {"benchmark": "gpurent-tui/panel", "machine": machine, "code": code,
           "args": vars(args),
           **result, "total_s": round(total, 1)}
    print(json.dumps(doc, separators=(",", ":"), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
