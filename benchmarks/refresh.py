"""How much a refresh of the watch core costs: wall time, bytes and CPU, on real sshd.

Why: the panel refreshes every box every few seconds for days, over links that
may be slow or metered, on a laptop that also runs everything else. The probe
promises that a refresh costs what changed, not what the run has written so
far; this script checks that promise with numbers instead of a unit test.

Both ways of probing are measured side by side in the same run, on the same
boxes and files: "kept" (one long-lived probe per connection, told only what
changed: the default) and "one-shot" (the packed probe sent to a fresh
`python3 -` every refresh: what a box that cannot keep a probe gets).

Setup: N real OpenSSH servers on 127.0.0.1 (one per "box"), each with a runs
root of R LibreYOLO-shaped runs that already have E epochs of history, watched
by one BoxWatcher per box (kept across rounds, so sessions stay open). Then:

1. cold load: one `refresh(catch_up=True)` of every box at once;
2. idle: full refreshes where nothing changed;
3. advancing: before each full refresh every run writes one epoch, as
   LibreYOLO does; measured for E and again for a short history, so any
   dependence of the bytes on history length shows.
Each phase runs once per way of probing, with its own sessions.

Bytes are the SSH channel payload the session counts (in: the probe's
compressed answer; out: the compressed probe plus request), and the TCP
payload of the connection (TCP_INFO), which adds SSH framing, MACs and
channel setup. CPU is this process (asyncssh crypto included) and, apart,
the boxes' sshd and probe processes, which share this machine's cores. The
probe's own CPU is read from /proc: the run time of the kept probe processes
(schedstat, in ns; utime+stime where that is missing), or, one-shot, the
cutime+cstime the sshd sessions gain by reaping each refresh's shell and
python3.

    python benchmarks/refresh.py [--boxes 20] [--runs 2] [--epochs 500] [--rounds 10]

Only 127.0.0.1; everything lives in one temp dir that is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from _fleet import (
    Run,
    advance_all,
    box_name,
    code_line,
    code_under_test,
    fleet_config,
    machine,
    make_runs,
    print_json,
    scratch,
    sshd_pids,
    start_servers,
    tree_cpu,
    wire_bytes,
)

# What panel.py, floor.py and load.py still import from here.
from _fleet import metrics_line as metrics_line
from _fleet import tree_cpu_seconds as tree_cpu_seconds
from support.sshd import KeyPair, Sshd, make_keypair

from tui.model.box import BoxState, Connection, probe_request
from tui.model.runs import Health
from tui.onbox import probe as probe_script
from tui.remote.hostkeys import host_key_store
from tui.remote.session import probe_payload
from tui.remote.watch import BoxWatcher

SMALL_EPOCHS = 50
TARGET_BYTES_PER_RUN = 2048
MODES = ("kept", "one-shot")
TARGET_IDLE_BYTES_UP = 300      # per box, kept probe
TARGET_IDLE_PROBE_CPU_S = 0.002  # per box, kept probe
# Bytes down unchanged: both probes answer the same view, so the kept probe's idle answer
# may differ from the one-shot's only by a few compressed bytes (clock, ordering), as in
# tests/io/test_kept_probe.py.
IDLE_BYTES_DOWN_SLACK = 32      # per box


# --- measuring -----------------------------------------------------------------


@dataclass
class Round:
    """One full refresh of the fleet (every box in parallel)."""

    wall: float
    cpu: float
    box_cpu: float
    probe_cpu: float  # the probe processes' own CPU, all boxes together
    bytes_in: list[int]
    bytes_out: list[int]
    wire_in: list[int] | None
    wire_out: list[int] | None


@dataclass
class Phase:
    name: str
    boxes: int
    runs: int
    history: int
    mode: str = "kept"
    rounds: list[Round] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Per-refresh figures: times over rounds, bytes per box (mean over rounds and boxes)."""
        walls = sorted(r.wall for r in self.rounds)
        p95 = walls[max(0, math.ceil(0.95 * len(walls)) - 1)]  # nearest rank

        def per_box(get: Callable[[Round], list[int] | None]) -> float | None:
            values = [v for r in self.rounds for v in (get(r) or [])]
            return statistics.fmean(values) if values else None

        bytes_in = per_box(lambda r: r.bytes_in)
        figures: dict[str, Any] = {
            "wall_s_median": statistics.median(walls), "wall_s_p95": p95,
            "bytes_in_per_box": bytes_in,
            "bytes_in_per_box_max": max(v for r in self.rounds for v in r.bytes_in),
            "bytes_in_per_run": bytes_in / self.runs if bytes_in is not None else None,
            "bytes_out_per_box": per_box(lambda r: r.bytes_out),
            "wire_in_per_box": per_box(lambda r: r.wire_in),
            "wire_out_per_box": per_box(lambda r: r.wire_out),
            "client_cpu_s_median": statistics.median(r.cpu for r in self.rounds),
            "box_cpu_s_median": statistics.median(r.box_cpu for r in self.rounds),
            "probe_cpu_s_per_box": statistics.fmean(r.probe_cpu for r in self.rounds)
            / self.boxes,
        }
        return {"boxes": self.boxes, "runs_per_box": self.runs, "history_epochs": self.history,
                "mode": self.mode, "rounds": len(self.rounds),
                **{k: v if v is None else round(v, 4 if k.endswith("_s") or "_s_" in k else 1)
                   for k, v in figures.items()}}


def _counters(watchers: Sequence[BoxWatcher]) -> list[tuple[int, int, tuple[int, int] | None]]:
    return [(w.session.bytes_in, w.session.bytes_out, wire_bytes(w)) for w in watchers]


async def full_refresh(watchers: Sequence[BoxWatcher], sshd_pids: Sequence[int],
                       *, catch_up: bool = False) -> Round:
    """Refresh every box at once and measure it; any box not OK is a failed benchmark."""
    before = _counters(watchers)
    box_before = tree_cpu(sshd_pids)
    cpu, start = time.process_time(), time.perf_counter()
    states = await asyncio.gather(*(w.refresh(catch_up=catch_up) for w in watchers))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    box_after = tree_cpu(sshd_pids)
    box_cpu = box_after.total - box_before.total
    kept = all(w.session.probe_mode == "kept" for w in watchers)
    probe_cpu = (box_after.kept_probes - box_before.kept_probes if kept
                 else box_after.reaped - box_before.reaped)
    after = _counters(watchers)
    for state in states:
        if state.connection is not Connection.OK:
            raise SystemExit(f"box {state.name} did not answer: {state.error}")
    wire_in: list[int] | None = []
    wire_out: list[int] | None = []
    for (_, _, w0), (_, _, w1) in zip(before, after, strict=True):
        if w1 is None or wire_in is None or wire_out is None:
            wire_in = wire_out = None
            continue
        base = w0 or (0, 0)  # a connection opened by this refresh starts at zero
        wire_in.append(w1[0] - base[0])
        wire_out.append(w1[1] - base[1])
    return Round(wall, cpu, box_cpu, probe_cpu,
                 [a[0] - b[0] for a, b in zip(after, before, strict=True)],
                 [a[1] - b[1] for a, b in zip(after, before, strict=True)],
                 wire_in, wire_out)


def check_runs(states: Sequence[BoxState], runs: dict[str, list[Run]]) -> None:
    """The numbers mean nothing unless the panel really holds every epoch of every run."""
    for state in states:
        expected = {str(r.path): r.epoch for r in runs[state.name]}
        got = {r.path: r for r in state.runs}
        if set(got) != set(expected):
            raise SystemExit(f"box {state.name}: runs {sorted(got)} != {sorted(expected)}")
        for path, epoch in expected.items():
            run = got[path]
            if (run.health is not Health.RUNNING or run.current_epoch != epoch
                    or len(run.history) != epoch or not run.log_tail
                    or {w.name for w in run.weights} != {"best.pt", "last.pt"}):
                raise SystemExit(
                    f"box {state.name} run {run.name}: {run.health} ({run.reason}), "
                    f"epoch {run.current_epoch} vs {epoch}, {len(run.history)} history points")


def advance_breakdown(watcher: BoxWatcher) -> dict[str, Any]:
    """Where one box's advancing answer spends its bytes, by the marginal compressed size
    of each part. Runs the probe's own build_answer here on the same files (outside
    any timed window) with the request the watcher is about to send."""
    request = probe_request(watcher.state, watcher.box.runs_roots)
    answer = probe_script.build_answer(json.loads(json.dumps(request)))

    def size(doc: dict[str, Any]) -> int:
        return len(zlib.compress(json.dumps(doc, separators=(",", ":")).encode("ascii"), 6))

    runs = len(answer["runs"]) or 1
    full = size(answer)
    shell = size({**answer, "runs": []})
    parts: dict[str, float] = {}
    raw: dict[str, float] = {}
    for key in ("status", "metrics", "log", "weights"):
        without = {**answer, "runs": [{k: v for k, v in r.items() if k != key}
                                      for r in answer["runs"]]}
        parts[key] = (full - size(without)) / runs
        raw[key] = sum(len(json.dumps(r.get(key), separators=(",", ":")))
                       for r in answer["runs"] if key in r) / runs
    parts["rest_of_run"] = (full - shell) / runs - sum(parts.values())
    return {"answer_bytes": full, "box_part_bytes": shell, "runs": runs,
            "per_run_compressed": parts, "per_run_raw_json": raw,
            "request_json_bytes": len(json.dumps(request, separators=(",", ":"))),
            "probe_only_payload_bytes": len(probe_payload(
                probe_request(BoxState(name="x"), watcher.box.runs_roots), "0" * 24))}


# --- the fleet -----------------------------------------------------------------


async def measure_history(tmp: Path, servers: Sequence[Sshd], key: KeyPair,
                          args: argparse.Namespace, epochs: int, *, idle: bool, started: float,
                          mode: str) -> tuple[dict[str, Phase], dict[str, Any], dict[str, str]]:
    """Cold load, (idle,) then advancing rounds, for one history length and one way of
    probing; its own runs and sessions."""
    roots, runs = make_runs(tmp / mode, len(servers), args.runs, epochs, started)
    fleet = fleet_config(tmp, servers, key, roots, f"e{epochs}-{mode}")
    store = host_key_store(fleet)
    watchers = [BoxWatcher(box, fleet, store=store) for box in fleet.boxes]
    for watcher in watchers:
        watcher.session.keep_probe = mode == "kept"
    pids = sshd_pids(servers)
    tag = f"E={epochs} {mode}"
    phases = {name: Phase(name, len(servers), args.runs, epochs, mode)
              for name in (f"cold {tag}", f"idle {tag}", f"advancing {tag}")}
    try:
        cold = phases[f"cold {tag}"]
        cold.rounds.append(await full_refresh(watchers, pids, catch_up=True))
        check_runs([w.state for w in watchers], runs)
        conn = watchers[0].session._conns[-1]
        info = {"box_python": watchers[0].state.python or "?",
                "cipher": str(conn.get_extra_info("send_cipher")),
                "mac": str(conn.get_extra_info("send_mac"))}
        if idle:
            for _ in range(args.rounds):
                phases[f"idle {tag}"].rounds.append(await full_refresh(watchers, pids))
            check_runs([w.state for w in watchers], runs)
        else:
            del phases[f"idle {tag}"]
        breakdown: dict[str, Any] = {}
        for index in range(args.rounds):
            advance_all(runs)
            if index == args.rounds - 1:
                breakdown = advance_breakdown(watchers[0])
            phases[f"advancing {tag}"].rounds.append(await full_refresh(watchers, pids))
        check_runs([w.state for w in watchers], runs)
        modes = {w.session.probe_mode for w in watchers}
        if modes != {mode}:
            raise SystemExit(f"asked to probe {mode}, the sessions probed {sorted(modes)}")
        return phases, breakdown, info
    finally:
        await asyncio.gather(*(w.close() for w in watchers))


# --- report --------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "s":
        if value < 0.01:
            return f"{value * 1000:.2f} ms"
        return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"
    if unit == "B":
        return f"{value / 1024:.1f} KiB" if value >= 10240 else f"{value:.0f} B"
    return f"{value:g}"


ROWS = (
    ("wall per full refresh, median", "wall_s_median", "s"),
    ("wall per full refresh, p95 (rank)", "wall_s_p95", "s"),
    ("bytes in per box (answer)", "bytes_in_per_box", "B"),
    ("bytes in per box, max", "bytes_in_per_box_max", "B"),
    ("bytes in per run", "bytes_in_per_run", "B"),
    ("bytes out per box (probe+req)", "bytes_out_per_box", "B"),
    ("TCP in per box (SSH framed)", "wire_in_per_box", "B"),
    ("TCP out per box (SSH framed)", "wire_out_per_box", "B"),
    ("client CPU per refresh", "client_cpu_s_median", "s"),
    ("box CPU per refresh (sshd+probe)", "box_cpu_s_median", "s"),
    ("probe process CPU per box", "probe_cpu_s_per_box", "s"),
)


def print_report(summaries: dict[str, dict[str, Any]]) -> None:
    names = list(summaries)
    width = max(14, *(len(n) + 2 for n in names))
    print(f"{'':34}" + "".join(f"{n:>{width}}" for n in names))
    print(f"{'rounds':34}" + "".join(f"{summaries[n]['rounds']:>{width}}" for n in names))
    for label, key, unit in ROWS:
        print(f"{label:34}" + "".join(f"{fmt(summaries[n][key], unit):>{width}}" for n in names))


async def benchmark(args: argparse.Namespace, tmp: Path, servers: list[Sshd]) -> dict[str, Any]:
    started = time.time()
    key = make_keypair(tmp / "client", "id_ed25519")
    t0 = time.perf_counter()
    start_servers(tmp, args.boxes, key, servers)
    setup = time.perf_counter() - t0
    print(f"{args.boxes} sshd started in {setup:.1f} s; writing runs ...", flush=True)
    phases: dict[str, Phase] = {}
    for mode in MODES:
        big, breakdown, info = await measure_history(tmp, servers, key, args, args.epochs,
                                                     idle=True, started=started, mode=mode)
        small, small_breakdown, _ = await measure_history(
            tmp, servers, key, args, args.small_epochs, idle=False, started=started, mode=mode)
        phases.update(big)
        phases.update(small)
    return {"phases": phases, "breakdown": breakdown, "breakdown_small": small_breakdown,
            "info": info}


def idle_verdict(idle: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    """The kept probe against the one-shot on an idle refresh, per box: bytes up and probe
    CPU under their targets, and bytes down unchanged (what the view is built from)."""
    kept, once = idle["kept"], idle["one-shot"]
    up, cpu, down = (kept["bytes_out_per_box"], kept["probe_cpu_s_per_box"],
                     kept["bytes_in_per_box"])
    missed = [name for name, ok in (
        ("bytes up", up < TARGET_IDLE_BYTES_UP),
        ("probe CPU", cpu < TARGET_IDLE_PROBE_CPU_S),
        ("bytes down", abs(down - once["bytes_in_per_box"]) <= IDLE_BYTES_DOWN_SLACK)) if not ok]
    line = (f"idle refresh, kept probe vs one-shot, per box: bytes up {up:.0f} B vs "
            f"{once['bytes_out_per_box']:.0f} B (target < {TARGET_IDLE_BYTES_UP} B), "
            f"probe CPU {cpu * 1000:.2f} ms vs {once['probe_cpu_s_per_box'] * 1000:.1f} ms "
            f"(target < {TARGET_IDLE_PROBE_CPU_S * 1000:g} ms), bytes down {down:.0f} B vs "
            f"{once['bytes_in_per_box']:.0f} B (target: within {IDLE_BYTES_DOWN_SLACK} B): "
            + (f"OVER TARGET ({', '.join(missed)})" if missed else "OK"))
    return not missed, line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="runs per box")
    parser.add_argument("--epochs", type=int, default=500, help="epochs of history per run")
    parser.add_argument("--small-epochs", type=int, default=SMALL_EPOCHS,
                        help="the short history the advancing figures are compared with")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per steady-state phase")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    with scratch("gpurent-bench-") as (tmp, servers):
        result = asyncio.run(benchmark(args, tmp, servers))
    total = time.perf_counter() - t0

    machine_info = machine(box_python=result["info"]["box_python"],
                           asyncssh=asyncssh.__version__, cipher=result["info"]["cipher"],
                           mac=result["info"]["mac"])
    code = code_under_test()
    summaries = {name: phase.summary() for name, phase in result["phases"].items()}
    print()
    print(f"gpurent-tui refresh benchmark, {machine_info['date']}")
    print(f"machine: nproc {machine_info['nproc']}, python {machine_info['python']} (boxes: "
          f"python3 {machine_info['box_python']}), asyncssh {machine_info['asyncssh']}, "
          f"{machine_info['cipher']} / {machine_info['mac']}, {machine_info['platform']}")
    print(code_line(code))
    print(f"fleet: {args.boxes} boxes x {args.runs} runs, history {args.epochs} and "
          f"{args.small_epochs} epochs, {args.rounds} rounds per steady phase; "
          f"all boxes refreshed in parallel; per-box figures are means over boxes and rounds")
    print()
    print_report(summaries)

    big = summaries[f"advancing E={args.epochs} kept"]["bytes_in_per_run"]
    small = summaries[f"advancing E={args.small_epochs} kept"]["bytes_in_per_run"]
    verdict = "OK" if max(big, small) < TARGET_BYTES_PER_RUN else "OVER TARGET"
    print()
    print(f"advancing one epoch costs {big:.0f} B per run at E={args.epochs} and {small:.0f} B "
          f"at E={args.small_epochs} (ratio {big / small:.2f}); target < "
          f"{TARGET_BYTES_PER_RUN} B: {verdict}")
    kept_ok, line = idle_verdict({m: summaries[f"idle E={args.epochs} {m}"] for m in MODES})
    print(line)
    if not kept_ok:
        verdict = "OVER TARGET"
    bd = result["breakdown"]
    parts = bd["per_run_compressed"]
    print(f"where an advancing answer's bytes go ({box_name(0)}, E={args.epochs}, marginal "
          f"compressed bytes per run; raw JSON in brackets): "
          + ", ".join(f"{k} {v:.0f}" + (f" [{bd['per_run_raw_json'][k]:.0f}]"
                                        if k in bd["per_run_raw_json"] else "")
                      for k, v in parts.items())
          + f"; box part (clock, disks, roots, gpus) {bd['box_part_bytes']} B per answer")
    print(f"bytes out: the compressed probe alone is {bd['probe_only_payload_bytes']} B; "
          f"the request (cursors) is {bd['request_json_bytes']} B of JSON before compression")
    print(f"total benchmark time {total:.0f} s")
    doc = {"benchmark": "gpurent-tui/refresh", "machine": machine_info, "code": code,
           "args": vars(args),
           "phases": summaries, "advancing_breakdown": bd,
           "advancing_breakdown_small": result["breakdown_small"],
           "target_bytes_per_run": TARGET_BYTES_PER_RUN, "verdict": verdict,
           "total_s": round(total, 1)}
    print_json(doc)
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
