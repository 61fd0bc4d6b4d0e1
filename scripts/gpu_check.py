"""The check on a real GPU machine: what the test suite cannot do without a card.

    python3 scripts/gpu_check.py [--python PATH] [--out DIR]

Runs the check's own on-box program (tui/onbox/preflight.py) with the
machine's torch interpreter, exactly as a box runs it, reads its frames and
judges them with tui/model/preflight.py; records every nvidia-smi query the
check makes, in the layout of tests/data/nvidia-smi/ (so they can become
recorded answers for the tests); prints the report and writes it as JSON.
Needs only the standard library, the repo and a Python with torch: no SSH,
no asyncssh, no network. Exit code: the check's (0 no problem, 1 a problem).
On a healthy card expect `verdict: ok`, a finite 2000x2000 matmul per GPU
with its time, and the PCIe link read under load.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui.model.preflight import judge_check  # noqa: E402
from tui.remote.framing import FrameReader, new_nonce  # noqa: E402

ENTRY = "\nsys.exit(main(sys.stdin.read(), NONCE))\n"
QUERIES = {  # the file names of tests/data/nvidia-smi/<box>/ -> nvidia-smi's arguments
    "base": ["--query-gpu=index,pci.bus_id,driver_version,memory.total,temperature.gpu,"
             "ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
             "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
             "pcie.link.width.max,name"],
    "event": ["--query-gpu=index,clocks_event_reasons.active"],
    "throttle": ["--query-gpu=index,clocks_throttle_reasons.active"],
    "compute_cap": ["--query-gpu=index,compute_cap"],
    "remapped": ["--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure"],
    "pcie": ["--query-gpu=index,pcie.link.gen.current,pcie.link.gen.max,"
             "pcie.link.width.current,pcie.link.width.max"],
}


def record_smi(out: Path) -> None:
    folder = out / "nvidia-smi"
    folder.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("nvidia-smi")
    if exe is None:
        (folder / "absent").write_text("no nvidia-smi on PATH\n")
        return
    for name, args in QUERIES.items():
        done = subprocess.run([exe, *args, "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            (folder / f"{name}.csv").write_text(done.stdout)
        else:
            (folder / f"{name}.err").write_text(done.stderr or done.stdout)
    full = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    (folder / "plain.txt").write_text(full.stdout + full.stderr)


def run_program(python: str, deadline: int) -> tuple[dict[str, object], list[str], int]:
    """The check program under `python`, as run_program sends it; its parts and stages."""
    nonce = new_nonce()
    source = (ROOT / "tui" / "onbox" / "preflight.py").read_text() + ENTRY
    params = {"mode": "check", "deadline": deadline, "persistent": None,
              "runs_roots": [os.getcwd()], "matmul_n": 2000, "smi_timeout": 15,
              "tool_timeout": 120}
    loader = (f"import sys, io\nNONCE = {nonce!r}\n"
              f"sys.stdin = io.StringIO({json.dumps(params)!r})\n"
              f"exec(compile({source!r}, '<gpurent-onbox>', 'exec'))\n")
    started = time.monotonic()
    errors = tempfile.TemporaryFile()  # noqa: SIM115 (a file, not a pipe: a chatty stderr cannot stall it)
    proc = subprocess.Popen([python, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errors)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(loader.encode())
    proc.stdin.close()
    reader = FrameReader(nonce, max_frame=16 << 20)
    parts: dict[str, object] = {}
    stages: list[str] = []
    while chunk := os.read(proc.stdout.fileno(), 1 << 16):  # stages timed as they come
        for raw in reader.feed(chunk):
            frame = json.loads(raw)
            if "stage" in frame:
                stages.append(f"{time.monotonic() - started:6.1f} s  {frame['stage']}")
            if "part" in frame:
                parts[frame["part"]] = frame["data"]
    returncode = proc.wait(timeout=deadline + 30)
    if returncode:
        errors.seek(0)
        stages.append(f"exit {returncode}: {errors.read().decode(errors='replace')[-2000:]}")
    return parts, stages, returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter with torch (default: this one)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    parser.add_argument("--deadline", type=int, default=300)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    record_smi(args.out)
    parts, stages, _ = run_program(args.python, args.deadline)
    report = judge_check(parts, box="this-machine", python=args.python,
                         checked_at=time.time())
    (args.out / "parts.json").write_text(json.dumps(parts, indent=2))
    (args.out / "check.json").write_text(json.dumps(report.document(), indent=2))
    print("\n".join(stages))
    print("\n".join(report.lines()))
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
