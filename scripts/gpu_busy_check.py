"""The GPU-busy figure and `profile` on a real card: what the suite checks only on stand-ins.

    python3 scripts/gpu_busy_check.py [--seconds 60] [--duty 0.5] [--every 10] [--out DIR]
    python3 scripts/gpu_busy_check.py --no-load ...         # whatever already runs on the card
    python3 scripts/gpu_busy_check.py --profile [--data YAML --weights PT] [--device 0] ...

1. Busy integral. A load on GPU 0 (a child of `--python`, torch's bf16 matmuls: busy
   `duty` x `period` seconds, asleep the rest of each period) runs while the probe a box
   runs (tui/onbox/probe.py, started as the panel keeps it: `python3 -c` reading request
   lines) is asked every `--every` seconds; each answer goes through the panel's own
   reader (tui/model/box.py `fold_answer`) into the busy integral (tui/model/busy.py).
   Meanwhile `nvidia-smi --query-gpu=utilization.gpu` is read every `--smi-every` s as
   the reference (4 a second by default: read once a second, a one-second duty cycle
   aliases and every read lands in the same phase). The load's own busy share of the
   window is printed beside them. Then the cost of one busy read: NVML's (the whole
   ~14 s buffer) against `nvidia-smi -q -d UTILIZATION`, median wall ms over `--calls`.
2. Profile (`--profile`): `libreyolo profile run ... --json` through the on-box program
   `gpurent-tui profile` sends (tui/onbox/profile.py), with `--python`, read with
   tui/model/profile.py: the verdict the panel shows, img/s and the dataload share.
   Without `--data`/`--weights` a small synthetic data set and a fresh yolox-n
   checkpoint are made offline first (tests/support/libreyolo_train.py's drawing).

Prints a report and writes OUT/gpu_busy_check.json (figures and raw samples). Needs the
standard library and the repo; torch (the load) and libreyolo (the profile) only in
`--python`. No SSH, no network. Exit 0: the probe's integral is within `--tolerance`
points of the reference (and the profile, if asked, measured); 1: it is not, or a
part failed; 2: no card here (no nvidia-smi, nvidia-smi fails, or the load cannot
start on GPU 0).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui.model.box import BadAnswer, BoxState, fold_answer  # noqa: E402
from tui.model.busy import BusyIntegral  # noqa: E402
from tui.model.profile import (  # noqa: E402
    Cell,
    ProfileError,
    parse_cell,
    parse_grid,
    reading,
    table_rows,
    usd_per_1k_images,
    verdict,
)
from tui.onbox import probe  # noqa: E402
from tui.remote.framing import FrameReader, inflate, new_nonce  # noqa: E402
from tui.remote.programs import (  # noqa: E402
    SERVE_CODE,
    one_shot_payload,
    program_source,
    serve_loader,
)

SCHEMA = "gpurent.gpu_busy_check/1"
SERVE_ENTRY = "\nsys.exit(serve())\n"  # as tui/remote/session.py starts a kept probe
ONE_SHOT_ENTRY = "\nsys.exit(main(sys.stdin.read(), NONCE))\n"
REFERENCE_QUERY = ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
SMI_TIMEOUT = 15.0
ANSWER_TIMEOUT = 60.0
LOAD_READY_SECONDS = 180.0  # torch's import and CUDA's start on a cold machine
NO_CARD = 2

# The load: bf16 matmuls on cuda:0 for `duty` of each `period`, asleep the rest. Each
# busy phase is printed ("busy START END", monotonic seconds, shared by all processes on
# Linux) so the window's true busy share can be counted afterwards.
LOAD = r"""
import sys, time
import torch
duty, period, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
dev = torch.device("cuda:0")
a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
print("ready %s" % torch.cuda.get_device_name(0), flush=True)
while True:
    start = time.monotonic()
    end = start + duty * period
    while time.monotonic() < end:
        c = a @ b
        torch.cuda.synchronize()
    print("busy %.6f %.6f" % (start, time.monotonic()), flush=True)
    time.sleep(max(0.0, start + period - time.monotonic()))
"""

# Run by `--python` when --profile has no --data/--weights: the tests' synthetic shapes
# and a fresh LibreYOLO checkpoint, nothing downloaded.
MAKE_INPUT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from support.libreyolo_train import make_dataset
import libreyolo
folder, images, size = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = make_dataset(folder / "data", n_train=images, n_val=max(2, images // 4), size=size)
libreyolo.LibreYOLOX(None, size="n", nb_classes=2, device="cpu").save(str(folder / "yolox_n.pt"))
print(data)
"""


class NoCard(Exception):
    """Nothing on this machine to measure: the words say what is missing."""


# --- the reference: nvidia-smi's one-sample read, often ---------------------------------


def parse_reference(text: str) -> float | None:
    """The mean `utilization.gpu` over the GPUs listed (one number a line), or None
    when no line reads as one ("[N/A]", an error)."""
    values = []
    for line in text.splitlines():
        try:
            values.append(min(100.0, max(0.0, float(line.strip()))))
        except ValueError:
            continue
    return sum(values) / len(values) if values else None


def read_reference(exe: str) -> float | None:
    try:
        done = subprocess.run([exe, *REFERENCE_QUERY], capture_output=True, text=True,
                              timeout=SMI_TIMEOUT)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return parse_reference(done.stdout) if done.returncode == 0 else None


def check_card(exe: str | None) -> list[str]:
    """The GPU rows the probe reads, or NoCard naming why there are none."""
    if exe is None:
        raise NoCard("no nvidia-smi on PATH: no NVIDIA card or driver on this machine")
    rows = probe.gpu_rows(SMI_TIMEOUT)
    if "rows" not in rows or not rows["rows"]:
        raise NoCard(f"nvidia-smi ({exe}) lists no GPU: {rows.get('error', 'no rows')}")
    return list(rows["rows"])


# --- the load ---------------------------------------------------------------------------


class Load:
    """The duty-cycle load on GPU 0, its busy phases logged to a file."""

    def __init__(self, python: str, duty: float, period: float, size: int) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (a file: a chatty child cannot stall)
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen([python, "-c", LOAD, str(duty), str(period), str(size)],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.errors)
        self.device = ""

    def lines(self) -> list[str]:
        self.log.seek(0)
        return self.log.read().decode(errors="replace").splitlines()

    def wait_ready(self, timeout: float) -> None:
        """Until the load's first matmuls are done; NoCard if it ended or never got there."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready = [line for line in self.lines() if line.startswith("ready")]
            if ready:
                self.device = ready[0][6:].strip()[:200]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        self.errors.seek(0)
        tail = self.errors.read().decode(errors="replace").strip().splitlines()[-3:]
        raise NoCard("the load could not start on GPU 0 (torch, CUDA): "
                     + (" | ".join(tail) or f"not ready within {timeout:g} s"))

    def busy_share(self, start: float, end: float) -> float | None:
        """The share of [start, end] (monotonic) the load spent in its busy phases."""
        busy = 0.0
        for line in self.lines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "busy":
                a, b = float(parts[1]), float(parts[2])
                busy += max(0.0, min(b, end) - max(a, start))
        return busy / (end - start) if end > start else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- the probe, kept as the panel keeps it ----------------------------------------------


class KeptProbe:
    """tui/onbox/probe.py's serve loop under `python`, asked for the GPU part only."""

    def __init__(self, python: str, roots: list[str]) -> None:
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen([python, "-c", SERVE_CODE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.errors)
        assert self.proc.stdin is not None
        self.proc.stdin.write(serve_loader(program_source("probe") + SERVE_ENTRY))
        self.first: dict[str, Any] | None = {"roots": roots, "gpu": True, "gpu_busy": True}

    def ask(self) -> dict[str, Any]:
        """One answer, decoded (the panel's reader checks its shape when it folds it)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        nonce = new_nonce()
        line: dict[str, Any] = {"nonce": nonce}
        if self.first is not None:
            line["set"], self.first = self.first, None
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        reader = FrameReader(nonce, max_frame=16 << 20)
        end = time.monotonic() + ANSWER_TIMEOUT
        while time.monotonic() < end:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                self.errors.seek(0)
                raise RuntimeError("the probe ended without answering: "
                                   + self.errors.read().decode(errors="replace")[-500:])
            for payload in reader.feed(chunk):
                answer = json.loads(inflate(payload, 16 << 20))
                if not isinstance(answer, dict):
                    raise RuntimeError("the probe's answer is not a JSON object")
                return answer
        raise RuntimeError(f"the probe did not answer within {ANSWER_TIMEOUT:g} s")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(exe: str, python: str, seconds: float, every: float, smi_every: float,
            roots: str) -> dict[str, Any]:
    """The probe's integral and nvidia-smi's mean over the same `seconds`.

    A first answer primes the kept probe (NVML's "since the last read" starts there) and
    is not counted: the integral covers from that answer on, as the references do."""
    kept = KeptProbe(python, [roots])
    windows: list[dict[str, Any]] = []
    reference: list[list[float | None]] = []
    try:
        state = fold_answer(BoxState(name="this-machine"), kept.ask(), time.time())
        t0, wall0 = time.monotonic(), time.time()
        state = replace(state, busy=BusyIntegral(last_at=wall0))
        primed = state.gpu_busy
        end = t0 + seconds
        next_probe, next_smi = t0 + every, t0
        while True:
            due = min(next_probe, next_smi, end)
            time.sleep(max(0.0, due - time.monotonic()))
            if next_smi <= due and next_smi < end:
                reference.append([round(time.monotonic() - t0, 3), read_reference(exe)])
                next_smi += smi_every
            if next_probe <= due or due >= end:
                answer = kept.ask()
                now = time.time()
                state = fold_answer(state, answer, now)
                window = state.gpu_busy
                windows.append({
                    "t": round(time.monotonic() - t0, 3),
                    "src": answer.get("gpus", {}).get("busy_src"),
                    "raw": answer.get("gpus", {}).get("busy"),
                    "span": None if window is None else window.span,
                    "pct": None if window is None else round(window.pct, 2)})
                next_probe += every
                if due >= end:
                    break
        t_end = time.monotonic()
    finally:
        kept.close()
    readings = [r[1] for r in reference if r[1] is not None]
    return {
        "t0": t0, "t_end": t_end,
        "gpus": [{"index": g.index, "name": g.name} for g in state.gpus],
        "gpu_note": state.gpu_note,
        "primed": None if primed is None else {"span": primed.span, "pct": primed.pct},
        "probe_pct": state.busy.pct, "covered_s": round(state.busy.covered_s, 3),
        "busy_s": round(state.busy.busy_s, 3), "windows": windows,
        "reference_pct": sum(readings) / len(readings) if readings else None,
        "reference_reads": len(reference), "reference_unread": len(reference) - len(readings),
        "reference": reference,
    }


# --- what one busy read costs -------------------------------------------------------------


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(call: Callable[[], object], calls: int) -> dict[str, float]:
    """Median wall ms and mean CPU ms (this process and its children) of `calls` calls."""
    walls = []
    cpu0 = _cpu()
    for _ in range(calls):
        t = time.perf_counter()
        call()
        walls.append((time.perf_counter() - t) * 1000)
    return {"median_ms": round(statistics.median(walls), 3),
            "cpu_ms": round((_cpu() - cpu0) * 1000 / calls, 3)}


def read_costs(exe: str, calls: int) -> dict[str, Any]:
    """NVML's read of the whole buffer (a one-shot probe's, the kept probe's first) and
    `nvidia-smi -q -d UTILIZATION`'s, through the probe's own functions."""
    t = time.perf_counter()
    lib = probe._nvml()
    out: dict[str, Any] = {"calls": calls,
                           "nvml_init_ms": round((time.perf_counter() - t) * 1000, 3)}
    if lib is None:
        out["nvml"] = None
        out["nvml_note"] = "NVML (libnvidia-ml.so.1) did not load or start here"
    else:
        def whole_buffer() -> object:
            probe._NVML["seen"] = {}
            return probe.nvml_busy()
        out["nvml_answer"] = whole_buffer()
        out["nvml"] = timed(whole_buffer, calls)
    out["smi_answer"] = probe.smi_busy(exe, SMI_TIMEOUT)
    try:  # the driver's text as it stands, to record (tests/data/nvidia-smi-h200)
        text = subprocess.run([exe, "-q", "-d", "UTILIZATION"], capture_output=True,
                              timeout=SMI_TIMEOUT).stdout[:probe.UTIL_CAP]
        out["smi_text"] = text.decode(errors="replace")
    except (subprocess.TimeoutExpired, OSError) as exc:
        out["smi_text"] = f"not read: {exc}"
    out["smi"] = timed(lambda: probe.smi_busy(exe, SMI_TIMEOUT), calls)
    return out


# --- the profile --------------------------------------------------------------------------


def profile_input(python: str, folder: Path, images: int, size: int) -> tuple[str, str]:
    """A synthetic data set and a fresh yolox-n checkpoint, made by `python` offline."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([python, "-c", MAKE_INPUT, str(ROOT / "tests"), str(folder),
                           str(images), str(size)], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError("could not make the profile's data set and checkpoint with "
                           f"{python}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1], str(folder / "yolox_n.pt")


def run_profile(python: str, params: dict[str, Any], deadline: float
                ) -> tuple[dict[str, Any], list[str], int]:
    """tui/onbox/profile.py under `python`, sent as a box gets it: its parts and stages."""
    nonce = new_nonce()
    source = program_source("profile") + ONE_SHOT_ENTRY
    payload = one_shot_payload(source, nonce, json.dumps(params).encode())
    started = time.monotonic()
    errors = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen([python, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=errors)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(payload)
    proc.stdin.close()
    reader = FrameReader(nonce, max_frame=16 << 20)
    parts: dict[str, Any] = {}
    stages: list[str] = []
    while chunk := os.read(proc.stdout.fileno(), 1 << 16):
        for raw in reader.feed(chunk):
            frame = json.loads(raw)
            if "stage" in frame:
                stages.append(f"{time.monotonic() - started:6.1f} s  {frame['stage']}")
            if "part" in frame:
                parts[frame["part"]] = frame["data"]
            if "fatal" in frame:
                stages.append(f"fatal: {frame['fatal']}")
    returncode = proc.wait(timeout=deadline + 30)
    if returncode:
        errors.seek(0)
        stages.append(f"exit {returncode}: {errors.read().decode(errors='replace')[-2000:]}")
    return parts, stages, returncode


def cell_document(cell: Cell, usd_per_hr: float | None) -> dict[str, Any]:
    return {"batch": cell.batch, "workers": cell.workers, "img_per_s": cell.img_per_s,
            "dataload_frac": cell.dataload_frac, "gpu_util": cell.gpu_util,
            "step_ms": cell.step_ms, "gpu_busy_ms_per_step": cell.gpu_busy_ms_per_step,
            "reading": reading(cell) if cell.measured else None,
            "usd_per_1k_images": usd_per_1k_images(usd_per_hr, cell.img_per_s),
            "libreyolo_bound": cell.bound, "problem": cell.problem,
            "dropped": list(cell.dropped)}


def profile_part(args: argparse.Namespace) -> dict[str, Any]:
    """The profile's settings, each cell's figures and the verdict the panel shows."""
    with tempfile.TemporaryDirectory(prefix="gpu-busy-profile-input-") as folder:
        return _profile(args, Path(folder))


def _profile(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    grid = args.grid
    data, weights = args.data, args.weights
    if data is None or weights is None:
        made = profile_input(args.python, folder, args.images, args.image_size)
        data, weights = data or made[0], weights or made[1]
    settings = {"data": str(data), "weights": str(weights), "size": args.size,
                "imgsz": args.imgsz, "device": args.device, "steps": args.steps,
                "warmup": args.warmup}
    deadline = 900.0 * len(grid) + 30
    params = dict(settings, mode="profile", deadline=int(deadline) - 10,
                  tool_timeout=895, cells=[{"batch": b, "workers": w} for b, w in grid])
    parts, stages, returncode = run_profile(args.python, params, deadline)
    found = parts.get("host")
    host: dict[str, Any] = found if isinstance(found, dict) else {}
    cpus = host.get("cpus") if isinstance(host.get("cpus"), int) else None
    doc: dict[str, Any] = {"settings": {**settings, "batch": args.batch,
                                        "workers": args.workers},
                           "cpus": cpus, "usd_per_hr": args.usd_per_hr, "stages": stages,
                           "exit": returncode, "cells": [], "verdict": ""}
    if host.get("libreyolo") is not True:
        doc.update(outcome="failed", message=(
            f"libreyolo is not installed for {args.python} (carry its wheels; "
            "docs/profile.md, On a real card)" if host else
            f"the profile program did not start under {args.python}: "
            + (stages[-1] if stages else "no answer")))
        return doc
    cells = [parse_cell(parts.get(f"cell-{i}"), b, w) for i, (b, w) in enumerate(grid)]
    words = verdict(cells, (args.batch, args.workers), cpus, args.usd_per_hr,
                    on_cpu=str(args.device).lower() == "cpu")
    measured = any(c.measured for c in cells)
    doc.update(outcome="done" if measured else "failed", verdict=words,
               message=words if measured else (cells[0].problem or "nothing measured"),
               cells=[cell_document(c, args.usd_per_hr) for c in cells],
               table=table_rows(cells, args.usd_per_hr))
    return doc


# --- the report ---------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:5.1f} %"


def report_lines(doc: dict[str, Any]) -> list[str]:
    lines = []
    busy = doc.get("busy")
    if busy:
        s = doc["settings"]
        load = doc.get("load")
        lines.append(f"GPUs: {', '.join(g['name'] for g in busy['gpus']) or '?'}")
        lines.append("load: none (--no-load)" if load is None else
                     f"load: bf16 matmuls on {load['device']}, busy {s['duty']} of each "
                     f"{s['period']} s")
        lines.append(f"window: {s['seconds']} s; the probe every {s['every']} s, "
                     f"nvidia-smi utilization.gpu every {s['smi_every']} s")
        if load is not None:
            lines.append(f"  the load's own busy share       {_pct(load['busy_pct'])}")
        lines.append(f"  nvidia-smi utilization.gpu mean  {_pct(busy['reference_pct'])}"
                     f" ({busy['reference_reads']} reads, {busy['reference_unread']} unread)")
        srcs = sorted({str(w['src']) for w in busy['windows']})
        lines.append(f"  the probe's busy integral       {_pct(busy['probe_pct'])}"
                     f" (over {busy['covered_s']:.1f} s, {len(busy['windows'])} windows, "
                     f"read by {', '.join(srcs)})")
        diff = doc.get("difference_pts")
        lines.append("  difference (probe - reference)  "
                     + ("-" if diff is None else f"{diff:+5.1f} points")
                     + f"; tolerance {s['tolerance']} points: "
                     + ("within" if doc.get("within_tolerance") else "OUTSIDE"))
        primed = busy["primed"]
        if primed is not None:
            lines.append(f"    (before the window, not counted: {primed['pct']:.1f} % over "
                         f"{primed['span']} s)")
        for w in busy["windows"]:
            lines.append(f"    t={w['t']:7.2f} s  {w['src'] or '-':<10} span "
                         f"{w['span'] if w['span'] is not None else '-':>6} s  "
                         f"{_pct(w['pct'])}")
    cost = doc.get("cost")
    if cost:
        lines.append(f"one busy read (median wall / mean CPU over {cost['calls']} calls):")
        if cost["nvml"] is None:
            lines.append(f"  NVML: {cost['nvml_note']}")
        else:
            nvml = cost["nvml"]
            lines.append(f"  NVML nvmlDeviceGetSamples, whole buffer  {nvml['median_ms']:8.3f}"
                         f" ms / {nvml['cpu_ms']:.3f} ms CPU (init once "
                         f"{cost['nvml_init_ms']:.1f} ms)")
        smi = cost["smi"]
        lines.append(f"  nvidia-smi -q -d UTILIZATION             {smi['median_ms']:8.3f}"
                     f" ms / {smi['cpu_ms']:.3f} ms CPU")
    prof = doc.get("profile")
    if prof:
        lines.append(f"profile ({prof['outcome']}): {prof['message']}")
        for cell in prof.get("cells", []):
            if cell["img_per_s"] is not None:
                frac = cell["dataload_frac"]
                lines.append(f"  batch {cell['batch']} workers {cell['workers']}: "
                             f"{cell['img_per_s']:.1f} img/s, dataload "
                             f"{'?' if frac is None else f'{frac:.2f}'} of a step, "
                             f"GPU busy {cell['gpu_util']}, reads {cell['reading']}; "
                             f"LibreYOLO says {cell['libreyolo_bound']}")
    lines.append(f"exit {doc['exit_code']}")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--python", default=sys.executable,
        help="the interpreter with torch (the load) and libreyolo (the profile)")
    add("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-busy-check")))
    add("--seconds", type=float, default=60.0, help="the measured window")
    add("--duty", type=float, default=0.5, help="the load's busy share of each period")
    add("--period", type=float, default=1.0)
    add("--matrix", type=int, default=8192, help="the load's bf16 matmul size")
    add("--no-load", action="store_true", help="measure whatever already runs")
    add("--every", type=float, default=10.0, help="seconds between probe reads (<= 14)")
    add("--smi-every", type=float, default=0.25, help="seconds between reference reads")
    add("--calls", type=int, default=50, help="calls per read-cost figure")
    add("--tolerance", type=float, default=10.0, help="points the integral may be off")
    add("--profile", action="store_true", help="also run `libreyolo profile run`")
    add("--data", help="a data.yaml (default: a synthetic set made here)")
    add("--weights", help="a LibreYOLO checkpoint (default: a fresh yolox-n made here)")
    add("--size", default="n")
    add("--batch", type=int, default=16)
    add("--workers", type=int, default=8)
    add("--imgsz", type=int, default=640)
    add("--device", default="0")
    add("--steps", type=int, default=20)
    add("--warmup", type=int, default=5)
    add("--try", dest="try_", nargs="*", default=[], help="e.g. workers=1,8,12")
    add("--usd-per-hr", type=float, help="the card's rate, for $/1k images")
    add("--images", type=int, default=128, help="images in the made data set")
    add("--image-size", type=int, default=640, help="their side, in pixels")
    add("--skip-busy", action="store_true", help="the profile only")
    args = parser.parse_args(argv)
    if not 0 < args.every <= 14 or not 0 < args.smi_every <= args.seconds \
            or not 0 <= args.duty <= 1 or args.seconds <= 0 or args.calls < 1:
        parser.error("need 0 < --every <= 14, 0 < --smi-every <= --seconds, "
                     "0 <= --duty <= 1, --calls >= 1")
    try:
        args.grid = parse_grid(args.try_, args.batch, args.workers)
    except ProfileError as exc:
        parser.error(str(exc))
    return args


def busy_part(args: argparse.Namespace, exe: str, doc: dict[str, Any]) -> None:
    load = None if args.no_load else Load(args.python, args.duty, args.period, args.matrix)
    try:
        if load is not None:
            load.wait_ready(LOAD_READY_SECONDS)
            time.sleep(min(2.0, args.period * 2))  # into the cycle before the first read
        with tempfile.TemporaryDirectory(prefix="gpu-busy-roots-") as roots:
            busy = measure(exe, sys.executable, args.seconds, args.every, args.smi_every,
                           roots)
        if load is not None:
            share = load.busy_share(busy["t0"], busy["t_end"])
            doc["load"] = {"device": load.device,
                           "busy_pct": None if share is None else round(100 * share, 2)}
        doc["cost"] = read_costs(exe, args.calls)
    finally:
        if load is not None:
            load.stop()
    doc["busy"] = busy
    if busy["probe_pct"] is not None and busy["reference_pct"] is not None:
        diff = busy["probe_pct"] - busy["reference_pct"]
        doc["difference_pts"] = round(diff, 2)
        doc["within_tolerance"] = abs(diff) <= args.tolerance


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "schema": SCHEMA, "at": time.time(),
        "settings": {k: getattr(args, k) for k in (
            "seconds", "duty", "period", "every", "smi_every", "calls", "tolerance",
            "no_load", "python")},
        "load": None, "busy": None, "cost": None, "difference_pts": None,
        "within_tolerance": None, "profile": None}
    exe = shutil.which("nvidia-smi")
    code = 0
    try:
        if not args.skip_busy:
            doc["gpu_rows"] = check_card(exe)
            assert exe is not None
            busy_part(args, exe, doc)
            code = 0 if doc["within_tolerance"] else 1
        if args.profile:
            doc["profile"] = profile_part(args)
            code = code or (0 if doc["profile"]["outcome"] == "done" else 1)
    except NoCard as exc:
        code = NO_CARD
        doc["no_card"] = str(exc)
        print(f"gpu_busy_check: {exc}", file=sys.stderr)
    except (RuntimeError, BadAnswer, subprocess.TimeoutExpired) as exc:
        code = 1
        doc["error"] = str(exc)
        print(f"gpu_busy_check: {exc}", file=sys.stderr)
    doc["exit_code"] = code
    (args.out / "gpu_busy_check.json").write_text(json.dumps(doc, indent=2, default=str))
    if code != NO_CARD:
        print("\n".join(report_lines(doc)))
    print(f"written: {args.out / 'gpu_busy_check.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
