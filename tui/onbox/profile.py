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

Nothing outlives the client or the deadline: the profiler runs in a session of
its own (its process group holds the dataloader workers it forks), and that
whole group is killed when a beat (`{"beat": N}` every 2 s, the prelude's
Heartbeat) cannot be written, which is how the client's going shows here (sshd closes our stdout
with the channel), and when this program's own alarm, SIGTERM or SIGHUP comes.
Otherwise a cancelled profile would run on to the end of its setting, up to a
quarter of an hour of someone's rented GPU, for nobody.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from tui.onbox.prelude import _NONCE, Heartbeat, emit, stage

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
# What places a training run on the box's GPUs (tui/model/gpu_claim.py): its process's
# starting environment holds only these, and at most this many runs are looked at.
PLACING_ENV = ("CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE", "LOCAL_RANK")
ENV_CAP = 1 << 20
MAX_PLACED = 32
MAX_DEVICES = 65
ENDING_SIGNALS = ("SIGALRM", "SIGTERM", "SIGHUP")
# The profiler running now and its folder: what an ending takes down with it.
_RUNNING = {"proc": None, "project": None}
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


def cpu_count():
    """The cores this process may run on (a container's CPU set, taskset): what the
    dataloader workers can use, which os.cpu_count() (the whole machine) overstates."""
    try:
        return len(os.sched_getaffinity(0)) or os.cpu_count()
    except (AttributeError, OSError):
        return os.cpu_count()


def kill_group(proc):
    """SIGKILL the profiler's process group: it and every worker it forked. Its pid names
    the group while any member lives, so this never reaches a stranger's processes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def end_profiler():
    """Kill the running profiler's whole group and remove its folder: a setting cut short
    measured nothing worth keeping."""
    proc, project = _RUNNING["proc"], _RUNNING["project"]
    if proc is not None:
        kill_group(proc)
        try:
            proc.wait(timeout=2)
        except Exception:
            pass
    if project:
        shutil.rmtree(project, ignore_errors=True)


def end_with(signum, frame):
    """An ending signal: the profiler goes first, then this program by that same signal
    (the client reads SIGALRM as the program's own deadline)."""
    end_profiler()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def beat(beats):
    emit({"beat": beats})


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
    _RUNNING["project"] = project
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            # a session of its own: its group (it, its dataloader workers) ends whole
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    cwd=project, start_new_session=True)
            _RUNNING["proc"] = proc
            try:
                data["rc"] = proc.wait(timeout=float(params.get("tool_timeout") or 900))
            except subprocess.TimeoutExpired:
                data["timeout"] = True
            kill_group(proc)  # past its time, or workers left behind by its end
            proc.wait()
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
        _RUNNING["proc"] = _RUNNING["project"] = None
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


def _unquoted(value):
    value = value.split(" #")[0].strip()
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value[:200]


def config_device(text):
    """train_config.yaml's top-level `device`: its text, or the items of its list (yaml
    writes [0, 1] as `device:` then `- 0` lines); None when it has none."""
    lines = text.splitlines()
    for at, line in enumerate(lines):
        if not line.startswith("device:"):
            continue
        value = line[len("device:"):].split(" #")[0].strip()
        if value.startswith("[") and value.endswith("]"):
            return [_unquoted(v) for v in value[1:-1].split(",")
                    if v.strip()][:MAX_DEVICES]
        if value:
            return _unquoted(value)
        items = []
        for item in lines[at + 1:at + 1 + MAX_DEVICES]:
            if not item.lstrip().startswith("- "):
                break
            items.append(_unquoted(item.lstrip()[2:]))
        return items
    return None


def process_env(pid):
    """The PLACING_ENV variables a process started with (/proc/PID/environ), or None and
    why they cannot be read (another user's process, gone, no pid)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None, "status.json names no pid"
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read(ENV_CAP + 1)
    except OSError as exc:
        return None, errstr(exc)[:200]
    if len(raw) > ENV_CAP:
        return None, "its environment is over %d bytes" % ENV_CAP
    found = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        name = key.decode("ascii", "replace")
        if sep and name in PLACING_ENV:
            found[name] = value.decode("utf-8", "replace")[:400]
    return found, None


def placing_part(params):
    """Each training run's device and starting environment, and this program's own
    environment (the profiler inherits it): where each computes, for the client to judge."""
    runs = []
    for item in (params.get("training") or [])[:MAX_PLACED]:
        item = item if isinstance(item, dict) else {}
        text = read_capped(os.path.join(str(item.get("dir")), "train_config.yaml"),
                           CONFIG_CAP)
        entry = {"config": bool(text)}
        if text:
            entry["device"] = config_device(text)
        env, why = process_env(item.get("pid"))
        if env is None:
            entry["env_problem"] = why
        else:
            entry["env"] = env
        runs.append(entry)
    own = dict((k, os.environ[k][:400]) for k in PLACING_ENV if k in os.environ)
    return {"own": own, "runs": runs}


def main(params_text, nonce):
    """Entry point: the client ends this source with `sys.exit(main(sys.stdin.read(), NONCE))`."""
    params = json.loads(params_text)
    _NONCE[0] = str(nonce)
    sys.stdout = sys.stderr  # only frames go to the real stdout
    for name in ENDING_SIGNALS:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), end_with)
    deadline = int(params.get("deadline") or 0)
    if deadline > 0 and hasattr(signal, "alarm"):
        signal.alarm(deadline)
    Heartbeat(beat, end_profiler).start()
    try:
        emit({"part": "host", "data": {"cpus": cpu_count(),
                                       "libreyolo": libreyolo_installed()}})
        if params.get("mode") == "config":
            if params.get("run_dir") is not None:
                emit({"part": "config", "data": config_part(params)})
            if params.get("training") is not None:
                emit({"part": "placing", "data": placing_part(params)})
        elif params.get("mode") == "profile":
            if libreyolo_installed():
                for index, cell in enumerate(params.get("cells") or []):
                    emit({"part": "cell-%d" % index, "data": run_cell(params, cell, index)})
        else:
            emit({"fatal": "unknown mode %r" % params.get("mode")})
            return 2
    except Exception as exc:
        end_profiler()
        emit({"fatal": errstr(exc)})
        return 3
    emit({"done": True})
    return 0
