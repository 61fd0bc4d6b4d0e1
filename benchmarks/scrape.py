"""What one `watch --metrics` scrape costs on the runtime's loop: building the families
(metric_families, from status --json's own documents) and writing the text format, for
boxes with runs and [[serverless]] entries with the 16 runs a poll reads at most.

Why: a scrape is built on the runtime's event loop (one consistent instant), so its build
time is time the loop does not refresh boxes; a serverless entry is judged again at each
scrape (countdown, ETA past the timeout, GPU-seconds), so its share is measured apart.

    python benchmarks/scrape.py [--boxes 10 100] [--entries 0 20] [--gpus 0 8] [--repeat 20]

`--gpus`: GPUs per box, each a row as nvidia-smi prints it (the per-GPU families).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui

from _fleet import code_line, code_under_test, machine, machine_line, print_json
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from tui.model.box import BoxState, Connection, parse_gpu_rows
from tui.model.config import ServerlessConfig
from tui.model.metrics_doc import Family, metric_families
from tui.model.runs import Health, RunState
from tui.model.serverless import AppState
from tui.model.serverless_doc import Entry
from tui.model.serverless_runs import MAX_RUNS, ServerlessState, VolumeRead, fold_runs
from tui.runtime.metrics import _metric

RUNS_PER_BOX = 4
NOW = time.time()


class _Fixed:
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return (_metric(f) for f in self.families)


def boxes(count: int, gpus: int = 0) -> list[BoxState]:
    rows, _ = parse_gpu_rows([f"{g}, NVIDIA H100 80GB HBM3, 97, 61234, 81559, 64, 512.3"
                              for g in range(gpus)])
    return [BoxState(name=f"box-{b:03d}", connection=Connection.OK, gpus=rows, runs=tuple(
        RunState(path=f"/runs/r{r}", name=f"r{r}", root="/runs",
                 health=Health.RUNNING if r == 0 else Health.COMPLETED,
                 status={"current_epoch": r + 3, "total_epochs": 30, "eta_seconds": 3600.0,
                         "train_loss": 1.5})
        for r in range(RUNS_PER_BOX))) for b in range(count)]


def entries(count: int) -> list[Entry]:
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(NOW - 3600))
    status = json.dumps({"schema_version": 1, "state": "running", "current_epoch": 3,
                         "total_epochs": 40, "started_at": started, "updated_at": started,
                         "eta_seconds": 8 * 3600.0, "train_loss": 1.25,
                         "mean_epoch_seconds": 600.0}).encode()
    out: list[Entry] = []
    for e in range(count):
        entry = ServerlessConfig(name=f"app-{e:03d}", provider="modal", app=f"yolo-{e}",
                                 volume="v", runs_path="/runs", gpu="H100:2", timeout=21600,
                                 timeout_from="config")
        runs = fold_runs((), [VolumeRead(f"runs/exp{r}", status) for r in range(MAX_RUNS)],
                         "/runs", NOW)
        out.append((entry, ServerlessState(
            name=entry.name, provider="modal", runs=runs, checked_at=NOW, ok_at=NOW,
            app=AppState("modal", entry.app, "running", 1, NOW - 3600))))
    return out


def one(box_count: int, entry_count: int, repeat: int, gpus: int = 0) -> dict[str, float]:
    fleet, apps = boxes(box_count, gpus), entries(entry_count)
    builds, writes = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        families = metric_families(fleet, None, {}, {}, {}, NOW, apps)
        built = time.perf_counter()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Fixed(families))
        text = generate_latest(registry)
        writes.append(time.perf_counter() - built)
        builds.append(built - start)
    return {"boxes": box_count, "runs_per_box": RUNS_PER_BOX, "gpus_per_box": gpus,
            "serverless_entries": entry_count,
            "runs_per_entry": MAX_RUNS, "series": sum(len(f.series) for f in families),
            "bytes": len(text), "build_ms_median": round(1000 * statistics.median(builds), 2),
            "write_ms_median": round(1000 * statistics.median(writes), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--entries", type=int, nargs="+", default=[0, 1, 20])
    parser.add_argument("--gpus", type=int, nargs="+", default=[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    code = code_under_test()
    rows = [one(b, e, args.repeat, g) for b in args.boxes for e in args.entries
            for g in args.gpus]
    print(f"{'boxes':>6} {'gpus':>5} {'entries':>8} {'series':>7} {'bytes':>8} {'build':>9} "
          f"{'write':>9}")
    for row in rows:
        print(f"{row['boxes']:>6} {row['gpus_per_box']:>5} {row['serverless_entries']:>8} "
              f"{row['series']:>7} "
              f"{row['bytes']:>8} {row['build_ms_median']:>7.1f}ms "
              f"{row['write_ms_median']:>7.1f}ms")
    info = machine("prometheus_client")
    print(machine_line(info, "prometheus_client"))
    print(code_line(code))
    print_json({"benchmark": "scrape", "machine": info, "code": code, "rows": rows})


if __name__ == "__main__":
    main()
