"""The on-box half of `profile`: LibreYOLO's own `libreyolo profile run`, for a few steps.

Run by the box's TRAINING interpreter (`<python> -`, the box's `python` key), as
tui/onbox/preflight.py is; standard library only, Python 3.6 syntax. Its
parameters (JSON) arrive on stdin; every answer is a frame:

  {"part": "host", "data": {"cpus", "libreyolo"}}      the cores feeding the loader
  {"part": "config", "data": {key: scalar}}            mode config: a run's
                                                       train_config.yaml, top-level scalars
  {"stage": "profile cell N"}                          before each cell
  {"part": "cell-N", "data": {"rc", "cli", "profile", "err"}}  one finished cell
  {"done": true}

Modes:
  config   {"run_dir"}
  profile  {"data", "weights", "size", "imgsz", "device", "steps", "warmup",
            "cells": [{"batch", "workers"}...], "tool_timeout"}

Each cell runs in a fresh temporary project folder, removed afterwards; only the
scalar fields of its profile.json come back (the kernel lists stay on the box).
LibreYOLO's output goes to files, read back capped, so a tool that prints
without end fills neither memory nor the frame. Nothing runs through a shell.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from tui.onbox.prelude import _NONCE, emit, stage

OUT_CAP = 1 << 16  # bytes read back of LibreYOLO's stdout (its --json answer is ~250)
ERR_TAIL = 2000  # bytes of its stderr kept, from the end: where the error is
PROFILE_CAP = 8 << 20  # profile.json is ~110 kB on an H200 run
CONFIG_CAP = 1 << 16
# profile.json's top-level fields that come back; everything else stays on the box.
SCALARS = ("bound", "bound_why", "step_ms", "img_per_s", "dataload_ms", "dataload_frac",
           "gpu_util", "gpu_util_raw", "gpu_busy_ms_per_step", "mean_kernel_us",
           "kernels_per_step", "memcpy_ms_per_step", "host_overhead_ms_per_step",
           "launches_per_step", "cuda_mallocs_per_step", "memory_pressure", "peak_vram_mb",
           "tensorcore_pct", "model")
CONFIG_KEYS = ("batch", "workers", "imgsz", "device", "size", "data", "amp")
LIBREYOLO_CLI = ("import sys; sys.argv[0] = 'libreyolo'; "
                 "from libreyolo.cli import entrypoint; sys.exit(entrypoint())")


def errstr(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:2000]


def libreyolo_installed():
    import importlib.util
    return importlib.util.find_spec("libreyolo") is not None


def read_capped(path, cap, tail=False):
    try:
        with open(path, "rb") as f:
            if tail:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - cap))
            return f.read(cap).decode("utf-8", "replace")
    except OSError:
        return ""


def json_document(text):
    """The JSON object a CLI printed on stdout, whatever else it printed around it."""
    text = text.strip()
    try:
        found = json.loads(text)
        if isinstance(found, dict):
            return found
    except ValueError:
        pass
    start = text.rfind("\n{")
    start = 0 if start < 0 and text.startswith("{") else start
    if start >= 0:
        try:
            found = json.loads(text[start:])
            if isinstance(found, dict):
                return found
        except ValueError:
            pass
    return None


def picked(doc):
    """profile.json's scalar fields and its config block, nothing bigger."""
    out = {}
    for key in SCALARS:
        value = doc.get(key)
        if value is None or isinstance(value, (bool, int, float)):
            out[key] = value
        elif isinstance(value, str):
            out[key] = value[:500]
    config = doc.get("config")
    if isinstance(config, dict):
        out["config"] = {k: v for k, v in config.items()
                         if isinstance(v, (bool, int, float, str)) and len(str(v)) < 200}
    return out


def run_cell(params, cell, index):
    stage("profile cell %d" % index)
    project = tempfile.mkdtemp(prefix="gpurent-profile-")
    out_path = os.path.join(project, "stdout")
    err_path = os.path.join(project, "stderr")
    argv = [sys.executable, "-c", LIBREYOLO_CLI, "profile", "run", str(params["data"]),
            "--weights", str(params["weights"]), "--size", str(params["size"]),
            "--batch", str(int(cell["batch"])), "--workers", str(int(cell["workers"])),
            "--imgsz", str(int(params["imgsz"])), "--device", str(params["device"]),
            "--steps", str(int(params["steps"])), "--warmup", str(int(params["warmup"])),
            "--project", os.path.join(project, "p"), "--json"]
    data = {"batch": cell["batch"], "workers": cell["workers"]}
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    cwd=project)
            try:
                data["rc"] = proc.wait(timeout=float(params.get("tool_timeout") or 900))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                data["timeout"] = True
        data["cli"] = json_document(read_capped(out_path, OUT_CAP))
        data["err"] = read_capped(err_path, ERR_TAIL, tail=True)
        # profile.json where LibreYOLO writes it in this cell's own folder, never a path
        # read from its output.
        text = read_capped(os.path.join(project, "p", "prof", "profile.json"), PROFILE_CAP)
        try:
            doc = json.loads(text) if text else None
        except ValueError:
            doc = None
        data["profile"] = picked(doc) if isinstance(doc, dict) else None
    except OSError as exc:
        data["error"] = errstr(exc)
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return data


def config_part(params):
    """A run's train_config.yaml: its top-level `key: scalar` lines of CONFIG_KEYS."""
    text = read_capped(os.path.join(str(params["run_dir"]), "train_config.yaml"), CONFIG_CAP)
    found = {}
    for line in text.splitlines():
        if line[:1] in (" ", "-", "#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key in CONFIG_KEYS and value and value not in ("null", "~"):
            if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found[key] = value[:1000]
    return {"found": bool(text), "values": found}


def main(params_text, nonce):
    """Entry point: the client ends this source with `sys.exit(main(sys.stdin.read(), NONCE))`."""
    params = json.loads(params_text)
    _NONCE[0] = str(nonce)
    sys.stdout = sys.stderr  # only frames go to the real stdout
    deadline = int(params.get("deadline") or 0)
    if deadline > 0 and hasattr(signal, "alarm"):
        signal.alarm(deadline)
    try:
        emit({"part": "host", "data": {"cpus": os.cpu_count(),
                                       "libreyolo": libreyolo_installed()}})
        if params.get("mode") == "config":
            emit({"part": "config", "data": config_part(params)})
        elif params.get("mode") == "profile":
            if libreyolo_installed():
                for index, cell in enumerate(params.get("cells") or []):
                    emit({"part": "cell-%d" % index, "data": run_cell(params, cell, index)})
        else:
            emit({"fatal": "unknown mode %r" % params.get("mode")})
            return 2
    except Exception as exc:
        emit({"fatal": errstr(exc)})
        return 3
    emit({"done": True})
    return 0
