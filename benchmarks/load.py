"""How the watch core and the panel scale with the number of boxes: 10, 50, 100.

Why: refresh.py measures a 20-box fleet; a team with many rented boxes wants
to know what grows with the fleet, and whether the panel still answers a key
while a hundred boxes refresh at once. Everything here runs on one machine
(the boxes too), so the script also measures what the boxes themselves cost,
to tell the client's share from the boxes' python3 start-ups.

Boxes: real OpenSSH servers (`/usr/sbin/sshd`, one process per box, each
session's `python3 -` a real process), all on 127.0.0.1, each with an empty
HOME, each with R LibreYOLO-shaped runs of E epochs (refresh.py's Run: real
LibreYOLO line shapes, full-precision floats), advanced one epoch per round in
LibreYOLO's order (metrics line, log lines, status.json by rename, last.pt).

For each N, two fresh child processes (so RSS and CPU belong to that N alone):

1. core: N BoxWatchers, sessions kept open, refreshed in parallel: a cold
   load, then rounds in which every run advances one epoch (outside the timed
   window) and every box is refreshed at once. Per round: wall time, this
   process's CPU, the boxes' CPU (sshd + probe processes), everybody else's
   CPU on the machine, payload and TCP bytes per box; RSS before and after.
2. panel: `GpurentApp` over the same N boxes, live, headless in `run_test`
   (160x48). j/k pressed as a terminal would (a Key event handed to the
   driver), first with no refresh in flight, then while rounds run back to
   back (a writer thread advances every run, then every box is poked; the next
   round starts when all N answered). Latency: key -> the action runs (the
   event loop's queueing delay) and key -> the first frame, encoded for a
   terminal, in which the cursor is on the new row and the row is visible.

Then the boxes' own python3: the CPU of `python3 -c pass`, of one one-shot
probe run and of one idle request to a kept probe, locally, so the share of a
round that is the probe on the boxes is visible. (The watchers keep a probe
per box, as the panel does: no python3 starts per refresh.)

    python benchmarks/load.py [--boxes 10 50 100] [--runs 2] [--epochs 100]
                              [--rounds 8] [--presses 150] [--no-panel]

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
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _fleet import (
    REPO,
    Run,
    advance_all,
    box_name,
    code_line,
    code_under_test,
    machine,
    machine_busy_seconds,
    machine_line,
    make_runs,
    pct,
    print_json,
    proc_cpu_seconds,
    scratch,
    sshd_pids,
    start_servers,
    tree_cpu_seconds,
    tree_pids,
    vm_kib,
    write_fleet,
    write_known_hosts,
)
from refresh import Phase, Round, check_runs, full_refresh
from support.sshd import Sshd, make_keypair

from tui.model.box import (
    BoxState,
    Connection,
    fold_answer,
    needs_more,
    probe_request,
)
from tui.model.config import FleetConfig
from tui.onbox import probe as probe_script
from tui.remote.framing import FrameReader, new_nonce
from tui.remote.hostkeys import host_key_store
from tui.remote.programs import SERVE_CODE
from tui.remote.session import kept_probe_loader, probe_payload
from tui.remote.watch import BoxWatcher

SIZE = (160, 48)
RESULT = "RESULT "
MISS_S = 30.0  # a key whose frame has not come after this long counts as a miss
IDLE_S = 5.0  # the panel's idle CPU window


# --- small measuring helpers -------------------------------------------------------


def ms_summary(values: Sequence[float], misses: int = 0) -> dict[str, Any]:
    if not values:
        return {"n": 0, "misses": misses}
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "misses": misses, "median_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 95), 1), "max_ms": round(max(ms), 1)}


def box_pss_mib(roots: Sequence[int]) -> float:
    """Proportional set size of the sshd listeners and everything below them (shared
    pages split among sharers, so a sum over processes does not count them N times)."""
    total = 0
    for pid in tree_pids(roots):
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return round(total / 1024, 1)


# --- the fleet, as the children see it ---------------------------------------------


@dataclass
class Spec:
    """What a child needs to watch the first N boxes (written by the parent as JSON)."""

    ports: list[int]
    sshd_pids: list[int]
    known_hosts: str
    identity: str
    roots: list[str]
    runs: dict[str, list[str]]  # box name -> run dirs
    tmp: str

    def fleet(self, n: int, refresh_seconds: float) -> FleetConfig:
        """The first n boxes as a fleet.toml, written the way a user would."""
        return write_fleet(Path(self.tmp) / f"fleet-{n}-{os.getpid()}.toml",
                           known_hosts=self.known_hosts, identity=self.identity,
                           ports=self.ports[:n], roots=self.roots[:n],
                           refresh_seconds=refresh_seconds, timeout_seconds=120)

    def take_runs(self, n: int) -> dict[str, list[Run]]:
        """This process's handles on the first n boxes' runs (see Run.adopt)."""
        started = time.time() - 1
        return {box_name(b): [Run.adopt(Path(p), started) for p in self.runs[box_name(b)]]
                for b in range(n)}


# --- 1. the core -----------------------------------------------------------------


@dataclass
class Others:
    """Everybody else's CPU on the machine during the timed windows."""

    seconds: float = 0.0
    wall: float = 0.0


async def timed_refresh(watchers: Sequence[BoxWatcher], pids: Sequence[int], others: Others,
                        *, catch_up: bool = False) -> Round:
    busy = machine_busy_seconds()
    round_ = await full_refresh(watchers, pids, catch_up=catch_up)
    others.seconds += max(0.0, machine_busy_seconds() - busy - round_.cpu - round_.box_cpu)
    others.wall += round_.wall
    return round_


async def core_child(spec: Spec, n: int, rounds: int) -> dict[str, Any]:
    runs = spec.take_runs(n)
    fleet = spec.fleet(n, refresh_seconds=5)
    pids = spec.sshd_pids[:n]
    history = min(r.epoch for box_runs in runs.values() for r in box_runs)
    gc.collect()
    rss_base = vm_kib("VmRSS")
    store = host_key_store(fleet)
    watchers = [BoxWatcher(box, fleet, store=store) for box in fleet.boxes]
    others = Others()
    runs_per_box = len(next(iter(runs.values())))
    try:
        cold = Phase("cold", n, runs_per_box, history)
        cold.rounds.append(await timed_refresh(watchers, pids, others, catch_up=True))
        check_runs([w.state for w in watchers], runs)
        gc.collect()
        rss_loaded = vm_kib("VmRSS")
        others = Others()
        advancing = Phase("advancing", n, runs_per_box, history)
        write_s = 0.0
        for _ in range(rounds):
            t0 = time.perf_counter()
            advance_all(runs)
            write_s += time.perf_counter() - t0
            advancing.rounds.append(await timed_refresh(watchers, pids, others))
        check_runs([w.state for w in watchers], runs)
        gc.collect()
        out = {"cold": cold.summary(), "advancing": advancing.summary(),
               "walls_s": [round(r.wall, 3) for r in advancing.rounds],
               "others_cpu_pct": round(100 * others.seconds / others.wall, 1),
               "rss_base_mib": round(rss_base / 1024, 1),
               "rss_loaded_mib": round(rss_loaded / 1024, 1),
               "rss_after_mib": round(vm_kib("VmRSS") / 1024, 1),
               "rss_peak_mib": round(vm_kib("VmHWM") / 1024, 1),
               "box_pss_mib": box_pss_mib(pids),
               "write_s_per_round": round(write_s / rounds, 4),
               "box_python": watchers[0].state.python or "?"}
        out["rss_per_box_kib"] = round((rss_loaded - rss_base) / n, 1)
        return out
    finally:
        await asyncio.gather(*(w.close() for w in watchers))


# --- 2. the panel ----------------------------------------------------------------


def make_bench_app() -> type:
    """The real panel plus a timestamp per frame and per j/k action (imports Textual late:
    the core child never loads it)."""
    from rich.console import RenderableType
    from textual._compositor import CompositorUpdate
    from textual.message import Message
    from textual.screen import Screen

    from tui.app import GpurentApp
    from tui.messages import BoxUpdated

    class BenchApp(GpurentApp):
        """Nothing of the panel is changed; in headless mode Textual skips encoding each
        frame for the terminal, so it is done here to count what a terminal session pays."""

        def __init__(self, fleet: FleetConfig) -> None:
            super().__init__(fleet)
            self.frames = 0
            self.frame_hooks: list[Callable[[float], bool]] = []
            self.moved_at: list[float] = []
            self.box_updates = 0

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            if isinstance(renderable, CompositorUpdate) and self.is_headless:
                renderable.render_segments(self.console)
            super()._display(screen, renderable)
            if renderable is not None:
                now = time.perf_counter()
                self.frames += 1
                if self.frame_hooks:
                    self.frame_hooks = [h for h in self.frame_hooks if not h(now)]

        def on_mount(self) -> None:
            super().on_mount()
            # When the cursor moved: the key's action, before any frame shows it.
            screen = self.screen_stack[0]
            screen.watch(screen, "selected",
                         lambda _: self.moved_at.append(time.perf_counter()), init=False)

        def post_message(self, message: Message) -> bool:
            if isinstance(message, BoxUpdated):
                self.box_updates += 1
            return super().post_message(message)

    return BenchApp


@dataclass
class Writer:
    """Rounds back to back: every run writes one epoch (in a thread, as LibreYOLO's own
    process would), every box is poked, and the next round starts once all N answered."""

    runs: dict[str, list[Run]]
    cpu: float = 0.0
    walls: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def advance_all(self) -> None:
        start = time.thread_time()
        advance_all(self.runs)
        with self.lock:
            self.cpu += time.thread_time() - start

    async def loop(self, app: Any) -> None:
        n = len(app.watchers)
        while True:
            await asyncio.to_thread(self.advance_all)
            start, seen = time.perf_counter(), app.box_updates
            for watcher in app.watchers.values():
                watcher.poke()
            while app.box_updates - seen < n and time.perf_counter() - start < 120:
                await asyncio.sleep(0.005)
            self.walls.append(time.perf_counter() - start)


async def press_keys(app: Any, presses: int, budget: float, rng: random.Random
                     ) -> dict[str, Any]:
    """j/k handed to the driver; time to the action and to the frame that shows it."""
    from textual import events

    loop = asyncio.get_running_loop()
    handled: list[float] = []
    painted_at: list[float] = []
    misses = 0
    direction = 1
    deadline = time.perf_counter() + budget
    screen = app.screen_stack[0]
    for _ in range(presses):
        if time.perf_counter() > deadline:
            break
        rows = screen.fleet_list.order
        index = rows.index(screen.selected) if screen.selected in rows else 0
        if not 0 <= index + direction < len(rows):
            direction = -direction
        target = rows[index + direction]
        done: asyncio.Future[float] = loop.create_future()

        def hook(now: float, target: Any = target, done: asyncio.Future[float] = done) -> bool:
            if screen.selected == target and screen.fleet_list.is_visible(target):
                if not done.done():
                    done.set_result(now)
                return True
            return done.done()

        app.frame_hooks.append(hook)
        key = "j" if direction > 0 else "k"
        event = events.Key(key, key)
        event.set_sender(app)
        moves = len(app.moved_at)
        start = time.perf_counter()
        app._driver.send_message(event)
        try:
            painted_at.append(await asyncio.wait_for(done, MISS_S) - start)
            if len(app.moved_at) > moves:
                handled.append(app.moved_at[moves] - start)
        except TimeoutError:
            misses += 1
            app.frame_hooks = [h for h in app.frame_hooks if h is not hook]
        # 10-50 ms between a frame and the next key (a held key repeats every ~30 ms).
        await asyncio.sleep(rng.uniform(0.01, 0.05))
    return {"to_action": ms_summary(handled), "to_frame": ms_summary(painted_at, misses)}


async def panel_child(spec: Spec, n: int, presses: int, key_budget: float,
                      load_rounds: int, profiled: bool) -> dict[str, Any]:
    bench_app = make_bench_app()
    runs = spec.take_runs(n)
    # Refresh only when poked: "quiet" then really has no refresh in flight.
    fleet = spec.fleet(n, refresh_seconds=3600)
    pids = spec.sshd_pids[:n]
    gc.collect()
    rss_base = vm_kib("VmRSS")
    rng = random.Random(7)
    app = bench_app(fleet)
    expected = sum(len(v) for v in runs.values())
    out: dict[str, Any] = {}
    start = time.perf_counter()

    def loaded() -> bool:
        return (all(s.connection is Connection.OK and len(s.runs) == len(runs[s.name])
                    for s in app.states.values())
                and len(app.screen_stack[0].fleet_list.order) == expected
                and app.screen_stack[0].selected is not None)

    complete = False
    try:
        async with app.run_test(size=SIZE) as pilot:
            while not loaded():
                if time.perf_counter() - start > 300:
                    raise SystemExit(f"N={n}: the panel did not load every run within 300 s")
                await asyncio.sleep(0.02)
            await pilot.pause()
            out["load_s"] = round(time.perf_counter() - start, 2)
            gc.collect()
            out["rss_base_mib"] = round(rss_base / 1024, 1)
            out["rss_loaded_mib"] = round(vm_kib("VmRSS") / 1024, 1)
            await asyncio.sleep(1.0)
            # Idle: no refresh in flight, no key; only the panel's 1 s clock tick runs.
            cpu, wall, frames = time.process_time(), time.perf_counter(), app.frames
            await asyncio.sleep(IDLE_S)
            wall = time.perf_counter() - wall
            out["idle"] = {"wall_s": round(wall, 1),
                           "app_cpu_pct": round(100 * (time.process_time() - cpu) / wall, 1),
                           "frames_per_s": round((app.frames - frames) / wall, 1)}

            cpu, wall, frames = time.process_time(), time.perf_counter(), app.frames
            out["quiet"] = await press_keys(app, presses, key_budget, rng)
            wall = time.perf_counter() - wall
            out["quiet"]["app_cpu_pct"] = round(100 * (time.process_time() - cpu) / wall, 1)
            out["quiet"]["frames_per_s"] = round((app.frames - frames) / wall, 1)

            writer = Writer(runs)
            ticker = asyncio.create_task(writer.loop(app))
            try:
                while len(writer.walls) < 1:  # the first round: every box caught up
                    await asyncio.sleep(0.05)
                cpu, wall, frames = time.process_time(), time.perf_counter(), app.frames
                box_cpu, busy, wcpu = tree_cpu_seconds(pids), machine_busy_seconds(), writer.cpu
                first_round = len(writer.walls)
                profile = cProfile.Profile(time.process_time) if profiled else None
                if profile is not None:
                    profile.enable()
                out["load"] = await press_keys(app, presses, key_budget, rng)
                while len(writer.walls) - first_round < load_rounds:  # at least this many
                    await asyncio.sleep(0.05)
                if profile is not None:
                    profile.disable()
                    out["profile"] = profile_summary(profile)
                wall = time.perf_counter() - wall
                app_cpu = time.process_time() - cpu - (writer.cpu - wcpu)
                box_cpu = tree_cpu_seconds(pids) - box_cpu
                busy = machine_busy_seconds() - busy
            finally:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            walls = writer.walls[first_round:]
            out["load"].update({
                "wall_s": round(wall, 1), "rounds": len(walls),
                "round_wall_s_median": round(statistics.median(walls), 3),
                "app_cpu_pct": round(100 * app_cpu / wall, 1),
                "boxes_cpu_pct": round(100 * box_cpu / wall, 1),
                "others_cpu_pct": round(100 * max(0.0, busy - app_cpu - box_cpu
                                                   - (writer.cpu - wcpu)) / wall, 1),
                "frames_per_s": round((app.frames - frames) / wall, 1)})
            gc.collect()
            out["rss_after_mib"] = round(vm_kib("VmRSS") / 1024, 1)
            out["rss_peak_mib"] = round(vm_kib("VmHWM") / 1024, 1)
            crash = getattr(app, "_exception", None)
            if crash is not None:
                raise SystemExit(f"N={n}: the panel crashed during the measurements: {crash!r}")
            # Stop the watchers and drain their messages before run_test tears the screens
            # down: a BoxUpdated handled after that raises IndexError in on_box_updated.
            app.workers.cancel_all()
            await asyncio.sleep(0.5)
            await pilot.pause()
            complete = True
    except Exception as exc:
        # A panel that raises while it shuts down (a box update or its clock tick
        # landing after the screens are gone) is a finding, not a reason to lose
        # every figure.
        if not complete:
            raise
        out["exit_error"] = f"{type(exc).__name__}: {exc}"
    return out


def profile_summary(profile: cProfile.Profile, top: int = 10) -> dict[str, Any]:
    """The panel's own functions by cumulative CPU, and everything by own CPU."""
    stats = pstats.Stats(profile)
    ours, own = [], []
    for (filename, line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        calls, own_s, cum_s = row[1], row[2], row[3]
        where = f"{Path(filename).name}:{line}({name})"
        if filename.startswith(str(REPO)) and "/benchmarks/" not in filename:
            ours.append((cum_s, calls, filename[len(str(REPO)) + 1:] + f":{line}({name})"))
        own.append((own_s, calls, where))
    ours.sort(reverse=True)
    own.sort(reverse=True)
    return {"total_s": round(sum(o for o, _, _ in own), 2),
            "ours_cumulative": [{"cum_s": round(c, 2), "calls": n, "where": w}
                                for c, n, w in ours[:top]],
            "own_top": [{"own_s": round(o, 2), "calls": n, "where": w}
                        for o, n, w in own[:top]]}


# --- the boxes' own python3 ---------------------------------------------------------


def box_python_costs(root: Path, repeats: int) -> dict[str, Any]:
    """CPU of a bare python3 start and of one probe run (idle request) on this machine,
    without SSH: what each box pays per refresh before sshd and bash."""
    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def cost(argv: list[str], stdin: bytes | None) -> tuple[float, float]:
        cpu, wall = children_cpu(), time.perf_counter()
        for _ in range(repeats):
            subprocess.run(argv, input=stdin, check=True, stdout=subprocess.DEVNULL,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        return ((children_cpu() - cpu) / repeats, (time.perf_counter() - wall) / repeats)

    python3 = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
    bare = cost([python3, "-c", "pass"], None)
    # The request of a refresh where nothing changed: the cursors after a full load.
    state = BoxState(name="x")
    for _ in range(10):
        answer = probe_script.build_answer(json.loads(json.dumps(
            probe_request(state, [str(root)]))))
        state = fold_answer(state, answer, time.time(), 5)
        if not needs_more(answer):
            break
    request = probe_request(state, [str(root)])
    probe = cost([python3, "-"], probe_payload(request, "0" * 24))
    kept = kept_probe_cost(python3, request, repeats * 10)
    return {"python3": python3, "python3_bare_cpu_s": round(bare[0], 4),
            "python3_bare_wall_s": round(bare[1], 4), "probe_idle_cpu_s": round(probe[0], 4),
            "probe_idle_wall_s": round(probe[1], 4), "kept_probe_idle_cpu_s": round(kept, 5),
            "repeats": repeats}


def kept_probe_cost(python3: str, request: dict[str, Any], repeats: int) -> float:
    """CPU per idle request of one kept probe (`python3 -c` + loader) on this machine,
    without SSH: utime+stime from /proc, after its first (full) request."""
    proc = subprocess.Popen([python3, "-c", SERVE_CODE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout

    def ask(line: dict[str, Any]) -> None:
        nonce = new_nonce()
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"nonce": nonce, **line}).encode() + b"\n")
        proc.stdin.flush()
        reader = FrameReader(nonce, max_frame=1 << 30)
        while True:
            data = os.read(stdout.fileno(), 1 << 16)
            if not data:
                raise SystemExit("the kept probe ended without answering")
            if reader.feed(data):
                return

    try:
        proc.stdin.write(kept_probe_loader())
        ask({"set": {k: v for k, v in request.items() if k != "runs"},
             "runs": request["runs"]})
        before = proc_cpu_seconds(proc.pid)
        for _ in range(repeats):
            ask({})
        return (proc_cpu_seconds(proc.pid) - before) / repeats
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


# --- the parent --------------------------------------------------------------------


def run_child(mode: str, spec_path: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", mode, "--spec", str(spec_path),
            "--n", str(n), "--rounds", str(args.rounds), "--presses", str(args.presses),
            "--key-budget", str(args.key_budget), "--load-rounds", str(args.load_rounds),
            *(["--profile"] if args.profile else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    raise SystemExit(f"{mode} child for N={n} failed (exit {done.returncode}):\n"
                     f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def start_fleet(tmp: Path, count: int, runs: int, epochs: int, servers: list[Sshd]) -> Spec:
    """count sshd on 127.0.0.1 sharing one host key (key generation is not what is measured)."""
    client = make_keypair(tmp / "client", "id_ed25519")
    host = make_keypair(tmp / "hostkey", "ssh_host_ed25519_key")
    start_servers(tmp, count, client, servers, host_key=host)
    known = write_known_hosts(tmp, servers)
    roots, made = make_runs(tmp, count, runs, epochs, time.time())
    return Spec(ports=[s.port for s in servers], sshd_pids=sshd_pids(servers),
                known_hosts=str(known), identity=str(client.private_path),
                roots=[str(r) for r in roots],
                runs={name: [str(r.path) for r in box_runs] for name, box_runs in made.items()},
                tmp=str(tmp))


def ratio_line(label: str, values: dict[int, float | None], unit: str,
               per_box: bool = True) -> str:
    """A figure per N, its value per box, and how it grew against N (1.00/box = linear)."""
    ns = sorted(values)
    first = ns[0]
    cells = []
    for n in ns:
        v = values[n]
        if v is None:
            cells.append(f"{'-':>12}")
            continue
        cells.append(f"{fmt(v, unit):>12}")
    per_boxes = [values[n] / n if values[n] is not None else None for n in ns]
    growth = []
    for n in ns[1:]:
        base, v = values[first], values[n]
        if base and v is not None:
            growth.append(f"x{v / base:.2f} for x{n / first:g} boxes"
                          + (f" ({v / base / (n / first):.2f}/box)" if per_box else ""))
    box_cells = " ".join(f"{fmt(p, unit)}" for p in per_boxes if p is not None)
    return (f"{label:<36}" + "".join(cells) + (f"   per box: {box_cells};" if per_box else "  ")
            + " " + "; ".join(growth))


def extensive(label: str, unit: str) -> bool:
    """Whether a figure's value per box means something (a latency or a total RSS does not)."""
    return unit != "ms" and not label.startswith(("client RSS, ", "panel RSS"))


def fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"
    if unit == "ms":
        return f"{value:.0f} ms"
    if unit == "B":
        return f"{value / 1024:.1f} KiB" if value >= 10240 else f"{value:.0f} B"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if unit == "%":
        return f"{value:.1f} %" if value < 10 else f"{value:.0f} %"
    return f"{value:g}"


def print_report(results: dict[int, dict[str, Any]], box: dict[str, Any],
                 args: argparse.Namespace, setup_s: float) -> None:
    ns = sorted(results)
    print(f"{'':36}" + "".join(f"{'N=' + str(n):>12}" for n in ns))
    core = {n: results[n]["core"] for n in ns}
    adv = {n: core[n]["advancing"] for n in ns}
    print("core: every box refreshed in parallel, each run one epoch further each round "
          f"({args.rounds} rounds)")
    rows: list[tuple[str, dict[int, float | None], str]] = [
        ("wall per refresh, median", {n: adv[n]["wall_s_median"] for n in ns}, "s"),
        ("wall per refresh, p95 (rank)", {n: adv[n]["wall_s_p95"] for n in ns}, "s"),
        ("client CPU per refresh", {n: adv[n]["client_cpu_s_median"] for n in ns}, "s"),
        ("boxes' CPU per refresh (sshd+probe)", {n: adv[n]["box_cpu_s_median"] for n in ns},
         "s"),
        ("bytes in per refresh (all boxes)",
         {n: adv[n]["bytes_in_per_box"] * n for n in ns}, "B"),
        ("bytes out per refresh (all boxes)",
         {n: adv[n]["bytes_out_per_box"] * n for n in ns}, "B"),
        ("TCP in per refresh (SSH framed)",
         {n: (adv[n]["wire_in_per_box"] or 0) * n for n in ns}, "B"),
        ("TCP out per refresh (SSH framed)",
         {n: (adv[n]["wire_out_per_box"] or 0) * n for n in ns}, "B"),
        ("cold: connect + whole history",
         {n: core[n]["cold"]["wall_s_median"] for n in ns}, "s"),
        ("client RSS, watchers loaded", {n: core[n]["rss_loaded_mib"] for n in ns}, "MiB"),
        ("client RSS growth over the base",
         {n: core[n]["rss_loaded_mib"] - core[n]["rss_base_mib"] for n in ns}, "MiB"),
        ("boxes' PSS (sshd + sessions)", {n: core[n]["box_pss_mib"] for n in ns}, "MiB"),
    ]
    for label, values, unit in rows:
        print(ratio_line(label, values, unit, per_box=extensive(label, unit)))
    print("  other processes on the machine during the rounds: "
          + ", ".join(f"N={n} {core[n]['others_cpu_pct']} %" for n in ns) + " of one core")
    kept = {n: n * box["kept_probe_idle_cpu_s"] / args.nproc for n in ns}
    print("  the boxes' kept probes (one per box, told only what changed) need "
          + ", ".join(f"N={n} {kept[n] * 1000:.1f} ms" for n in ns)
          + f" of wall per idle refresh on {args.nproc} cores "
          f"({box['kept_probe_idle_cpu_s'] * 1000:.2f} ms CPU per idle request without SSH; a "
          f"one-shot probe, a fresh `python3 -` per refresh, costs "
          f"{box['probe_idle_cpu_s'] * 1000:.0f} ms, `python3 -c pass` alone "
          f"{box['python3_bare_cpu_s'] * 1000:.0f} ms); the boxes' whole CPU (sshd, probe) "
          + ", ".join(f"N={n} {adv[n]['box_cpu_s_median'] / args.nproc * 1000:.0f} ms"
                      for n in ns)
          + f" of wall per advancing refresh spread over {args.nproc} cores; the client's own "
          "CPU is "
          + ", ".join(f"N={n} {100 * adv[n]['client_cpu_s_median'] / adv[n]['wall_s_median']:.0f}"
                      " %" for n in ns) + " of the wall")
    if not all("panel" in results[n] for n in ns):
        return
    panel = {n: results[n]["panel"] for n in ns}
    print(f"panel: GpurentApp live in run_test {SIZE[0]}x{SIZE[1]}, j/k handed to the driver "
          f"(up to {args.presses} presses or {args.key_budget:g} s per phase)")
    prow: list[tuple[str, dict[int, float | None], str]] = [
        ("every run on screen after start", {n: panel[n]["load_s"] for n in ns}, "s"),
        ("panel CPU idle (no refresh, no key)", {n: panel[n]["idle"]["app_cpu_pct"] for n in ns},
         "%"),
        ("key -> frame, quiet, median",
         {n: panel[n]["quiet"]["to_frame"].get("median_ms") for n in ns}, "ms"),
        ("key -> frame, quiet, p95",
         {n: panel[n]["quiet"]["to_frame"].get("p95_ms") for n in ns}, "ms"),
        ("key -> action, under load, median",
         {n: panel[n]["load"]["to_action"].get("median_ms") for n in ns}, "ms"),
        ("key -> frame, under load, median",
         {n: panel[n]["load"]["to_frame"].get("median_ms") for n in ns}, "ms"),
        ("key -> frame, under load, p95",
         {n: panel[n]["load"]["to_frame"].get("p95_ms") for n in ns}, "ms"),
        ("key -> frame, under load, max",
         {n: panel[n]["load"]["to_frame"].get("max_ms") for n in ns}, "ms"),
        ("round under load (all N answered)",
         {n: panel[n]["load"]["round_wall_s_median"] for n in ns}, "s"),
        ("panel CPU under load", {n: panel[n]["load"]["app_cpu_pct"] for n in ns}, "%"),
        ("panel RSS, every run loaded", {n: panel[n]["rss_loaded_mib"] for n in ns}, "MiB"),
    ]
    for label, values, unit in prow:
        print(ratio_line(label, values, unit, per_box=extensive(label, unit)))
    print("  presses (n, misses) under load: " + ", ".join(
        f"N={n} {panel[n]['load']['to_frame']['n']}, {panel[n]['load']['to_frame']['misses']}"
        for n in ns) + "; rounds during the presses: " + ", ".join(
        f"N={n} {panel[n]['load']['rounds']}" for n in ns) + "; boxes' CPU under load: "
        + ", ".join(f"N={n} {panel[n]['load']['boxes_cpu_pct']} %" for n in ns)
        + "; others: " + ", ".join(f"N={n} {panel[n]['load']['others_cpu_pct']} %" for n in ns))
    for n in ns:
        prof = panel[n].get("profile")
        if prof:
            print(f"  N={n} panel under load, cProfile ({prof['total_s']} s CPU): the panel's "
                  "own functions by cumulative CPU")
            for item in prof["ours_cumulative"]:
                print(f"    {item['cum_s']:>7.2f} s {item['calls']:>8} calls  {item['where']}")
    for n in ns:
        if panel[n].get("exit_error"):
            print(f"  N={n}: the panel raised while shutting down (after every figure was "
                  f"taken): {panel[n]['exit_error']}")
    print(f"setup: {max(ns)} sshd started and runs written in {setup_s:.1f} s")


def child_main(args: argparse.Namespace) -> int:
    data = json.loads(Path(args.spec).read_text())
    spec = Spec(**data)
    if args.child == "core":
        result = asyncio.run(core_child(spec, args.n, args.rounds))
    else:
        result = asyncio.run(panel_child(spec, args.n, args.presses, args.key_budget,
                                         args.load_rounds, args.profile))
    print(RESULT + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--runs", type=int, default=2, help="runs per box")
    parser.add_argument("--epochs", type=int, default=100, help="epochs of history per run")
    parser.add_argument("--rounds", type=int, default=8, help="advancing rounds per N (core)")
    parser.add_argument("--presses", type=int, default=150, help="j/k presses per phase")
    parser.add_argument("--key-budget", type=float, default=15.0,
                        help="at most this many seconds of presses per phase")
    parser.add_argument("--load-rounds", type=int, default=1,
                        help="at least this many refresh rounds in the panel's load phase")
    parser.add_argument("--no-panel", dest="panel", action="store_false")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the panel under load; print where its CPU goes")
    parser.add_argument("--python-repeats", type=int, default=20)
    parser.add_argument("--child", choices=["core", "panel"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    args.nproc = len(os.sched_getaffinity(0))

    results: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()
    with scratch("gpurent-load-") as (tmp, servers):
        spec = start_fleet(tmp, max(args.boxes), args.runs, args.epochs, servers)
        setup = time.perf_counter() - t0
        spec_path = tmp / "spec.json"
        spec_path.write_text(json.dumps(spec.__dict__))
        print(f"{max(args.boxes)} sshd (real /usr/sbin/sshd, one per box) started and "
              f"{max(args.boxes) * args.runs} runs x {args.epochs} epochs written in "
              f"{setup:.1f} s", flush=True)
        box = box_python_costs(Path(spec.roots[0]), args.python_repeats)
        for n in sorted(args.boxes):
            print(f"N={n}: core ...", flush=True)
            results[n] = {"core": run_child("core", spec_path, n, args)}
            if args.panel:
                print(f"N={n}: panel ...", flush=True)
                results[n]["panel"] = run_child("panel", spec_path, n, args)
    total = time.perf_counter() - t0

    first = results[min(results)]["core"]
    info = machine("asyncssh", "textual", box_python=first["box_python"])
    print()
    print(f"gpurent-tui load benchmark, {info['date']}")
    print(machine_line(info, "asyncssh", "textual")
          + f"; boxes: python3 {info['box_python']}")
    code = code_under_test()
    print(code_line(code))
    print(f"boxes: real sshd processes on 127.0.0.1 (not in-process servers), {args.runs} runs "
          f"each, {args.epochs} epochs of history at the start; figures are medians over rounds")
    print()
    print_report(results, box, args, setup)
    print(f"total benchmark time {total:.0f} s")
    doc = {"benchmark": "gpurent-tui/load", "machine": info, "code": code,
           "args": {k: v for k, v in vars(args).items() if k not in ("child", "spec", "n")},
           "boxes_kind": "real sshd", "box_python_costs": box,
           "results": {str(n): r for n, r in results.items()}, "total_s": round(total, 1)}
    print_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
