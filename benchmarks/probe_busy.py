"""What the GPU-busy figure costs the box: CPU per refresh and bytes per answer, before
and after the probe added the driver's utilisation average to its GPU read.

Why: the probe runs on a rented box every few seconds for days; the busy figure must not
cost more than a sliver of the CPU it measures. The probe reads the driver's ~14 s average
through NVML (ctypes, kept open in the kept probe) and forks `nvidia-smi -q -d
UTILIZATION` only where NVML will not load. This machine has no GPU: the fork is measured
against a stand-in `nvidia-smi` (a shell script replaying the H200 recordings, cheaper
than the real 39 ms), the NVML side's own Python work (summing 71 samples) is measured
here, and the H200's recorded costs (tests/data/nvidia-smi-h200 README, the team's
reference query-cost-nvml-vs-nvidia-smi.txt) are printed beside them.

    python benchmarks/probe_busy.py [--refreshes 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui

from _fleet import REPO, code_line, code_under_test, machine, machine_line, print_json

from tui.onbox import probe

FIXTURES = REPO / "tests" / "data" / "nvidia-smi-h200"
# Recorded on the H200 (driver 580.159.04): CPU per call.
RECORDED_MS = {"nvidia-smi --query-gpu (the GPU rows)": 24.1,
               "nvidia-smi -q -d UTILIZATION (fallback)": 39.3,
               "nvmlDeviceGetSamples, 71 samples (NVML)": 2.83,
               "nvmlInit_v2, once per kept probe": 9.9}


def stand_in(bin_dir: Path) -> None:
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"""#!/bin/sh
case "$*" in
  *UTILIZATION*) cat '{FIXTURES / "util-17.txt"}' ;;
  *) cat '{FIXTURES / "query.csv"}' ;;
esac
""")
    exe.chmod(0o755)


def cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def per_refresh(req: dict[str, object], refreshes: int) -> tuple[float, int, int]:
    """CPU ms per answer (this process and what it forks), zlib bytes and the gpus part."""
    cpu0 = cpu_now()
    for _ in range(refreshes):
        payload, _, answer = probe.answer_payload(req)
    cpu = (cpu_now() - cpu0) / refreshes * 1000
    gpus = len(zlib.compress(repr(answer.get("gpus")).encode(), 6))
    return cpu, len(payload), gpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=200)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="probe-busy-"))
    old_path = os.environ.get("PATH", "")
    try:
        stand_in(tmp / "bin")
        os.environ["PATH"] = f"{tmp / 'bin'}:{old_path}"
        root = tmp / "runs"
        root.mkdir()
        base = {"roots": [str(root)], "runs": {}}
        before = per_refresh({**base, "gpu_busy": False}, args.refreshes)
        after = per_refresh(base, args.refreshes)
        samples = [(10_000_000 + 200_000 * i, i % 2 * 99) for i in range(71)]
        t = time.perf_counter()
        for _ in range(10_000):
            probe.nvml_window(samples, 0)
        window_us = (time.perf_counter() - t) / 10_000 * 1e6
    finally:
        os.environ["PATH"] = old_path
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {
        "refreshes": args.refreshes,
        "cpu_ms_before": round(before[0], 2), "cpu_ms_after_nvidia_smi": round(after[0], 2),
        "answer_bytes_before": before[1], "answer_bytes_after": after[1],
        "gpus_part_bytes_before": before[2], "gpus_part_bytes_after": after[2],
        "nvml_window_us": round(window_us, 1),
        "recorded_h200_ms": RECORDED_MS,
    }
    print(f"probe answer per refresh, an idle box with one GPU ({args.refreshes} refreshes, "
          "stand-in nvidia-smi):")
    print(f"  CPU, GPU rows only            {before[0]:8.2f} ms (probe + forks)")
    print(f"  CPU, + busy via nvidia-smi -q {after[0]:8.2f} ms ({after[0] - before[0]:+.2f} ms)")
    print(f"  answer bytes (zlib JSON)      {before[1]:8d} B -> {after[1]} B "
          f"({after[1] - before[1]:+d} B)")
    print(f"  NVML side: 71 samples summed  {window_us:8.1f} us")
    print("recorded on the H200, CPU per call:")
    for what, ms in RECORDED_MS.items():
        print(f"  {what:<42} {ms:6.2f} ms")
    code = code_under_test()
    info = machine()
    print(code_line(code))
    print(machine_line(info))
    print_json({"benchmark": "probe_busy", **figures, "code": code, "machine": info})


if __name__ == "__main__":
    main()
