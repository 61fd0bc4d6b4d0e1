"""How long the money fold takes at 1,000 boxes: `CostMeter.update`, which the runtime
calls at most once a second while boxes answer (and after every provider poll).

Why: the panel at 1,000 boxes (scale.py) found the fold over the whole fleet its longest
event-loop step (~90-140 ms). The fold now keeps each box's snapshot-only parts (unit
costs, running runs, rates) between folds, so it costs in proportion to what changed.

The fleet is tests/support/panel_states.big_fleet: the recorded fleet's three boxes over
and over (2 runs a box on average: one training, one with a failed, stalled and dead run,
one that times out), each billed from a config rate, the ledger in a scratch directory.
Four cases, each folded `--folds` times with the clock one second on, each fold told
what the runtime tells it (the boxes refreshed since the last fold): nothing changed
(as after a provider poll: every box compared with the ledger); 10 boxes with a new
snapshot; a fifth of them (one second of every box refreshed every 5 s); every box.

    python benchmarks/meter.py [--boxes 1000] [--folds 30]
    python benchmarks/meter.py --before ../before   # that checkout's code, then this one's,
                                                    # twice each, side by side
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def _code_from(tree: Path) -> None:
    """Import tui and tests.support from `tree` (this checkout unless --tree says)."""
    sys.path.insert(0, str(tree))
    sys.path.insert(0, str(tree / "tests"))


def measure(boxes: int, folds: int) -> dict[str, Any]:
    """Median and max ms of one `CostMeter.update` in each case."""
    from support.panel_states import NOW, big_fleet

    from tui.model.config import parse_config
    from tui.providers import meter as meter_module
    from tui.providers.meter import CostMeter
    from tui.store.ledger import Ledger

    told_many = hasattr(meter_module, "FULL_LOOK_SECONDS")

    def only(seen: set[str]) -> Any:
        """What the runtime passes after these refreshes: the refreshed boxes (this code),
        or the one box refreshed, else every box (the code before)."""
        if told_many:
            return seen or None
        return next(iter(seen)) if len(seen) == 1 else None

    _, states = big_fleet(boxes)
    # Seen 100 s after the recorded answers: no run's times lie ahead of the box's clock.
    states = [replace(s, last_ok_at=s.last_ok_at + 100, box_time=(s.box_time or 0) + 100)
              if s.last_ok_at is not None else s for s in states]
    text = "".join(f'[[box]]\nname = "box{i:03d}"\nhost = "10.1.{i // 250}.{i % 250 + 1}"\n'
                   f"[box.pricing]\nrunning_usd_per_hr = {0.45 + (i % 7) * 0.5}\n"
                   for i in range(boxes))
    fleet = parse_config(text, "meter-bench.toml")
    clock = [NOW + 100]
    with tempfile.TemporaryDirectory() as tmp:
        meter = CostMeter(fleet, ledger=Ledger(Path(tmp) / "ledger.jsonl"),
                          clock=lambda: clock[0])
        meter.update(states)  # the first fold opens every box's segment and marks
        meter.update(states)
        found: dict[str, Any] = {}
        for case, changed in (("nothing changed", 0), ("10 boxes changed", 10),
                              (f"{boxes // 5} boxes changed", boxes // 5),
                              (f"all {boxes} changed", boxes)):
            each = []
            for _ in range(folds):
                clock[0] += 1.0
                step = max(boxes // max(changed, 1), 1)
                seen = set()
                for i in range(0, boxes, step)[:changed]:  # a new snapshot, a second later
                    s = states[i]
                    if s.last_ok_at is not None:
                        states[i] = replace(s, last_ok_at=s.last_ok_at + 1.0)
                    else:
                        states[i] = replace(s)
                    seen.add(s.name)
                start = time.perf_counter()
                cost = meter.update(states, only=only(seen))
                each.append((time.perf_counter() - start) * 1000)
            found[case] = {"median_ms": statistics.median(each), "max_ms": max(each)}
        found["accrued_usd"] = cost.accrued_usd
        found["ledger_lines"] = len((Path(tmp) / "ledger.jsonl").read_text().splitlines())
    return found


def side_by_side(before: Path, boxes: int, folds: int) -> int:
    """Each checkout's code in its own process, alternately, twice: then the medians."""
    from _fleet import code_line, code_under_test, machine, machine_line, print_json

    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for _ in range(2):
        for label, tree in (("before", before), ("after", HERE.parents[1])):
            done = subprocess.run([sys.executable, str(HERE), "--tree", str(tree), "--boxes",
                                   str(boxes), "--folds", str(folds)],
                                  capture_output=True, text=True, check=True)
            runs[label].append(json.loads(done.stdout.splitlines()[-1]))
    before_commit = subprocess.run(["git", "-C", str(before), "rev-parse", "--short", "HEAD"],
                                   capture_output=True, text=True).stdout.strip()
    info, code = machine(), code_under_test()
    print(machine_line(info))
    print(code_line(code) + f"; before: {before} at {before_commit}")
    print(f"CostMeter.update, {boxes} boxes, {folds} folds a case, median (max) ms:")
    print(f"{'':22} {'before':>16} {'after':>16}")
    table: dict[str, Any] = {}
    for case in runs["after"][0]:
        if not isinstance(runs["after"][0][case], dict):
            continue
        row = {}
        for label in ("before", "after"):
            medians = [r[case]["median_ms"] for r in runs[label]]
            maxes = [r[case]["max_ms"] for r in runs[label]]
            row[label] = {"median_ms": statistics.median(medians), "max_ms": max(maxes)}
        table[case] = row
        print(f"{case:22} " + " ".join(
            f"{row[x]['median_ms']:8.1f} ({row[x]['max_ms']:5.1f})" for x in ("before", "after")))
    same = {r["accrued_usd"] for r in runs["before"] + runs["after"]}
    print(f"money folded: {'the same' if len(same) == 1 else 'DIFFERS: ' + str(same)}")
    print_json({"machine": info, "code": code, "before": str(before),
                "before_commit": before_commit, "boxes": boxes, "folds": folds,
                "cases": table, "runs": runs})
    return 0 if len(same) == 1 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=30)
    parser.add_argument("--before", type=Path, help="another checkout to measure beside this")
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)  # one side, JSON out
    args = parser.parse_args()
    if args.tree is not None:
        _code_from(args.tree.resolve())
        print(json.dumps(measure(args.boxes, args.folds)))
        return 0
    sys.path.insert(0, str(HERE.parent))  # _fleet
    if args.before is not None:
        return side_by_side(args.before.resolve(), args.boxes, args.folds)
    _code_from(HERE.parents[1])
    from _fleet import code_line, code_under_test, machine, machine_line, print_json

    found = measure(args.boxes, args.folds)
    info, code = machine(), code_under_test()
    print(machine_line(info))
    print(code_line(code))
    print(f"CostMeter.update, {args.boxes} boxes, {args.folds} folds a case:")
    for case, figures in found.items():
        if isinstance(figures, dict):
            print(f"  {case:22} median {figures['median_ms']:.1f} ms, "
                  f"max {figures['max_ms']:.1f} ms")
    print_json({"machine": info, "code": code, "boxes": args.boxes, "folds": args.folds,
                **found})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
