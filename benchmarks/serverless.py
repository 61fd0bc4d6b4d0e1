"""What one poll of a serverless entry costs: CLI processes and wall time per poll.

Why: a poll runs the provider's CLI as a subprocess per call (the user's own login, no
SDK in our process), 2 + 2 per run read (status.json and weights/ of each of the 16 most
recent runs), four at a time. The count is what a real `modal` (a Python program that
starts in about a second) multiplies; the wall time here is with the tests' stand-in
(tests/support/bin/modal, also Python, no network), so it measures our side: process
starts, bounded reads, the fold.

    python benchmarks/serverless.py [--runs 1 4 16 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the stand-in

from _fleet import code_line, code_under_test, machine, machine_line, print_json
from support.modal_standin import BIN, ModalStandIn, status_json

from tui.model.config import ServerlessConfig
from tui.runtime.serverless import poll_entry


def one(runs: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        modal = ModalStandIn(Path(tmp))
        for i in range(runs):
            modal.put(f"runs/r{i:03d}/status.json", status_json(epoch=i % 10 + 1))
            modal.put(f"runs/r{i:03d}/weights/best.pt", b"w" * 1024)
        entry = ServerlessConfig(name="m", provider="modal", app="yolo-train",
                                 volume="runs-vol", runs_path="/runs", gpu="H100",
                                 timeout=21600, cli=str(BIN / "modal"))
        walls = []
        calls_before = len(modal.calls())  # the CLI's version is asked once, then cached
        for _ in range(repeat):
            start = time.perf_counter()
            state = asyncio.run(poll_entry(entry, None, time.time, env=modal.env))
            walls.append(time.perf_counter() - start)
            assert state.error is None, state.error
        calls = (len(modal.calls()) - calls_before - 1) / repeat  # less the one --version
        return {"runs": runs, "runs_read": len(state.runs), "cli_calls": calls,
                "wall_s_median": round(statistics.median(walls), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 4, 16, 30])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    code = code_under_test()
    rows = [one(n, args.repeat) for n in args.runs]
    print(f"{'runs on volume':>15} {'runs read':>10} {'CLI calls':>10} {'wall/poll':>10}")
    for row in rows:
        print(f"{row['runs']:>15} {row['runs_read']:>10} {row['cli_calls']:>10.0f} "
              f"{row['wall_s_median']:>9.2f}s")
    info = machine()
    print(machine_line(info))
    print(code_line(code))
    print_json({"benchmark": "serverless", "machine": info, "code": code, "rows": rows})


if __name__ == "__main__":
    main()
