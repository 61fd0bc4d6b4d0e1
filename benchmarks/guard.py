"""What the on-box watchdog costs: the box's CPU per look, and the probe's bytes for it.

Why: the watchdog runs on a rented box for days beside the training, and the
probe carries its state to the panel at every refresh; both must stay small.

- the watchdog (tui/onbox/guard.py, started here as on a box: its folder with
  probe.py and push.py, a config, no secret) over RUNS LibreYOLO-shaped runs
  that advance an epoch per second: its CPU per look, from /proc, over SECONDS;
- one probe answer (zlib JSON, as sent) of an idle box without a watchdog, the
  first answer with one (its whole state), and the next ones (the heartbeat
  alone), and the probe's time reading the state file.

    python benchmarks/guard.py [--runs 20] [--seconds 10] [--poll 0.5]

No sshd: the programs run as on a box, in a temporary HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui

from _fleet import (
    code_line,
    code_under_test,
    machine,
    machine_line,
    metrics_line,
    print_json,
    proc_cpu_seconds,
)

from tui.onbox import probe
from tui.remote.programs import program_source


def write_status(run: Path, epoch: int, total: int) -> None:
    doc = {"schema_version": 1, "state": "running", "pid": os.getpid(),
           "current_epoch": epoch, "total_epochs": total}
    (run / "status.json.tmp").write_text(json.dumps(doc))
    os.replace(run / "status.json.tmp", run / "status.json")


def answer_bytes(req: dict) -> tuple[int, dict]:
    answer = probe.build_answer(req)
    probe.adopt(req, answer)
    return len(zlib.compress(json.dumps(answer, separators=(",", ":")).encode(), 6)), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gpurent-guard-bench-"))
    old_home = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    proc = None
    try:
        runs = [home / "runs" / f"run-{i:02d}" for i in range(args.runs)]
        for run in runs:
            (run / "weights").mkdir(parents=True)
            write_status(run, 0, 1000)
        req = {"roots": ["~/runs"], "runs": {}, "gpu": False, "metrics_budget": 0}
        without, _ = answer_bytes(req)
        idle_without, _ = answer_bytes(req)

        folder = home / ".gpurent-tui" / "guard"
        folder.mkdir(parents=True)
        for name in ("guard.py", "probe.py", "push.py"):  # as the watchdog's install ships them
            (folder / name).write_text(program_source(name.removesuffix(".py")))
        (folder / "config.json").write_text(json.dumps({
            "v": 1, "id": "bench", "provider": "manual", "runs_roots": ["~/runs"],
            "max_hours": 24.0, "no_progress_minutes": 30.0, "poll_seconds": args.poll,
            "actions": {}, "stop_command": "true"}))
        proc = subprocess.Popen([sys.executable, "guard.py"], cwd=folder,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PATH": "/usr/bin:/bin"})
        deadline = time.monotonic() + 10
        while not (folder / "state.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu0, t0 = proc_cpu_seconds(proc.pid), time.monotonic()
        epoch = 0
        while time.monotonic() - t0 < args.seconds:
            epoch += 1
            for run in runs:
                with (run / "metrics.jsonl").open("a") as f:
                    f.write(metrics_line(epoch))
                write_status(run, epoch, 1000)
            time.sleep(1.0)
        cpu = proc_cpu_seconds(proc.pid) - cpu0
        wall = time.monotonic() - t0
        looks = wall / args.poll
        first, _ = answer_bytes(req)
        heartbeat, _ = answer_bytes(req)
        state_bytes = (folder / "state.json").stat().st_size
        t = time.perf_counter()
        for _ in range(1000):
            probe.guard_part(req)
        part_us = (time.perf_counter() - t) * 1000
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        if old_home is not None:
            os.environ["HOME"] = old_home
        shutil.rmtree(home, ignore_errors=True)

    figures = {
        "runs": args.runs, "poll_seconds": args.poll, "seconds": round(wall, 2),
        "guard_cpu_ms_per_look": round(cpu / looks * 1000, 2),
        "guard_cpu_pct_of_a_core": round(cpu / wall * 100, 3),
        "guard_cpu_pct_at_30s_polls": round(cpu / looks / 30 * 100, 4),
        "answer_bytes_no_guard_first": without, "answer_bytes_no_guard_idle": idle_without,
        "answer_bytes_guard_first": first, "answer_bytes_guard_heartbeat": heartbeat,
        "state_file_bytes": state_bytes, "probe_guard_read_us": round(part_us, 1),
    }
    print(f"watchdog over {args.runs} runs advancing one epoch a second, a look every "
          f"{args.poll:g} s, for {wall:.1f} s:")
    print(f"  CPU per look            {figures['guard_cpu_ms_per_look']:8.2f} ms")
    print(f"  CPU share, these polls  {figures['guard_cpu_pct_of_a_core']:8.3f} % of a core")
    print(f"  CPU share, 30 s polls   {figures['guard_cpu_pct_at_30s_polls']:8.4f} % of a core")
    print("probe answer (zlib JSON, as sent), idle box:")
    print(f"  no watchdog             {idle_without:8d} B")
    print(f"  watchdog, first answer  {first:8d} B (state file {state_bytes} B)")
    print(f"  watchdog, heartbeat     {heartbeat:8d} B ({heartbeat - idle_without:+d} B)")
    print(f"  reading the state file  {part_us:8.1f} us per refresh")
    code = code_under_test()
    info = machine()
    print(code_line(code))
    print(machine_line(info))
    print_json({"benchmark": "guard", **figures, "code": code, "machine": info})


if __name__ == "__main__":
    main()
