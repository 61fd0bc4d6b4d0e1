"""The fleet at 100, 500 and 1,000 boxes: a refresh round, memory, a /metrics scrape,
and the panel's keys and idle CPU at the largest size.

Why: a team watches up to 1,000 boxes from one jump host. What must stay
bounded there is the client: one refresh round of every box through the real
runtime (tui/runtime/fleet.py, the same one the panel and `watch` run), the
memory of holding N boxes, a Prometheus scrape of the real exporter
(tui/runtime/metrics.py over HTTP on 127.0.0.1), and the panel's key -> frame
and idle CPU with N boxes in its list.

The boxes: real SSH servers (asyncssh) on 127.0.0.1, one port per box, all
served by ONE child process with one event loop (1,000 OpenSSH daemons and
1,000 resident `python3` probes would need ~11 GiB and most of the cores of
the machine measuring them). Each box answers the kept probe's protocol with
the probe's own code (tui/onbox/probe.py: apply_delta, answer_payload, adopt,
framed as on a box) run in that process on real LibreYOLO-shaped run files,
and checks the client sent the real probe program first. So the client sees
the bytes and the framing a real box sends; what is not real is the boxes'
CPU: here every box's probe shares one core with the others (refresh.py
measures one box's probe on a real sshd and python3). The server process's
CPU is reported apart from the client's.

Per size: the runs are written (R runs of E epochs per box), the runtime
connects and loads every box (cold), then --rounds rounds in which every run
writes one epoch and every box is poked, each timed until the runtime holds
every new epoch (p50 / p95); the client's RSS before the runtime and after
the rounds; --scrapes GETs of /metrics (p50 / p95, bytes, series). At the
largest size (or --panel-boxes) the live panel (GpurentApp, headless) over the
same boxes: idle CPU (CPU seconds per wall second, nothing changing on the
boxes, refreshed every --panel-refresh seconds) and key -> frame of j/k, of a
filter keystroke and of a jump to a box by name (`/NAME` enter).

With --jump, each size is measured a second time, the same boxes reached through
ONE jump host (an asyncssh server in a process of its own that takes the client's
login and forwards its direct-tcpip channels to the boxes' ports, as the fleet
config's `jump = "root@127.0.0.1:PORT"` says): the same figures but the scrape,
the jump host's CPU, and the logins each server saw (one at the jump host, one
per box, is what tui/remote/hops.py promises). --per-jump-host sets the fleet's
[connect] per_jump_host for that run.

    python benchmarks/scale.py [--boxes 100,500,1000] [--runs 2] [--epochs 20]
                               [--rounds 5] [--scrapes 10] [--panel-boxes N | --no-panel]
                               [--jump [--per-jump-host N]]

Raises this process's soft RLIMIT_NOFILE to the hard limit when N boxes need
more descriptors (the box server does the same for itself). Only 127.0.0.1;
the temp dir and the box server end with the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

import asyncssh  # noqa: E402
from _fleet import (  # noqa: E402
    Run,
    advance_all,
    box_name,
    code_line,
    code_under_test,
    machine,
    machine_busy_seconds,
    make_runs,
    pct,
    print_json,
    proc_cpu_seconds,
    scratch,
    vm_kib,
    write_fleet,
)

from tui.demo.servers import NOT_FOUND, BoxServer  # noqa: E402
from tui.model.box import BoxState, Connection  # noqa: E402
from tui.model.config import DEFAULT_REFRESH_SECONDS, FleetConfig  # noqa: E402
from tui.model.fanout import DEFAULT_PER_JUMP_HOST  # noqa: E402
from tui.onbox import probe as probe_code  # noqa: E402
from tui.onbox.prelude import frame  # noqa: E402
from tui.remote.programs import SERVE_COMMAND  # noqa: E402
from tui.remote.session import kept_probe_loader  # noqa: E402
from tui.runtime.events import BoxChanged, Event  # noqa: E402
from tui.runtime.fleet import Runtime  # noqa: E402
from tui.runtime.metrics import FleetTally, serve_metrics  # noqa: E402

SIZE = (160, 48)
FDS_PER_BOX = 4  # the client's socket, and headroom for what a watcher opens besides


# --- the boxes: one process, one loop, a port per box ------------------------------------


class ProbeBox(BoxServer):
    """A box that runs the kept probe's code in this process instead of a `python3` child."""

    loader = b""

    async def _run(self, process: asyncssh.SSHServerProcess) -> None:
        self.stats.sessions += 1
        if process.command != SERVE_COMMAND:  # one-shot: not served here
            with contextlib.suppress(asyncssh.Error, OSError):
                process.exit(NOT_FOUND)
            return
        self.stats.probes += 1
        code = 0
        try:
            if await process.stdin.readline() != self.loader:
                code = 2  # not the probe: nothing else runs here
            else:
                req: dict[str, Any] = {}
                boot = probe_code._boot_time()
                while line := await process.stdin.readline():
                    delta = json.loads(line)
                    probe_code.apply_delta(req, delta)
                    payload, _, answer = probe_code.answer_payload(req, boot)
                    process.stdout.write(frame(delta["nonce"], payload))
                    await process.stdout.drain()
                    probe_code.adopt(req, answer)
        except (asyncssh.Error, OSError, ValueError, KeyError):
            code = 2
        with contextlib.suppress(asyncssh.Error, OSError):
            process.exit(code)


def raise_fd_limit(needed: int) -> tuple[int, int]:
    """The soft descriptor limit raised to the hard one when `needed` is over it; the
    limit now and the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed > soft and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft, hard


async def serve_until_closed(servers: Sequence[BoxServer], told: dict[str, Any]) -> None:
    """Say `told` (ports, host key), then answer each `stats` line on stdin with what
    every server saw (logins, forwarded channels), until stdin ends; then close them."""
    print(json.dumps(told), flush=True)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        if line.strip() == "stats":
            print(json.dumps({"logins": [s.stats.logins for s in servers],
                              "connections": [s.stats.connections for s in servers],
                              "forwards": [len(s.stats.forwards) for s in servers]}),
                  flush=True)
    await asyncio.gather(*(s.close() for s in servers), return_exceptions=True)


def public_line(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


async def serve_boxes(count: int, client_public: str) -> None:
    """The box server's main: listen, say the ports and host key, serve until stdin ends."""
    raise_fd_limit(count * 3 + 64)
    ProbeBox.loader = kept_probe_loader()
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    boxes = [ProbeBox(box_name(i), client_public, host_key=host_key, keep_probe=True)
             for i in range(count)]
    for box in boxes:
        await box.start()
    await serve_until_closed(boxes, {"ports": [b.port for b in boxes],
                                     "host_key": public_line(host_key)})


async def serve_jump(count: int, client_public: str) -> None:
    """The jump host's main: one asyncssh server that takes the client's login and
    forwards its direct-tcpip channels to 127.0.0.1 (asyncssh opens each TCP connection
    itself), in a process of its own so that its CPU is told apart."""
    raise_fd_limit(count * 3 + 64)  # a channel in, a socket out per box
    # As the client hangs up, the boxes' last words (exit statuses, closes) still come
    # in and are forwarded into the gone connection: asyncio warns of each such write.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    jump = BoxServer("jump", client_public, host_key=host_key, jump=True)
    await jump.start()
    await serve_until_closed([jump], {"ports": [jump.port], "host_key": public_line(host_key)})


class ServerProcess:
    """A server child process (its CPU is apart from the client's): box servers, or the
    jump host."""

    def __init__(self, argv: Sequence[str], home: Path, what: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(home)}  # no watchdog state of this user's
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {what} did not start")
        told = json.loads(line)
        self.ports: list[int] = told["ports"]
        self.host_key: str = told["host_key"]

    def cpu(self) -> float:
        return proc_cpu_seconds(self.proc.pid)

    def stats(self) -> dict[str, list[int]]:
        """What each server of the process saw so far: logins, connections, forwards."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the process (stdin closed), killing it after 30 s."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class BoxProcess(ServerProcess):
    """The boxes: one asyncssh server per box, all in one child process."""

    def __init__(self, count: int, client_public: str, home: Path) -> None:
        super().__init__(["--serve", str(count), client_public], home, "box server")


class JumpProcess(ServerProcess):
    """The one jump host every box is reached through (with --jump)."""

    def __init__(self, count: int, client_public: str, home: Path) -> None:
        super().__init__(["--serve-jump", str(count), client_public], home, "jump host")


def fleet_for(tmp: Path, server: BoxProcess, identity: Path, roots: Sequence[Path],
              tag: str, refresh: float, jump: JumpProcess | None = None,
              connect: dict[str, int] | None = None) -> FleetConfig:
    """The boxes' fleet.toml with every host key pinned: direct, or every box behind
    `jump` (`jump = "root@127.0.0.1:PORT"`, as a user writes it)."""
    known = tmp / f"known_hosts-{tag}"
    pinned = [(port, server.host_key) for port in server.ports]
    if jump is not None:
        pinned.append((jump.ports[0], jump.host_key))
    known.write_text("".join(f"[127.0.0.1]:{port} {key}\n" for port, key in pinned))
    return write_fleet(tmp / f"fleet-{tag}.toml", known_hosts=known, identity=identity,
                       ports=server.ports, roots=roots, refresh_seconds=refresh,
                       timeout_seconds=120,
                       jump=None if jump is None else f"root@127.0.0.1:{jump.ports[0]}",
                       connect=connect)


# --- the runtime: rounds, memory, scrapes ------------------------------------------------


def holds(state: BoxState, runs: Sequence[Run]) -> bool:
    """The box answered and holds every epoch written so far of every run."""
    if state.connection is not Connection.OK or len(state.runs) != len(runs):
        return False
    epochs = {str(r.path): r.epoch for r in runs}
    return all(epochs.get(r.path) == r.current_epoch and len(r.history) == r.current_epoch
               for r in state.runs)


class Rounds:
    """A sink that knows when every box holds what was written (no polling of 1,000 states)."""

    def __init__(self, runs: dict[str, list[Run]], tally: FleetTally) -> None:
        self.runs = runs
        self.tally = tally
        self.waiting: set[str] = set()
        self.done: asyncio.Future[None] | None = None

    def __call__(self, item: Event) -> None:
        self.tally(item)
        if isinstance(item, BoxChanged) and item.state.name in self.waiting \
                and holds(item.state, self.runs[item.state.name]):
            self.waiting.discard(item.state.name)
            if not self.waiting and self.done is not None and not self.done.done():
                self.done.set_result(None)

    async def wait_all(self, states: dict[str, BoxState], timeout: float, what: str) -> None:
        self.waiting = {n for n, s in states.items() if not holds(s, self.runs[n])}
        if not self.waiting:
            return
        self.done = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self.done, timeout)
        except TimeoutError:
            late = sorted(self.waiting)
            raise SystemExit(f"{what}: {len(late)} boxes still behind after {timeout:.0f} s "
                             f"({', '.join(late[:5])}: "
                             f"{[states[n].error for n in late[:3]]})") from None


def spread(values: Sequence[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 95), 1), "max_ms": round(max(ms), 1)}


def scrape(url: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        body = answer.read()
    return time.perf_counter() - start, body


def trimmed_rss_kib() -> int:
    """This process's RSS after a collection and handing freed heap back to the system,
    so that a runtime measured after another starts from a comparable baseline."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return vm_kib("VmRSS")


async def measure_runtime(fleet: FleetConfig, runs: dict[str, list[Run]], n: int,
                          args: argparse.Namespace, cpus: dict[str, Callable[[], float]],
                          scrapes: int) -> tuple[dict[str, Any], list[BoxState]]:
    """One runtime over the fleet: cold load, --rounds timed rounds, RSS, `scrapes`
    GETs of /metrics; `cpus` the server processes' CPU readers, each figure reported
    by name. The figures, and the runtime's last states."""
    out: dict[str, Any] = {}
    tally = FleetTally()
    rounds = Rounds(runs, tally)
    rss0 = trimmed_rss_kib()
    runtime = Runtime(fleet, rounds)

    def now() -> tuple[float, float, dict[str, float]]:
        return time.perf_counter(), time.process_time(), \
            {"machine": machine_busy_seconds(), **{k: f() for k, f in cpus.items()}}

    def others(cpu0: float, server0: dict[str, float]) -> float:
        """CPU the machine's other processes spent since (the other engineers' tests)."""
        ours = time.process_time() - cpu0 + sum(f() - server0[k] for k, f in cpus.items())
        return max(0.0, machine_busy_seconds() - server0["machine"] - ours)

    start, cpu0, server0 = now()
    runtime.start()
    try:
        await rounds.wait_all(runtime.states, 300, f"{n} boxes' first load")
        out["cold_s"] = round(time.perf_counter() - start, 2)
        out["cold_client_cpu_s"] = round(time.process_time() - cpu0, 2)
        for name, f in cpus.items():
            out[f"cold_{name}_cpu_s"] = round(f() - server0[name], 2)
        out["cold_others_cpu_s"] = round(others(cpu0, server0), 2)
        walls: list[float] = []
        client: list[float] = []
        servers: dict[str, list[float]] = {name: [] for name in [*cpus, "others"]}
        for _ in range(args.rounds):
            await asyncio.to_thread(advance_all, runs)
            start, cpu0, server0 = now()
            runtime.poke()
            await rounds.wait_all(runtime.states, 300, f"a round of {n} boxes")
            servers["others"].append(others(cpu0, server0))
            walls.append(time.perf_counter() - start)
            client.append(time.process_time() - cpu0)
            for name, f in cpus.items():
                servers[name].append(f() - server0[name])
        out["round"] = spread(walls)
        out["round_client_cpu_ms"] = round(1000 * statistics.median(client), 1)
        for name, values in servers.items():
            out[f"round_{name}_cpu_ms"] = round(1000 * statistics.median(values), 1)
        await asyncio.sleep(1.0)  # the coalesced money picture of the last round
        rss1 = vm_kib("VmRSS")
        out["rss_mib"] = round(rss1 / 1024, 1)
        out["rss_growth_mib"] = round((rss1 - rss0) / 1024, 1)
        out["rss_per_box_kib"] = round((rss1 - rss0) / n, 1)
        sessions = [w.session for w in runtime.watchers.values()]
        out["client_connects"] = sum(s.connects for s in sessions)
        out["client_refused"] = sum(s.refused for s in sessions)  # dropped, tried again
        if scrapes:
            metrics = serve_metrics(runtime, tally, "127.0.0.1", 0)
            try:
                times, body = [], b""
                for _ in range(scrapes):
                    took, body = await asyncio.to_thread(scrape, metrics.url)
                    times.append(took)
            finally:
                metrics.close()
            lines = body.decode().splitlines()
            out["scrape"] = spread(times)
            out["scrape_bytes"] = len(body)
            out["scrape_series"] = sum(1 for line in lines if line and line[0] != "#")
        states = list(runtime.states.values())
    finally:
        await runtime.aclose()
    return out, states


def logins_between(before: dict[str, list[int]], after: dict[str, list[int]]
                   ) -> dict[str, Any]:
    """What the servers of one process saw between two `stats`: logins per server (the
    fewest, the most, all), TCP connections and forwarded channels, all servers."""
    logins = [a - b for a, b in zip(after["logins"], before["logins"], strict=True)]
    return {"min": min(logins), "max": max(logins), "total": sum(logins),
            "connections": sum(after["connections"]) - sum(before["connections"]),
            "forwards": sum(after["forwards"]) - sum(before["forwards"])}


async def measure_size(tmp: Path, n: int, args: argparse.Namespace, identity: Path,
                       public: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every figure of one fleet size (and the panel's, when this is its size): the
    boxes reached directly, then (--jump) the same boxes through one jump host."""
    where = tmp / f"n{n}"
    t0 = time.perf_counter()
    roots, runs = make_runs(where, n, args.runs, args.epochs, time.time())
    server = BoxProcess(n, public, where / "home")
    out: dict[str, Any] = {"boxes": n, "runs": n * args.runs,
                           "setup_s": round(time.perf_counter() - t0, 1)}
    panel: dict[str, Any] | None = None
    jump: JumpProcess | None = None
    try:
        fleet = fleet_for(where, server, identity, roots, "core", 3600.0)
        print(f"  {n} boxes: connecting and loading ...", flush=True)
        before = server.stats()
        figures, states = await measure_runtime(fleet, runs, n, args, {"boxes": server.cpu},
                                                args.scrapes)
        out.update(figures)
        out["box_logins"] = logins_between(before, server.stats())
        print(f"  round p50 {out['round']['p50_ms']:.0f} ms, p95 {out['round']['p95_ms']:.0f} "
              f"ms; RSS +{out['rss_growth_mib']} MiB; scrape p50 {out['scrape']['p50_ms']:.1f} "
              f"ms", flush=True)
        if args.jump:
            jump = JumpProcess(n, public, where / "jump-home")
            print(f"  {n} boxes through one jump host: connecting and loading ...", flush=True)
            jumped = fleet_for(where, server, identity, roots, "jump", 3600.0, jump,
                               {"per_jump_host": args.per_jump_host}
                               if args.per_jump_host else None)
            before, jump0 = server.stats(), jump.stats()
            figures, _ = await measure_runtime(jumped, runs, n, args,
                                               {"boxes": server.cpu, "jump": jump.cpu}, 0)
            figures["box_logins"] = logins_between(before, server.stats())
            figures["jump_logins"] = logins_between(jump0, jump.stats())
            out["jump"] = figures
            print(f"  round p50 {figures['round']['p50_ms']:.0f} ms, p95 "
                  f"{figures['round']['p95_ms']:.0f} ms; RSS +{figures['rss_growth_mib']} MiB; "
                  f"logins: jump host {figures['jump_logins']['total']}, boxes "
                  f"{figures['box_logins']['min']}-{figures['box_logins']['max']} each",
                  flush=True)
        if n == args.panel_boxes:
            panel = {"boxes": n, "fixed": await measure_fixed(fleet, states, args)}
            try:
                panel["live"] = await measure_panel(where, server, identity, roots, runs, args)
            except SystemExit as failed:  # a panel that cannot keep up is a figure too
                print(f"  the live panel: {failed}", flush=True)
                panel["live"] = {"failed": str(failed)}
    finally:
        if jump is not None:
            jump.close()
        server.close()
    return out, panel


# --- the panel at N boxes ---------------------------------------------------------------


async def frame_after(app: Any, send: Callable[[], None], done: Callable[[], bool]
                      ) -> float | None:
    """Seconds from `send` (a key handed to the driver) to the first frame after which
    `done` holds; None if none came within 10 s."""
    painted: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def hook(now: float) -> bool:
        if done():
            if not painted.done():
                painted.set_result(now)
            return True
        return False

    app.frame_hooks.append(hook)
    start = time.perf_counter()
    send()
    try:
        return await asyncio.wait_for(painted, 10.0) - start
    except TimeoutError:
        app.frame_hooks = [h for h in app.frame_hooks if h is not hook]
        return None


def key_sender(app: Any, key: str, character: str | None) -> Callable[[], None]:
    from textual import events

    def send() -> None:
        event = events.Key(key, character)
        event.set_sender(app)
        app._driver.send_message(event)
    return send


async def typing_latencies(app: Any, text: str, rng: random.Random) -> list[float]:
    """`/` then `text` one key at a time, each timed to the frame with the filter applied;
    then escape."""
    screen = app.screen_stack[0]
    values: list[float] = []
    await frame_after(app, key_sender(app, "slash", "/"),
                      lambda: screen.query_one("#filter").display)
    for at in range(1, len(text) + 1):
        typed = text[:at]

        def applied(typed: str = typed) -> bool:
            return bool(screen.filter == typed)
        took = await frame_after(app, key_sender(app, text[at - 1], text[at - 1]), applied)
        if took is not None:
            values.append(took)
        await asyncio.sleep(rng.uniform(0.03, 0.08))
    await frame_after(app, key_sender(app, "escape", None), lambda: screen.filter == "")
    await asyncio.sleep(0.3)
    return values


async def jump_latencies(app: Any, names: Sequence[str]) -> list[float] | None:
    """`/NAME` then enter: enter timed to the frame with the cursor on NAME's run, shown
    (None where the panel does not jump: the code before the jump existed)."""
    screen = app.screen_stack[0]
    values: list[float] = []
    for name in names:
        await frame_after(app, key_sender(app, "slash", "/"),
                          lambda: screen.query_one("#filter").display)
        for ch in name:
            await frame_after(app, key_sender(app, ch, ch), lambda: True)
        await asyncio.sleep(0.05)

        def there(name: str = name) -> bool:
            key = screen.selected
            return key is not None and key[0] == name and screen.fleet_list.is_visible(key) \
                and screen.filter == ""
        took = await frame_after(app, key_sender(app, "enter", "\r"), there)
        if took is None:
            print(f"  `/{name}` enter did not land the cursor on {name}'s run", flush=True)
            await frame_after(app, key_sender(app, "escape", None), lambda: True)
            return None
        values.append(took)
        await asyncio.sleep(0.2)
    return values


async def panel_keys(app: Any, n: int, args: argparse.Namespace, rng: random.Random
                     ) -> dict[str, Any]:
    """j/k, a filter keystroke and a jump, each timed key -> frame."""
    import floor

    out: dict[str, Any] = {}
    keys = await floor.key_latencies(app, args.presses, 30.0, rng)
    out["keys"] = {k: keys[k] for k in ("n", "misses", "median_ms", "p95_ms", "max_ms")
                   if k in keys}
    out["filter"] = spread(await typing_latencies(app, "box05", rng))
    names = [box_name(i) for i in rng.sample(range(n), min(5, n))]
    jumps = await jump_latencies(app, names)
    out["jump"] = spread(jumps) if jumps else {"n": 0}
    return out


async def measure_fixed(fleet: FleetConfig, states: list[BoxState], args: argparse.Namespace
                        ) -> dict[str, Any]:
    """The panel over the runtime's last states, with no watchers (`live=False`): its own
    drawing alone, start-up to every row, and the keys."""
    import floor

    n = len(states)
    print(f"  the panel over {n} fixed snapshots ...", flush=True)
    app = floor.panel_class()(fleet, states=states, live=False)
    start = time.perf_counter()
    async with app.run_test(size=SIZE):
        while len(floor.Driven(app).order()) != n * args.runs:
            if time.perf_counter() - start > 120:
                raise SystemExit(f"the panel did not show {n} boxes' runs in 120 s")
            await asyncio.sleep(0.05)
        out: dict[str, Any] = {"first_rows_s": round(time.perf_counter() - start, 2)}
        await asyncio.sleep(args.settle)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.sleep(min(args.idle, 10.0))
        out["idle_cpu_per_s"] = round((time.process_time() - cpu0)
                                      / (time.perf_counter() - wall0), 4)
        out.update(await panel_keys(app, n, args, random.Random(26)))
    return out


async def measure_panel(where: Path, server: BoxProcess, identity: Path,
                        roots: Sequence[Path], runs: dict[str, list[Run]],
                        args: argparse.Namespace) -> dict[str, Any]:
    import floor

    n = len(server.ports)
    fleet = fleet_for(where, server, identity, roots, "panel", args.panel_refresh)
    app = floor.panel_class()(fleet)
    rng = random.Random(26)
    out: dict[str, Any] = {"boxes": n, "refresh_s": args.panel_refresh}
    print(f"  the panel at {n} boxes ...", flush=True)
    start = time.perf_counter()
    rss0 = vm_kib("VmRSS")
    async with app.run_test(size=SIZE):
        deadline = time.perf_counter() + args.load_timeout
        while not all(holds(s, runs[s.name]) for s in app.states.values()) \
                or len(floor.Driven(app).order()) != n * args.runs:
            if time.perf_counter() > deadline:
                loaded = sum(holds(s, runs[s.name]) for s in app.states.values())
                raise SystemExit(f"the panel did not load {n} boxes in "
                                 f"{args.load_timeout:.0f} s ({loaded} loaded)")
            await asyncio.sleep(0.5)
        out["all_loaded_s"] = round(time.perf_counter() - start, 1)
        await asyncio.sleep(args.settle)
        out["rss_growth_mib"] = round((vm_kib("VmRSS") - rss0) / 1024, 1)
        wall0, cpu0, box0, busy0 = (time.perf_counter(), time.process_time(), server.cpu(),
                                    machine_busy_seconds())
        await asyncio.sleep(args.idle)
        wall = time.perf_counter() - wall0
        cpu, boxes = time.process_time() - cpu0, server.cpu() - box0
        out["idle"] = {"wall_s": round(wall, 1), "cpu_per_s": round(cpu / wall, 4),
                       "boxes_cpu_per_s": round(boxes / wall, 4),
                       "others_cpu_per_s": round(max(0.0, machine_busy_seconds() - busy0
                                                     - cpu - boxes) / wall, 3)}
        with floor.LoopLag() as lag:
            out.update(await panel_keys(app, n, args, rng))
        out["loop"] = {k: v for k, v in lag.summary().items() if k != "longest_steps"}
        out["loop"]["longest"] = lag.summary().get("longest_steps", [])[:2]
        await asyncio.sleep(0.5)
    return out


# --- report ------------------------------------------------------------------------------


def growth(sizes: list[dict[str, Any]], *path: str) -> str:
    def get(d: dict[str, Any]) -> float:
        for key in path:
            d = d[key]
        return float(d)  # type: ignore[arg-type]
    if len(sizes) < 2:
        return ""
    first, last = get(sizes[0]), get(sizes[-1])
    return f"x{last / first:.1f}" if first else "-"


def print_report(sizes: list[dict[str, Any]], panel: dict[str, Any] | None) -> None:
    heads = [f"N={s['boxes']}" for s in sizes]
    ratio = f"{sizes[0]['boxes']}->{sizes[-1]['boxes']}" if len(sizes) > 1 else ""
    rows: list[tuple[str, list[str], str]] = [
        ("cold load (connect + full history)", [f"{s['cold_s']:.1f} s" for s in sizes],
         growth(sizes, "cold_s")),
        ("refresh round p50", [f"{s['round']['p50_ms']:.0f} ms" for s in sizes],
         growth(sizes, "round", "p50_ms")),
        ("refresh round p95", [f"{s['round']['p95_ms']:.0f} ms" for s in sizes],
         growth(sizes, "round", "p95_ms")),
        ("client CPU per round", [f"{s['round_client_cpu_ms']:.0f} ms" for s in sizes],
         growth(sizes, "round_client_cpu_ms")),
        ("boxes' CPU per round (one process)", [f"{s['round_boxes_cpu_ms']:.0f} ms"
                                                for s in sizes],
         growth(sizes, "round_boxes_cpu_ms")),
        ("client RSS (growth over the runtime)", [f"{s['rss_mib']:.0f} (+{s['rss_growth_mib']:.0f})"
                                                  " MiB" for s in sizes],
         growth(sizes, "rss_growth_mib")),
        ("RSS per box", [f"{s['rss_per_box_kib']:.0f} KiB" for s in sizes],
         growth(sizes, "rss_per_box_kib")),
        ("/metrics scrape p50", [f"{s['scrape']['p50_ms']:.1f} ms" for s in sizes],
         growth(sizes, "scrape", "p50_ms")),
        ("/metrics scrape p95", [f"{s['scrape']['p95_ms']:.1f} ms" for s in sizes],
         growth(sizes, "scrape", "p95_ms")),
        ("/metrics bytes / series", [f"{s['scrape_bytes'] / 1024:.0f} KiB / "
                                     f"{s['scrape_series']}" for s in sizes],
         growth(sizes, "scrape_bytes")),
    ]
    width = 19
    print(f"{'':40}" + "".join(f"{h:>{width}}" for h in heads) + f"{ratio:>12}")
    for label, cells, grown in rows:
        print(f"{label:40}" + "".join(f"{c:>{width}}" for c in cells) + f"{grown:>12}")
    if panel is None:
        return
    print()
    fixed, live = panel["fixed"], panel.get("live", {})
    print(f"the panel at {panel['boxes']} boxes, headless {SIZE[0]}x{SIZE[1]}:")
    print(f"  fixed snapshots (no watchers): every row on screen {fixed['first_rows_s']} s "
          f"after start, idle {fixed['idle_cpu_per_s']:.3f} CPU s per wall s")
    if "failed" in live:
        print(f"  live: {live['failed']}")
    elif live:
        idle = live["idle"]
        print(f"  live (every box refreshed every {live['refresh_s']:g} s): loaded in "
              f"{live['all_loaded_s']} s, RSS +{live['rss_growth_mib']} MiB; idle "
              f"{idle['cpu_per_s']:.3f} CPU s per wall s over {idle['wall_s']} s (the boxes' "
              f"server {idle['boxes_cpu_per_s']:.3f}, others {idle['others_cpu_per_s']:.3f})")
    for label, key in (("key -> frame, j/k", "keys"),
                       ("key -> frame, a filter keystroke", "filter"),
                       ("enter -> frame, /NAME enter (jump)", "jump")):
        cells = []
        for name, d in (("fixed", fixed.get(key, {})), ("live", live.get(key, {}))):
            if d.get("n"):
                p50 = d.get("p50_ms", d.get("median_ms"))
                cells.append(f"{name} p50 {p50} / p95 {d.get('p95_ms')} / max "
                             f"{d.get('max_ms')} ms (n={d['n']})")
            else:
                cells.append(f"{name} -")
        print(f"  {label:36} " + "; ".join(cells))
    if live.get("loop"):
        loop = live["loop"]
        print(f"  live, the loop's longest step while keys were timed: "
              f"{loop.get('longest_step_cpu_ms')} ms CPU "
              + "; ".join(f"{s['cpu_ms']} ms {s['ran']}" for s in loop.get("longest", [])))


def print_jump_report(sizes: list[dict[str, Any]], per_jump_host: int) -> None:
    """Direct against one jump host, side by side per size."""
    def both(key: Callable[[dict[str, Any]], str]) -> list[str]:
        return [cell for s in sizes for cell in (key(s), key(s["jump"]))]

    def logins(d: dict[str, Any]) -> str:
        box = d["box_logins"]
        each = f"{box['min']}" if box["min"] == box["max"] else f"{box['min']}-{box['max']}"
        return f"{each} x {box['total']}"

    rows: list[tuple[str, list[str]]] = [
        ("cold load (connect, host keys, answers)", both(lambda d: f"{d['cold_s']:.1f} s")),
        ("refresh round p50", both(lambda d: f"{d['round']['p50_ms']:.0f} ms")),
        ("refresh round p95", both(lambda d: f"{d['round']['p95_ms']:.0f} ms")),
        ("client CPU per round", both(lambda d: f"{d['round_client_cpu_ms']:.0f} ms")),
        ("client CPU, cold load", both(lambda d: f"{d['cold_client_cpu_s']:.1f} s")),
        ("boxes' CPU per round", both(lambda d: f"{d['round_boxes_cpu_ms']:.0f} ms")),
        ("jump host's CPU per round", both(lambda d: f"{d['round_jump_cpu_ms']:.0f} ms"
                                           if "round_jump_cpu_ms" in d else "-")),
        ("client RSS growth", both(lambda d: f"+{d['rss_growth_mib']:.0f} MiB")),
        ("logins at the jump host", both(lambda d: str(d["jump_logins"]["total"])
                                         if "jump_logins" in d else "-")),
        ("logins per box x boxes", both(logins)),
        ("channels forwarded by the jump host", both(lambda d: str(d["jump_logins"]["forwards"])
                                                     if "jump_logins" in d else "-")),
        ("handshakes dropped, tried again", both(lambda d: str(d["client_refused"]))),
        ("others' CPU per round (not this benchmark)",
         both(lambda d: f"{d['round_others_cpu_ms']:.0f} ms")),
    ]
    heads = [f"{s['boxes']} {how}" for s in sizes for how in ("direct", "jump")]
    width = 12
    print("direct, and the same boxes through ONE jump host (jump measured second; "
          f"[connect] per_jump_host = {per_jump_host}):")
    print(f"{'':40}" + "".join(f"{h:>{width}}" for h in heads))
    for label, cells in rows:
        print(f"{label:40}" + "".join(f"{c:>{width}}" for c in cells))


async def benchmark(args: argparse.Namespace, tmp: Path
                    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    identity = tmp / "id_ed25519"
    key.write_private_key(identity)
    identity.chmod(0o600)
    public = key.export_public_key("openssh").decode().strip()
    sizes, panel = [], None
    for n in args.sizes:
        print(f"N={n}: writing {n * args.runs} runs x {args.epochs} epochs, starting the "
              "boxes ...", flush=True)
        figures, shown = await measure_size(tmp, n, args, identity, public)
        sizes.append(figures)
        panel = shown or panel
    return sizes, panel


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", default="100,500,1000",
                        help="fleet sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=2, help="runs per box")
    parser.add_argument("--epochs", type=int, default=20, help="epochs of history per run")
    parser.add_argument("--rounds", type=int, default=5, help="timed refresh rounds per size")
    parser.add_argument("--scrapes", type=int, default=10, help="/metrics GETs per size")
    parser.add_argument("--panel-boxes", type=int, default=None,
                        help="the size the panel is measured at (default: the largest)")
    parser.add_argument("--no-panel", action="store_true")
    parser.add_argument("--panel-refresh", type=float, default=DEFAULT_REFRESH_SECONDS,
                        help="the panel's refresh_seconds while its idle CPU is measured")
    parser.add_argument("--idle", type=float, default=20.0, help="idle CPU window, seconds")
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--load-timeout", type=float, default=400.0,
                        help="seconds the live panel may take to load every box")
    parser.add_argument("--presses", type=int, default=60, help="j/k presses timed")
    parser.add_argument("--jump", action="store_true",
                        help="also reach the same boxes through one jump host, side by side")
    parser.add_argument("--per-jump-host", type=int, default=None,
                        help="with --jump: the fleet's [connect] per_jump_host (default: "
                             "the config's default)")
    parser.add_argument("--serve", nargs=2, metavar=("N", "KEY"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-jump", nargs=2, metavar=("N", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve_boxes(int(args.serve[0]), args.serve[1]))
        return 0
    if args.serve_jump:
        asyncio.run(serve_jump(int(args.serve_jump[0]), args.serve_jump[1]))
        return 0
    args.sizes = [int(s) for s in args.boxes.split(",") if s.strip()]
    if args.panel_boxes is None:
        args.panel_boxes = max(args.sizes)
    if args.no_panel:
        args.panel_boxes = 0
    soft, hard = raise_fd_limit(max(args.sizes) * FDS_PER_BOX + 256)
    t0 = time.perf_counter()
    with scratch("gpurent-scale-") as (tmp, _):
        sizes, panel = asyncio.run(benchmark(args, tmp))
    total = time.perf_counter() - t0
    info = machine("asyncssh", "textual", "prometheus-client", fd_soft=soft, fd_hard=hard)
    code = code_under_test()
    print()
    print(f"gpurent-tui at scale, {info['date']}")
    print(f"machine: nproc {info['nproc']}, python {info['python']}, asyncssh "
          f"{info['asyncssh']}, textual {info['textual']}, {info['platform']}, load average "
          f"now {info['loadavg']}, fd limit {soft} (hard {hard})")
    print(code_line(code))
    print(f"fleet: {args.runs} runs x {args.epochs} epochs per box; boxes are asyncssh servers "
          "in one child process answering with the probe's code; every round, every run "
          f"writes an epoch and every box is poked ({args.rounds} rounds)")
    print()
    print_report(sizes, panel)
    if args.jump:
        print()
        print_jump_report(sizes, args.per_jump_host or DEFAULT_PER_JUMP_HOST)
    print(f"total benchmark time {total:.0f} s")
    print_json({"benchmark": "gpurent-tui/scale", "machine": info, "code": code,
                "args": {k: v for k, v in vars(args).items()
                         if k not in ("serve", "serve_jump")},
                "sizes": sizes, "panel": panel, "total_s": round(total, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
