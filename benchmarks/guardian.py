"""What the panel's own guard costs per box refresh: alerts, milestone plans, unpushed work.

Why: the panel and `watch` run the Guardian on every box update (a 20-box fleet
refreshing every 5 s is 4 updates a second, and more while histories stream),
and the fleet list computes each run's unpushed figure on each redraw of its
box. None of it may grow with the journal or the history on a refresh.

Also the first round of a fresh panel: the whole journal folded, every box planned.

Setup: `--boxes` boxes with milestone pushes on, `--runs` runs each with
`--epochs` epochs of history and an epoch_<N>.pt per epoch, a journal of
`--pushes` verified pushes (every 20th epoch of each run, as `every_epochs = 20`
pushes them: nothing is due). Then, each the
median of `--repeats` rounds over every box:

1. alerts: `Guardian.box_updated(before, after)` (run transitions, watchdog steps);
2. plan, warm: `Guardian.milestone(state)` with the journal unchanged since the
   last look (the fold is cached per journal version);
3. plan, journal new: the same right after another process appended to the
   journal (only the new lines are read and folded; boxes they do not touch keep
   their fold, and their plan);
4. stake: `at_stake` for every run (the run row's "unpushed: ..."), never pushed
   and pushed 20 epochs ago.

    python benchmarks/guardian.py [--boxes 20] [--runs 2] [--epochs 2000] [--pushes 4000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _fleet import code_line, code_under_test, machine, machine_line, print_json

from tui.actions.guardian import Guardian
from tui.model.box import BoxState, Connection
from tui.model.config import parse_config
from tui.model.guard import last_verified_pushes
from tui.model.runs import EpochPoint, Health, RunState, WeightFile
from tui.model.unpushed import at_stake
from tui.store.journal import Journal


def run_state(box: int, run: int, epochs: int) -> RunState:
    path = f"/root/runs/b{box}-r{run}"
    history = tuple(EpochPoint(e, 10.0 - e / epochs, seconds=60.0 + e % 7)
                    for e in range(1, epochs + 1))
    weights = tuple(WeightFile(f"epoch_{e}.pt", 11_000_000, float(e), e * 10**9, e)
                    for e in range(1, epochs + 1))
    weights += (WeightFile("best.pt", 11_000_000, 1.0, 10**9, 1),
                WeightFile("last.pt", 11_000_000, float(epochs), epochs * 10**9, epochs + 1))
    status = {"schema_version": 1, "state": "running", "current_epoch": epochs,
              "total_epochs": epochs * 2, "best_epoch": 1, "best_metric": 0.5,
              "mean_epoch_seconds": 63.0}
    return RunState(path=path, name=path.rsplit("/", 1)[1], root="/root/runs",
                    health=Health.RUNNING, status=status, history=history, weights=weights)


def median_us(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--boxes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2000)
    parser.add_argument("--pushes", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    boxes = "".join(f'[[box]]\nname = "b{i}"\nhost = "h"\n[box.push]\nlocal_dir = "/w"\n'
                    "every_epochs = 20\non_best = true\non_complete = true\n"
                    for i in range(args.boxes))
    fleet = parse_config(boxes, "bench.toml")
    states = [BoxState(name=f"b{i}", connection=Connection.OK, last_ok_at=1.0,
                       runs=tuple(run_state(i, r, args.epochs) for r in range(args.runs)))
              for i in range(args.boxes)]
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "journal.jsonl")
        per_run = max(args.pushes // (args.boxes * args.runs), 1)
        for state in states:
            for run in state.runs:
                for n in range(per_run):
                    epoch = min(20 * (n + 1), args.epochs)
                    journal.record(box=state.name, action="push", outcome="done", run=run.name,
                                   run_path=run.path, verified=True, destination="/w",
                                   files=[{"name": f"weights/epoch_{epoch}.pt",
                                           "size": 11_000_000, "mtime_ns": epoch * 10**9,
                                           "inode": epoch}],
                                   details={"epoch": epoch, "best_epoch": 1,
                                            "best_metric": 0.5})
        guardian = Guardian(fleet, journal)

        def alerts() -> None:
            for state in states:
                guardian.box_updated(state, state)

        def plans() -> None:
            for state in states:
                guardian.milestone(state, busy=False)

        def cold() -> None:
            journal.record(box="elsewhere", action="stop", outcome="done")
            plans()

        records = {s.name: last_verified_pushes(journal.entries, s.name) for s in states}

        def stakes(pushed: bool) -> Callable[[], None]:
            def work() -> None:
                for state in states:
                    for run in state.runs:
                        at_stake(run, records[state.name].get(run.path) if pushed else None,
                                 1.5)
            return work

        t = time.perf_counter()
        plans()  # a fresh panel's first round: the whole journal folded, every plan made
        first_ms = (time.perf_counter() - t) * 1000
        figures = {
            "boxes": args.boxes, "runs_per_box": args.runs, "epochs": args.epochs,
            "journal_entries": len(journal.entries),
            "first_round_ms": round(first_ms, 1),
            "alerts_us_per_box": round(median_us(alerts, args.repeats) / args.boxes, 1),
            "plan_warm_us_per_box": round(median_us(plans, args.repeats) / args.boxes, 1),
            "plan_cold_us_per_box": round(median_us(cold, args.repeats) / args.boxes, 1),
            "stake_never_pushed_us_per_run": round(
                median_us(stakes(False), args.repeats) / (args.boxes * args.runs), 1),
            "stake_pushed_us_per_run": round(
                median_us(stakes(True), args.repeats) / (args.boxes * args.runs), 1),
        }
    print(f"{args.boxes} boxes x {args.runs} runs x {args.epochs} epochs (an epoch file "
          f"each), a journal of {figures['journal_entries']} verified pushes:")
    print(f"  first round (whole journal)  {figures['first_round_ms']:9.1f} ms for the fleet")
    print(f"  alerts per box update        {figures['alerts_us_per_box']:9.1f} us")
    print(f"  milestone plan, warm         {figures['plan_warm_us_per_box']:9.1f} us per box")
    print(f"  milestone plan, journal new  {figures['plan_cold_us_per_box']:9.1f} us per box")
    print(f"  unpushed, never pushed       {figures['stake_never_pushed_us_per_run']:9.1f} us "
          "per run")
    print(f"  unpushed, pushed lately      {figures['stake_pushed_us_per_run']:9.1f} us per run")
    code = code_under_test()
    info = machine()
    print(code_line(code))
    print(machine_line(info))
    print_json({"benchmark": "guardian", **figures, "code": code, "machine": info})


if __name__ == "__main__":
    main()
