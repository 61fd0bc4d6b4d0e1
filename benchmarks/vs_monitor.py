"""The panel's probe side by side with `libreyolo monitor` behind `ssh -L` and a browser.

Why: without gpurent-tui, the usual way to watch a LibreYOLO run on a rented
box is `libreyolo monitor` on the box, `ssh -L` to reach it, and a browser tab
whose page polls the monitor's HTTP API. That page re-downloads the whole
metric history every tick. This script puts numbers on what each way costs per
refresh, on the same real runs behind the same sshd.

Training (cached): real yolox-n runs of 100, 500 and 2,000 epochs, trained on
the CPU at imgsz 64 as tests/support/libreyolo_train.py does, with LibreYOLO's own
defaults for validation (every 10 epochs) and checkpoints (every 10 epochs), and
early stopping off (the toy data never improves the metric), one torch thread.
They are cached under --cache (default ~/.cache/gpurent-bench/runs, ~2.9 GB with
the checkpoints), so only the first run of this script trains: here 2 + 6 + 19
min (0.5 s an epoch on a shared 2-core machine, not the 0.2 s of an idle one).

What their page does (read from libreyolo 1.6.0's ui/train_monitor_page.py and
ui/train_monitor.py): a run's tab runs `runTick` = GET /api/status, then
GET /api/metrics, /api/log and /api/images at once; again after 2 s while the
run is running, 8 s once it completed or failed. /api/metrics is the whole
metrics.jsonl parsed into {columns, rows}; /api/log is the last 200,000 bytes
of train.log; the server speaks HTTP/1.0 and closes every connection, so each
request is a new TCP connection through the tunnel (a new SSH channel). Opening
the tab first loads the page itself (GET /?run=...).

Theirs here: `libreyolo monitor <root> --no-browser` started on the "box" over
an SSH session, reached through an asyncssh `forward_local_port` on a second
connection (what `ssh -L` does); one refresh = one runTick, the requests sent
with a browser's headers and the JSON parsed, as the page does. Ours: a
BoxWatcher per run on its own kept-open session; cold = the first
`refresh(catch_up=True)` on a just-opened session (the SSH login is timed apart,
as theirs' tunnel is already open), against theirs' page load + first tick,
--cold-rounds times each; steady = `refresh()` on the finished run (idle: both
sides then see nothing new; their bytes do not depend on that, ours do, see
refresh.py for the one-epoch-advanced figures). Rounds alternate ours/theirs so
drift in the machine's load hits both.

Bytes: payload (ours: the probe and its compressed answer; theirs: HTTP request
and response, headers included) and the TCP payload of the SSH connection
(TCP_INFO: SSH framing, MACs, channel open/close). SSH compression is off on
both (asyncssh's default, as OpenSSH's `ssh` client's). CPU: this process
(client) and, apart, the box (sshd, the probe's python3, the monitor server).

    python benchmarks/vs_monitor.py [--lengths 100 500 2000] [--rounds 10] [--cold-rounds 3]
                                    [--cache ~/.cache/gpurent-bench/runs] [--train-only]

Only 127.0.0.1; the sshd, the monitor and the temp dir are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncssh
from _fleet import (
    code_line,
    code_under_test,
    fleet_config,
    machine,
    machine_line,
    print_json,
    proc_cpu_seconds,
    scratch,
    sshd_pids,
    start_servers,
    tcp_bytes,
    tree_cpu_seconds,
    vm_kib,
    wire_bytes,
)
from support.libreyolo_train import make_dataset, read_status
from support.sshd import Sshd, free_port, make_keypair

from tui.model.box import Connection
from tui.model.runs import Health
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher

LENGTHS = (100, 500, 2000)
DEFAULT_CACHE = Path("~/.cache/gpurent-bench/runs")
EVAL_INTERVAL = 10  # LibreYOLO's defaults: validation and epoch_<N>.pt every 10 epochs
SAVE_PERIOD = 10
# tests/support/libreyolo_train.py's child, plus patience=0: this toy data set never improves
# the metric, and LibreYOLO's default early stopping (patience 50) would end a
# 100-epoch run at epoch 60 with state "completed".
TRAIN_SCRIPT = r"""
import json
import sys

import libreyolo

params = json.loads(sys.argv[1])
model = libreyolo.LibreYOLOX(None, size="n", nb_classes=2, device="cpu")
model.train(data=params["data"], epochs=params["epochs"], batch=8, imgsz=64, device="cpu",
            workers=0, project=params["project"], name=params["name"], exist_ok=True,
            pretrained=False, amp=False, eval_interval=params["eval_interval"],
            save_period=params["save_period"], patience=0)
"""


# --- real runs, trained once and cached --------------------------------------------


def cache_dir(cache: Path) -> Path:
    """Runs are keyed by the LibreYOLO version that wrote them."""
    return cache.expanduser() / f"libreyolo-{metadata.version('libreyolo')}"


def run_paths(cache: Path, epochs: int) -> tuple[Path, Path, Path]:
    """(runs root, run dir, marker): one runs root per length, so each box sees one run."""
    base = cache_dir(cache)
    root = base / f"e{epochs}"
    return root, root / f"yolox-n-e{epochs}", base / f"e{epochs}.json"


def cached_run(cache: Path, epochs: int) -> dict[str, Any] | None:
    """The marker of a finished cached run, or None if it must be (re)trained."""
    _, run, marker = run_paths(cache, epochs)
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    status = read_status(run)
    if (not status or status.get("state") != "completed"
            or status.get("completed_epochs") != epochs):
        return None
    return meta if isinstance(meta, dict) else None


def train_run(cache: Path, epochs: int) -> dict[str, Any]:
    """Train one real run on the CPU (LibreYOLO writes every file); marker written last."""
    root, run, marker = run_paths(cache, epochs)
    shutil.rmtree(root, ignore_errors=True)
    marker.unlink(missing_ok=True)
    root.mkdir(parents=True)
    data = cache_dir(cache) / "dataset" / "data.yaml"
    if not data.is_file():
        make_dataset(data.parent)
    log = cache_dir(cache) / f"e{epochs}.train-output.txt"
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    params = {"data": str(data.resolve()), "epochs": epochs, "project": str(root),
              "name": run.name, "eval_interval": EVAL_INTERVAL, "save_period": SAVE_PERIOD}
    # One torch thread: on a small machine shared with other work, two threads that
    # spin-wait for each other made epochs several times slower (same files either way).
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", TRAIN_SCRIPT, json.dumps(params)],
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    shown = -1
    try:
        while proc.poll() is None:
            time.sleep(2)
            status = read_status(run) or {}
            epoch = status.get("completed_epochs") or 0
            if epoch // 100 != shown // 100:
                shown = epoch
                print(f"  training {epochs}-epoch run: epoch {epoch} after "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    seconds = time.perf_counter() - start
    status = read_status(run) or {}
    if (proc.returncode != 0 or status.get("state") != "completed"
            or status.get("completed_epochs") != epochs):
        raise SystemExit(f"training {epochs} epochs failed (exit {proc.returncode}, "
                         f"state {status.get('state')}); see {log}")
    meta = {"epochs": epochs, "train_wall_s": round(seconds, 1),
            "trainer_seconds": status.get("total_seconds"),
            "libreyolo": metadata.version("libreyolo"), "torch": metadata.version("torch"),
            "trained_at": datetime.now(UTC).isoformat(), "eval_interval": EVAL_INTERVAL,
            "save_period": SAVE_PERIOD, "patience": 0, "imgsz": 64, "model": "yolox-n",
            "torch_threads": 1}
    marker.write_text(json.dumps(meta, indent=1))
    print(f"  trained {epochs} epochs in {seconds:.0f} s", flush=True)
    return meta


def ensure_runs(cache: Path, lengths: list[int]) -> dict[int, dict[str, Any]]:
    """Every length's run, from the cache or trained now (with how long training took)."""
    metas: dict[int, dict[str, Any]] = {}
    for epochs in lengths:
        meta = cached_run(cache, epochs)
        if meta is None:
            print(f"no cached {epochs}-epoch run under {cache_dir(cache)}: training it "
                  f"(about {epochs * 0.3 / 60 + 0.3:.0f} min) ...", flush=True)
            meta = {**train_run(cache, epochs), "cached": False}
        else:
            meta = {**meta, "cached": True}
        metas[epochs] = meta
    return metas


# --- their way: libreyolo monitor behind a local port forward ------------------------

# What Chrome sends with a same-origin fetch() (the page's `j(url)`), give or take a
# version number: ~600 bytes up per request, every tick.
BROWSER_HEADERS = (
    "Connection: keep-alive\r\n"
    'sec-ch-ua-platform: "Linux"\r\n'
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/142.0.0.0 Safari/537.36\r\n"
    'sec-ch-ua: "Chromium";v="142", "Google Chrome";v="142", "Not_A Brand";v="99"\r\n'
    "sec-ch-ua-mobile: ?0\r\n"
    "Accept: */*\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-Mode: cors\r\n"
    "Sec-Fetch-Dest: empty\r\n"
    "Referer: {referer}\r\n"
    "Accept-Encoding: gzip, deflate, br, zstd\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
)
TICK_RUNNING_S = 2.0  # runTick's setTimeout: 2 s while running, 8 s once done
TICK_DONE_S = 8.0
OUR_REFRESH_S = 5.0  # the panel's default refresh_seconds


@dataclass
class Http:
    """One request through the tunnel: bytes each way (headers included) and the body."""

    sent: int
    received: int
    body: bytes


async def http_get(port: int, path: str, referer: str) -> Http:
    """A GET as the page's fetch() makes it; the monitor (HTTP/1.0) closes after each."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request = (f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n"
                   + BROWSER_HEADERS.format(referer=referer) + "\r\n").encode("ascii")
        writer.write(request)
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.0 200"):
        raise SystemExit(f"monitor answered {head[:80]!r} to {path}")
    return Http(len(request), len(data), body)


@dataclass
class Monitor:
    """`libreyolo monitor` running on the box, and the tunnel the browser uses."""

    proc: asyncssh.SSHClientProcess[str]
    pid: int
    box_port: int
    local_port: int
    start_s: float
    tunnel: asyncssh.SSHClientConnection
    listener: asyncssh.SSHListener

    def url(self, path: str, run_id: str) -> str:
        return f"{path}?run={quote(run_id)}"


async def connect(server: Sshd, key: Path, known_hosts: Path) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect("127.0.0.1", server.port, username="root",
                                  client_keys=[str(key)], known_hosts=str(known_hosts),
                                  config=None, agent_path=None)


async def start_monitor(launcher: asyncssh.SSHClientConnection,
                        tunnel: asyncssh.SSHClientConnection, root: Path) -> Monitor:
    """Start the monitor over SSH (as a user would, e.g. in tmux on the box), forward a
    local port to it over a second connection (`ssh -L`), wait for its first answer."""
    binary = Path(sys.executable).parent / "libreyolo"  # the box's PATH lacks pyenv
    box_port = free_port()
    command = (f"echo $$; exec {shlex.quote(str(binary))} monitor {shlex.quote(str(root))} "
               f"--host 127.0.0.1 --port {box_port} --no-browser")
    start = time.perf_counter()
    proc = await launcher.create_process(command)
    pid = int((await asyncio.wait_for(proc.stdout.readline(), 30)).strip())
    listener = await tunnel.forward_local_port("127.0.0.1", 0, "127.0.0.1", box_port)
    monitor = Monitor(proc, pid, box_port, listener.get_port(), 0.0, tunnel, listener)
    while True:
        if proc.exit_status is not None:
            raise SystemExit(f"libreyolo monitor exited {proc.exit_status}: "
                             f"{await proc.stderr.read()}")
        try:
            await http_get(monitor.local_port, "/api/runs", "http://localhost/")
            break
        except (OSError, asyncssh.Error, SystemExit, asyncio.IncompleteReadError):
            if time.perf_counter() - start > 120:
                raise SystemExit("libreyolo monitor did not answer within 120 s") from None
            await asyncio.sleep(0.1)
    monitor.start_s = time.perf_counter() - start
    return monitor


@dataclass
class Tick:
    """One refresh of either side."""

    wall: float
    cpu: float
    box_cpu: float
    monitor_cpu: float
    payload_in: int
    payload_out: int
    wire_in: int
    wire_out: int
    parts: dict[str, int] = field(default_factory=dict)  # theirs: bytes down per endpoint


def conn_wire(conn: asyncssh.SSHClientConnection) -> tuple[int, int]:
    """TCP payload bytes (in, out) of an SSH connection so far (TCP_INFO)."""
    counted = tcp_bytes(conn.get_extra_info("socket"))
    if counted is None:
        raise SystemExit("this kernel does not count TCP bytes (TCP_INFO): nothing to compare")
    return counted


@dataclass
class Meter:
    """CPU of this process, of the box (the sshd tree: sessions, probes, the monitor)."""

    sshd_pid: int
    monitor_pid: int

    def read(self) -> tuple[float, float, float, float]:
        return (time.perf_counter(), time.process_time(), tree_cpu_seconds([self.sshd_pid]),
                proc_cpu_seconds(self.monitor_pid))


async def their_tick(monitor: Monitor, meter: Meter, run_id: str, epochs: int, *,
                     cold: bool) -> Tick:
    """One runTick (plus the page itself when cold), JSON parsed as the page does."""
    referer = f"http://localhost:{monitor.local_port}/?run={quote(run_id)}"
    w0 = conn_wire(monitor.tunnel)
    t0, c0, b0, m0 = meter.read()
    done: dict[str, Http] = {}
    if cold:
        done["page"] = await http_get(monitor.local_port, monitor.url("/", run_id), referer)
    done["status"] = await http_get(monitor.local_port, monitor.url("/api/status", run_id),
                                    referer)
    json.loads(done["status"].body)
    names = ("metrics", "log", "images")
    answers = await asyncio.gather(*(
        http_get(monitor.local_port, monitor.url(f"/api/{name}", run_id), referer)
        for name in names))
    parsed = [json.loads(a.body) for a in answers]
    t1, c1, b1, m1 = meter.read()
    w1 = conn_wire(monitor.tunnel)
    done.update(zip(names, answers, strict=True))
    if len(parsed[0]["rows"]) != epochs:
        raise SystemExit(f"monitor served {len(parsed[0]['rows'])} rows, not {epochs}")
    return Tick(t1 - t0, c1 - c0, b1 - b0, m1 - m0,
                sum(h.received for h in done.values()), sum(h.sent for h in done.values()),
                w1[0] - w0[0], w1[1] - w0[1], {k: h.received for k, h in done.items()})


# --- our way: the probe over a kept-open session -------------------------------------


async def our_tick(watcher: BoxWatcher, meter: Meter, epochs: int, *, cold: bool) -> Tick:
    """One BoxWatcher refresh (cold: the catch-up load of the whole history)."""
    w0 = wire_bytes(watcher) or (0, 0)
    p0 = (watcher.session.bytes_in, watcher.session.bytes_out)
    t0, c0, b0, m0 = meter.read()
    state = await watcher.refresh(catch_up=cold)
    t1, c1, b1, m1 = meter.read()
    w1 = wire_bytes(watcher) or (0, 0)
    if state.connection is not Connection.OK or len(state.runs) != 1:
        raise SystemExit(f"box {state.name}: {state.connection} {state.error}")
    run = state.runs[0]
    if run.health is not Health.COMPLETED or len(run.history) != epochs:
        raise SystemExit(f"box {state.name}: {run.health} ({run.reason}), "
                         f"{len(run.history)} history points, not {epochs}")
    # The monitor's idle select() loop is not ours.
    return Tick(t1 - t0, c1 - c0, (b1 - b0) - (m1 - m0), 0.0,
                watcher.session.bytes_in - p0[0], watcher.session.bytes_out - p0[1],
                w1[0] - w0[0], w1[1] - w0[1])


# --- the benchmark -------------------------------------------------------------------


def median(ticks: list[Tick], get: Callable[[Tick], float]) -> float:
    return statistics.median(get(t) for t in ticks)


def side_summary(cold: list[Tick], steady: list[Tick]) -> dict[str, Any]:
    def figures(ticks: list[Tick]) -> dict[str, Any]:
        walls = sorted(t.wall for t in ticks)
        return {
            "wall_s_median": round(statistics.median(walls), 4),
            "wall_s_p95": round(walls[max(0, math.ceil(0.95 * len(walls)) - 1)], 4),
            # Means: the box's CPU comes from /proc in 10 ms ticks, a median would
            # snap to them.
            "client_cpu_s": round(statistics.fmean(t.cpu for t in ticks), 4),
            "box_cpu_s": round(statistics.fmean(t.box_cpu for t in ticks), 4),
            "monitor_cpu_s": round(statistics.fmean(t.monitor_cpu for t in ticks), 4),
            "payload_in": round(median(ticks, lambda t: t.payload_in)),
            "payload_out": round(median(ticks, lambda t: t.payload_out)),
            "wire_in": round(median(ticks, lambda t: t.wire_in)),
            "wire_out": round(median(ticks, lambda t: t.wire_out)),
            "parts_in": {k: round(statistics.median(t.parts[k] for t in ticks))
                         for k in ticks[0].parts}}
    return {"cold": {**figures(cold), "rounds": len(cold)},
            "steady": {**figures(steady), "rounds": len(steady)}}


async def compare(args: argparse.Namespace, tmp: Path, metas: dict[int, dict[str, Any]],
                  servers: list[Sshd]) -> dict[str, Any]:
    key = make_keypair(tmp / "client", "id_ed25519")
    start_servers(tmp, 1, key, servers)
    server = servers[0]
    lengths = sorted(metas)
    roots = [run_paths(args.cache, e)[0] for e in lengths]
    fleet = fleet_config(tmp, [server] * len(lengths), key, roots, "vs")
    known = Path(fleet.known_hosts or "")
    launcher = await connect(server, key.private_path, known)
    tunnel = await connect(server, key.private_path, known)
    monitor = await start_monitor(launcher, tunnel, cache_dir(args.cache))
    print(f"libreyolo monitor answering through the tunnel {monitor.start_s:.1f} s after "
          "it was started over SSH", flush=True)
    meter = Meter(sshd_pids(servers)[0], monitor.pid)
    store = host_key_store(fleet)
    results: dict[str, Any] = {}
    try:
        for epochs, box in zip(lengths, fleet.boxes, strict=True):
            run_id = f"e{epochs}/yolox-n-e{epochs}"
            cold_ours: list[Tick] = []
            cold_theirs: list[Tick] = []
            connects: list[float] = []
            for _ in range(args.cold_rounds - 1):  # a fresh panel / a freshly opened tab
                fresh = BoxWatcher(box, fleet, store=store)
                try:
                    t0 = time.perf_counter()
                    await fresh.session.connect()
                    connects.append(time.perf_counter() - t0)
                    cold_ours.append(await our_tick(fresh, meter, epochs, cold=True))
                finally:
                    await fresh.close()
                cold_theirs.append(await their_tick(monitor, meter, run_id, epochs, cold=True))
            watcher = BoxWatcher(box, fleet, store=store)
            try:
                t0 = time.perf_counter()
                await watcher.session.connect()
                connects.append(time.perf_counter() - t0)
                cold_ours.append(await our_tick(watcher, meter, epochs, cold=True))
                cold_theirs.append(await their_tick(monitor, meter, run_id, epochs, cold=True))
                ours: list[Tick] = []
                theirs: list[Tick] = []
                for _ in range(args.rounds):  # alternate, so drift in load hits both
                    ours.append(await our_tick(watcher, meter, epochs, cold=False))
                    await asyncio.sleep(args.pause)
                    theirs.append(await their_tick(monitor, meter, run_id, epochs, cold=False))
                    await asyncio.sleep(args.pause)
            finally:
                await watcher.close()
            run_dir = run_paths(args.cache, epochs)[1]
            results[str(epochs)] = {
                "run": {"metrics_jsonl_bytes": (run_dir / "metrics.jsonl").stat().st_size,
                        "train_log_bytes": (run_dir / "train.log").stat().st_size,
                        "weights_files": len(list((run_dir / "weights").iterdir())),
                        **{k: metas[epochs][k] for k in ("train_wall_s", "cached")}},
                "ours": {**side_summary(cold_ours, ours),
                         "ssh_connect_s": round(statistics.median(connects), 3)},
                "theirs": side_summary(cold_theirs, theirs)}
            print(f"  E={epochs}: done", flush=True)
        monitor_rss = round(vm_kib("VmRSS", monitor.pid) / 1024, 1) or None
    finally:
        monitor.listener.close()
        with contextlib.suppress(OSError, asyncssh.Error):
            await launcher.run(f"kill {monitor.pid}", check=False)
        monitor.proc.close()
        for conn in (tunnel, launcher):
            conn.close()
            with contextlib.suppress(OSError, asyncssh.Error):
                await conn.wait_closed()
    return {"lengths": results, "monitor": {"start_s": round(monitor.start_s, 2),
                                            "rss_mib": monitor_rss},
            "ssh": {k: str(tunnel.get_extra_info(k)) for k in
                    ("send_cipher", "send_mac", "send_compression", "recv_compression")}}


# --- report --------------------------------------------------------------------------


def fmt_b(value: float) -> str:
    if value >= 1024 * 1024:
        return f"{value / 2**20:.2f} MiB"
    if value >= 10240:
        return f"{value / 1024:.1f} KiB"
    return f"{value:.0f} B"


def fmt_s(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def ratios(results: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """theirs / ours per history length, steady (idle) and cold."""
    out: dict[str, dict[str, float | None]] = {}
    for epochs, r in results.items():
        row: dict[str, float | None] = {}
        for phase in ("steady", "cold"):
            o, t = r["ours"][phase], r["theirs"][phase]

            def div(a: float, b: float) -> float | None:
                return round(a / b, 2) if b else None

            row[f"{phase}_bytes_in"] = div(t["payload_in"], o["payload_in"])
            row[f"{phase}_bytes_total"] = div(t["payload_in"] + t["payload_out"],
                                              o["payload_in"] + o["payload_out"])
            row[f"{phase}_wire_total"] = div(t["wire_in"] + t["wire_out"],
                                             o["wire_in"] + o["wire_out"])
            row[f"{phase}_wall"] = div(t["wall_s_median"], o["wall_s_median"])
            row[f"{phase}_client_cpu"] = div(t["client_cpu_s"], o["client_cpu_s"])
            row[f"{phase}_box_cpu"] = div(t["box_cpu_s"], o["box_cpu_s"])
        o, t = r["ours"]["steady"], r["theirs"]["steady"]
        ours_hour = (o["wire_in"] + o["wire_out"]) * 3600 / OUR_REFRESH_S
        row["per_hour_wire_mib_ours_5s"] = round(ours_hour / 2**20, 2)
        theirs_tick = t["wire_in"] + t["wire_out"]
        row["per_hour_wire_mib_theirs_done_8s"] = round(theirs_tick * 3600 / TICK_DONE_S
                                                        / 2**20, 2)
        row["per_hour_wire_mib_theirs_running_2s"] = round(
            theirs_tick * 3600 / TICK_RUNNING_S / 2**20, 2)
        out[epochs] = row
    return out


def print_report(doc: dict[str, Any]) -> None:
    results = doc["lengths"]
    lengths = list(results)
    width = 16

    def line(label: str, cells: list[str]) -> None:
        print(f"{label:<44}" + "".join(f"{c:>{width}}" for c in cells))

    line("history (epochs, real LibreYOLO runs)", [f"E={e}" for e in lengths])
    line("  metrics.jsonl / train.log on the box",
         [f"{fmt_b(results[e]['run']['metrics_jsonl_bytes'])}" for e in lengths])
    line("", [f"{fmt_b(results[e]['run']['train_log_bytes'])}" for e in lengths])
    for phase, title in (("steady", "steady state, run finished (idle): per refresh"),
                         ("cold", "cold: first load (theirs: page + first tick)")):
        print(title)
        for side, name in (("theirs", "libreyolo monitor + ssh -L"), ("ours", "gpurent probe")):
            get = [results[e][side][phase] for e in lengths]
            line(f"  {name}: bytes down (payload)", [fmt_b(g["payload_in"]) for g in get])
            line("    bytes up (payload)", [fmt_b(g["payload_out"]) for g in get])
            line("    TCP down + up (SSH framed)",
                 [fmt_b(g["wire_in"] + g["wire_out"]) for g in get])
            line("    wall, median", [fmt_s(g["wall_s_median"]) for g in get])
            line("    client CPU (mean)", [fmt_s(g["client_cpu_s"]) for g in get])
            line("    box CPU (mean; sshd + probe / monitor)",
                 [fmt_s(g["box_cpu_s"]) for g in get])
            if side == "theirs":
                line("      of which the monitor process", [fmt_s(g["monitor_cpu_s"])
                                                           for g in get])
        r = doc["ratios"]
        line("  ratio theirs/ours: bytes down", [f"x{r[e][f'{phase}_bytes_in']}"
                                                 for e in lengths])
        line("    bytes down + up (payload)", [f"x{r[e][f'{phase}_bytes_total']}"
                                               for e in lengths])
        line("    TCP down + up", [f"x{r[e][f'{phase}_wire_total']}" for e in lengths])
        line("    wall", [f"x{r[e][f'{phase}_wall']}" for e in lengths])
        line("    client CPU", [f"x{r[e][f'{phase}_client_cpu']}" for e in lengths])
        line("    box CPU", [f"x{r[e][f'{phase}_box_cpu']}" for e in lengths])
    print("their steady tick, bytes down by endpoint")
    for part in results[lengths[0]]["theirs"]["steady"]["parts_in"]:
        line(f"  /api/{part}", [fmt_b(results[e]["theirs"]["steady"]["parts_in"][part])
                                for e in lengths])
    print("per hour on the wire (TCP down + up), each at its own default period")
    r = doc["ratios"]
    line(f"  gpurent, every {OUR_REFRESH_S:g} s",
         [f"{r[e]['per_hour_wire_mib_ours_5s']} MiB" for e in lengths])
    line(f"  monitor tab, run finished (every {TICK_DONE_S:g} s)",
         [f"{r[e]['per_hour_wire_mib_theirs_done_8s']} MiB" for e in lengths])
    line(f"  monitor tab, run running (every {TICK_RUNNING_S:g} s)",
         [f"{r[e]['per_hour_wire_mib_theirs_running_2s']} MiB" for e in lengths])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS),
                        help="epochs of the real runs compared")
    parser.add_argument("--rounds", type=int, default=10, help="steady refreshes per side")
    parser.add_argument("--cold-rounds", type=int, default=3,
                        help="cold loads per side (ours: a fresh session each)")
    parser.add_argument("--pause", type=float, default=0.1,
                        help="seconds between refreshes (the sides alternate)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="where the trained runs are kept between invocations")
    parser.add_argument("--train-only", action="store_true",
                        help="train (or find) the runs and stop")
    args = parser.parse_args(argv)
    # A plain `kill` then still stops a training child and every sshd (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.perf_counter()
    metas = ensure_runs(args.cache, sorted(args.lengths))
    train_s = time.perf_counter() - t0
    if args.train_only:
        print(json.dumps(metas))
        return 0

    with scratch("gpurent-vs-monitor-") as (tmp, servers):
        result = asyncio.run(compare(args, tmp, metas, servers))
    total = time.perf_counter() - t0
    info = machine("libreyolo", "torch", "asyncssh")
    code = code_under_test()
    doc = {"benchmark": "gpurent-tui/vs_monitor", "machine": info, "code": code, "args": {
        "lengths": sorted(args.lengths), "rounds": args.rounds,
        "cold_rounds": args.cold_rounds, "pause": args.pause,
        "cache": str(cache_dir(args.cache))}, **result,
        "ratios": ratios(result["lengths"]), "training": {str(k): v for k, v in metas.items()},
        "train_or_cache_s": round(train_s, 1), "total_s": round(total, 1)}
    first = next(iter(result["lengths"].values()))
    print()
    print(f"gpurent-tui vs libreyolo monitor, {info['date']}")
    print(machine_line(info, "libreyolo", "torch", "asyncssh"))
    print(code_line(code))
    print(f"one real sshd on 127.0.0.1; monitor started over SSH and reached through "
          f"forward_local_port (answering {result['monitor']['start_s']} s after start, RSS "
          f"{result['monitor']['rss_mib']} MiB); {args.cold_rounds} cold loads and "
          f"{args.rounds} steady refreshes per side, alternating; walls are medians, CPU "
          f"means; SSH {result['ssh']['send_cipher']}, compression "
          f"{result['ssh']['send_compression']} (asyncssh's default, as OpenSSH's ssh client's)"
          f"; our SSH login {first['ours']['ssh_connect_s'] * 1000:.0f} ms, not counted")
    for epochs, meta in metas.items():
        print(f"  run E={epochs}: " + (f"cached (trained in {meta['train_wall_s']:.0f} s)"
                                       if meta["cached"] else
                                       f"trained now in {meta['train_wall_s']:.0f} s"))
    print()
    print_report(doc)
    print(f"total benchmark time {total:.0f} s")
    print_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
