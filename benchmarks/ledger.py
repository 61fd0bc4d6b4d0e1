"""How long a month of cost ledger takes to replay: the panel's start, `costs`, a refresh.

Why: the ledger is append-only and read whole when a panel or `costs` starts,
and the meter asks it for every box's spend on every refresh. A month of a
busy fleet must replay in well under a second, and a refresh must not grow
with the ledger.

Setup: a month of a fleet written the way the meter writes it: per box a
billing segment or an activity mark every `--minutes` on average (running,
idle, stopped, started, rate changes), and a GPU-busy record every
`--busy-minutes` while it runs, as JSON lines in a temp dir. Then,
each the median of `--repeats`:

1. replay: `Ledger(path)`: read, parse, index every box (what a panel start
   and `gpurent-tui costs` pay);
2. report: `costs_report` over the whole month for every box;
3. fold: `meter()` at now for the fleet (spent, today, rates): one refresh;
4. catch up: `Ledger.refresh()` with nothing new (a stat), and after another
   process appended 10 records;
5. the command: `gpurent-tui costs --json` in a fresh Python, end to end;
6. one torn line: the same month with a power cut's fragment mid-file (it stays
   there: the next append starts a fresh line), replayed and through the command.

    python benchmarks/ledger.py [--boxes 20] [--days 30] [--minutes 15] [--busy-minutes 15]
        [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _fleet import REPO, code_line, code_under_test, machine, machine_line, print_json

from tui.model.bill import Busy, Event, Mark, costs_report
from tui.model.config import parse_config
from tui.model.meter import meter
from tui.store.jsonl import append_jsonl
from tui.store.ledger import Ledger, parse_lines

DAY = 86400.0


def month(boxes: int, days: int, minutes: float, seed: int = 1,
          busy_minutes: float = 0.0) -> tuple[list[str], float]:
    """JSON lines of a month of `boxes`, and the month's end; with `busy_minutes`, a GPU-busy
    record that often per box while it runs (what a meter writes, at most every 15 min)."""
    rng = random.Random(seed)
    busy_rng = random.Random(seed + 1)  # the same month with or without busy records
    start = time.time() - days * DAY
    end = start + days * DAY
    lines: list[str] = []
    for b in range(boxes):
        name = f"box-{b:03d}"
        rate = rng.choice([0.45, 1.38, 3.4828, 14.32])
        t = start
        state = "running"
        while t < end:
            kind = rng.random()
            if kind < 0.5:
                record: dict[str, Any] = Mark(t, name, rng.choice(["training", "idle",
                                                                   "unseen"])).to_json()
            else:
                if state == "running" and rng.random() < 0.3:
                    state = "stopped"
                elif state == "stopped":
                    state = "running"
                elif rng.random() < 0.2:
                    rate = round(rate * rng.uniform(0.9, 1.1), 4)
                usd = rate if state == "running" else 0.0694
                record = Event(t, name, state, usd, "api").to_json()
            lines.append(json.dumps(record, separators=(",", ":")))
            step = rng.expovariate(1 / (minutes * 60))
            if busy_minutes > 0 and state == "running":
                every = busy_minutes * 60
                k = t // every + 1
                while k * every < t + step and k * every < end:
                    covered = 0.9 * every  # a look every 14 s, a few missed
                    busy = Busy(k * every, name, covered, covered * busy_rng.random(),
                                (k - 1) * every).to_json()
                    lines.append(json.dumps(busy, separators=(",", ":")))
                    k += 1
            t += step
    return lines, end


CPU: dict[str, float] = {}  # this process's CPU ms per measure (wall time counts waiting)


def median_ms(fn: Callable[[], Any], repeats: int, key: str = "") -> tuple[float, Any]:
    times, cpu, result = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    if key:
        CPU[key] = statistics.median(cpu)
    return statistics.median(times), result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=20)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="mean minutes between two records of one box")
    parser.add_argument("--busy-minutes", type=float, default=15.0,
                        help="a GPU-busy record this often per running box (0: none)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="gpurent-ledger-"))
    try:
        lines, end = month(args.boxes, args.days, args.minutes,
                           busy_minutes=args.busy_minutes)
        path = tmp / "state" / "gpurent-tui" / "ledger.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("\n".join(lines) + "\n")
        size = path.stat().st_size
        names = [f"box-{b:03d}" for b in range(args.boxes)]
        fleet = parse_config("".join(f'[[box]]\nname = "{n}"\nhost = "h"\n' for n in names),
                             "bench.toml")
        results: dict[str, float] = {}
        results["replay_ms"], ledger = median_ms(lambda: Ledger(path), args.repeats, "replay_ms")
        results["report_ms"], report = median_ms(
            lambda: costs_report(ledger.book, names, None, end), args.repeats, "report_ms")
        results["fold_ms"], _ = median_ms(
            lambda: meter(fleet, [], {}, ledger.book, {}, end, end - DAY), args.repeats,
            "fold_ms")
        results["catch_up_idle_ms"], _ = median_ms(ledger.refresh, args.repeats)

        def catch_up_after_append() -> float:
            for i in range(10):
                append_jsonl(path, Mark(end + i, names[0], "idle").to_json())
            t = time.perf_counter()
            ledger.refresh()
            return (time.perf_counter() - t) * 1000

        catch = [catch_up_after_append() for _ in range(args.repeats)]
        results["catch_up_10_ms"] = statistics.median(catch)

        config = tmp / "fleet.toml"
        config.write_text("".join(f'[[box]]\nname = "{n}"\nhost = "h"\n' for n in names))
        env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}

        def command(env: dict[str, str] = env) -> int:
            done = subprocess.run([sys.executable, "-m", "tui", "costs", "--json", "--config",
                                   str(config)], cwd=REPO, env=env, capture_output=True)
            assert done.returncode == 0, done.stderr.decode()
            return len(done.stdout)

        results["costs_command_ms"], _ = median_ms(command, max(3, args.repeats // 2))

        # The same month with one torn line in the middle.
        torn = tmp / "torn" / "gpurent-tui" / "ledger.jsonl"
        torn.parent.mkdir(parents=True)
        half = len(lines) // 2
        torn.write_text("\n".join([*lines[:half], '{"v":1,"t":17', *lines[half:]]) + "\n")
        results["replay_torn_ms"], torn_ledger = median_ms(lambda: Ledger(torn), args.repeats,
                                                           "replay_torn_ms")
        assert torn_ledger.skipped == 1 and len(torn_ledger.events) == len(ledger.events)
        results["torn_lines_parsed_alone"] = parse_lines(torn.read_bytes())[2]
        torn_env = {**os.environ, "XDG_STATE_HOME": str(tmp / "torn")}
        results["costs_command_torn_ms"], _ = median_ms(lambda: command(torn_env),
                                                        max(3, args.repeats // 2))
        results["records"] = len(lines)
        results["busy_records"] = sum('"gpu_busy"' in line for line in lines)
        results["bytes"] = size
        results["fleet_usd"] = round(report.usd, 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    info = machine()
    code = code_under_test()
    print(f"gpurent-tui ledger benchmark, {info['date']}")
    print(machine_line(info))
    print(code_line(code))
    print(f"a month: {args.boxes} boxes x {args.days} days, a record every {args.minutes:g} min "
          f"per box on average: {results['records']:,} records, "
          f"{results['bytes'] / 1e6:.1f} MB; medians of {args.repeats}")
    print()
    rows = [("replay the month (Ledger(path): read, parse, index)", "replay_ms"),
            ("costs report over the month, every box", "report_ms"),
            ("meter fold at now (one refresh's money)", "fold_ms"),
            ("catch up, nothing new (a stat)", "catch_up_idle_ms"),
            ("catch up after 10 records from another process", "catch_up_10_ms"),
            ("`gpurent-tui costs --json`, fresh Python, end to end", "costs_command_ms"),
            ("one torn line mid-file: replay the month", "replay_torn_ms"),
            ("one torn line mid-file: `costs --json` end to end", "costs_command_torn_ms")]
    print(f"  {'':<56} {'wall':>9}    {'CPU':>9}")
    for label, key in rows:
        cpu = f"{CPU[key]:9.2f} ms" if key in CPU else ""
        print(f"  {label:<56} {results[key]:9.2f} ms {cpu}")
    print()
    print_json({"benchmark": "gpurent-tui/ledger", "machine": info, "code": code,
                "args": vars(args), "results": results, "cpu_ms": CPU})
    return 0


if __name__ == "__main__":
    sys.exit(main())
