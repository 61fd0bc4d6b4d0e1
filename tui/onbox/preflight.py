"""The on-box half of `check` and `doctor`: run by the box's TRAINING interpreter.

Sent as the source of `<python> -` where <python> is the box's `python` key
(rented images keep torch in a conda or venv python, not in the system one).
Standard library only and Python 3.6 syntax, like every program in tui/onbox;
torch is imported late, inside a function, so a box without torch still gets
every other answer.

It is started by BoxSession.run_program (tui/remote/programs.py): the client
ends it with `sys.exit(main(sys.stdin.read(), NONCE))`, its parameters (JSON)
arrive on stdin. Every answer goes out as a frame (`\\n--gpurent-<nonce> <length>\\n<json>`, see
tui/remote/framing.py), so login banners and library chatter are ignored:

  {"stage": "..."}             before each step that could hang or crash, so the
                               client can say where a dead or silent box stopped
  {"part": name, "data": {}}   one finished section: host, smi, torch, pcie_busy,
                               libreyolo, doctor
  {"done": true}               the end

Modes:
  check   {"persistent", "runs_roots", "matmul_n", "smi_timeout", "tool_timeout"}
  doctor  {"data", "fast", "strict", "tool_timeout"}

The program arms SIGALRM with the client's deadline (default action: the
process dies), so a CUDA call hung inside the driver cannot outlive the
client's wait. It never runs a shell: nvidia-smi and LibreYOLO's CLI are run
with argument lists, the data path as one argument.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings

from tui.onbox.prelude import _NONCE, emit, stage

OUT_CAP = 1 << 16  # bytes kept of one tool's stdout or stderr
DOCTOR_OUT_CAP = 8 << 20
MAX_FINDINGS = 500
MAX_PATHS = 20
PCIE_BUSY_SECONDS = 0.8
# LibreYOLO's CLI as its console script runs it, but under this interpreter.
LIBREYOLO_CLI = ("import sys; sys.argv[0] = 'libreyolo'; "
                 "from libreyolo.cli import entrypoint; sys.exit(entrypoint())")

SMI_BASE = ("index,pci.bus_id,driver_version,memory.total,temperature.gpu,"
            "ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
            "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
            "pcie.link.width.max,name")
SMI_THROTTLE = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
SMI_PCIE = "index,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current," \
           "pcie.link.width.max"

def part(name, data):
    emit({"part": name, "data": data})


def errstr(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:2000]


def run_tool(argv, timeout, cap=OUT_CAP):
    """Run a program (no shell); its exit code and capped output, or why it did not run."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    except OSError as exc:
        return {"error": errstr(exc)}
    return {"rc": proc.returncode,
            "out": proc.stdout[:cap].decode("utf-8", "replace"),
            "out_bytes": len(proc.stdout),
            "err": proc.stderr[-cap:].decode("utf-8", "replace")}


# -- where things live -------------------------------------------------------------

def _fstype(mount):
    found = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[1].replace("\\040", " ") == mount:
                    found = fields[2]  # the last one mounted there wins
    except OSError:
        pass
    return found


def place(path):
    """Where a path really lives: its filesystem, mount point, free and total bytes."""
    info = {"path": path}
    try:
        real = os.path.realpath(os.path.expanduser(path))
        info["real"] = real
        info["exists"] = os.path.exists(real)
        probe = real
        while not os.path.exists(probe) and probe != os.path.dirname(probe):
            probe = os.path.dirname(probe)
        info["dev"] = os.stat(probe).st_dev
        mount = probe
        while not os.path.ismount(mount) and mount != os.path.dirname(mount):
            mount = os.path.dirname(mount)
        info["mount"] = mount
        info["fstype"] = _fstype(mount)
        vfs = os.statvfs(probe)
        info["free"] = vfs.f_bavail * vfs.f_frsize
        info["total"] = vfs.f_blocks * vfs.f_frsize
    except OSError as exc:
        info["error"] = errstr(exc)
    return info


def hf_home():
    """HF_HOME as huggingface_hub resolves it: $HF_HOME, else $XDG_CACHE_HOME/huggingface."""
    if os.environ.get("HF_HOME"):
        return os.environ["HF_HOME"], "HF_HOME"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(cache, "huggingface"), "default"


def host_part(params):
    home, source = hf_home()
    data = {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
            "hf_home": place(home), "hf_home_source": source,
            "runs_roots": [place(root) for root in params.get("runs_roots") or []]}
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        data["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    if os.environ.get("HF_HUB_CACHE"):
        data["hf_hub_cache"] = place(os.environ["HF_HUB_CACHE"])
    if params.get("persistent"):
        data["persistent"] = place(params["persistent"])
    return data


# -- nvidia-smi ---------------------------------------------------------------------

def smi_query(exe, fields, timeout, option="--query-gpu"):
    return run_tool([exe, "%s=%s" % (option, fields), "--format=csv,noheader,nounits"],
                    timeout)


def smi_part(params):
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"absent": True}
    timeout = float(params.get("smi_timeout") or 15)
    data = {"base": smi_query(exe, SMI_BASE, timeout)}
    if "timeout" in data["base"]:
        return data  # a hung nvidia-smi (a GPU off the bus): do not wait three more times
    for field in SMI_THROTTLE:  # renamed in newer drivers; older ones know only the old name
        answer = smi_query(exe, "index," + field, timeout)
        answer["field"] = field
        data["throttle"] = answer
        if answer.get("rc") == 0:
            break
    data["compute_cap"] = smi_query(exe, "index,compute_cap", timeout)
    data["remapped"] = smi_query(exe, "gpu_bus_id,remapped_rows.pending,remapped_rows.failure",
                                 timeout, "--query-remapped-rows")
    return data


# -- torch --------------------------------------------------------------------------

def first_line(exc):
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text[:1500])


def matmul(torch, index, n):
    """One real n x n matmul on cuda:<index>: its sum, and its time cold and warm."""
    device = "cuda:%d" % index
    started = time.time()
    x = torch.rand(n, n, device=device)
    total = float((x @ x).sum())
    torch.cuda.synchronize(index)
    first = time.time() - started
    best = None
    for _ in range(3):
        started = time.time()
        y = x @ x
        torch.cuda.synchronize(index)
        took = time.time() - started
        best = took if best is None else min(best, took)
    del y
    return {"sum": total if math.isfinite(total) else str(total), "finite": math.isfinite(total),
            "expected": n ** 3 / 4.0, "first_s": first, "best_s": best, "n": n}


def torch_part(params):
    stage("import torch")
    try:
        import torch
    except ImportError as exc:
        return {"installed": False, "error": first_line(exc)}
    except Exception as exc:  # a broken install: a missing .so, an ABI clash
        return {"installed": True, "import_error": first_line(exc)}
    data = {"installed": True, "version": str(getattr(torch, "__version__", "?")),
            "file": str(getattr(torch, "__file__", "")),
            "cuda": getattr(getattr(torch, "version", None), "cuda", None)}
    stage("torch.cuda.is_available()")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            data["available"] = bool(torch.cuda.is_available())
        except Exception as exc:
            data["available"] = False
            data["available_error"] = first_line(exc)
    data["cuda_warnings"] = [str(w.message)[:1000] for w in caught][:5]
    if not data["available"]:
        return data
    try:
        data["arch_list"] = [str(a) for a in torch.cuda.get_arch_list()]
        data["device_count"] = int(torch.cuda.device_count())
    except Exception as exc:
        data["device_error"] = first_line(exc)
        return data
    n = int(params.get("matmul_n") or 2000)
    gpus = []
    for index in range(data["device_count"]):
        gpu = {"index": index}
        gpus.append(gpu)
        stage("GPU %d: properties" % index)
        try:
            gpu["name"] = str(torch.cuda.get_device_name(index))
            major, minor = torch.cuda.get_device_capability(index)
            gpu["capability"] = [int(major), int(minor)]
            gpu["memory"] = int(torch.cuda.get_device_properties(index).total_memory)
        except Exception as exc:
            gpu["error"] = first_line(exc)
            continue
        stage("GPU %d: %dx%d matmul" % (index, n, n))
        try:
            gpu["matmul"] = matmul(torch, index, n)
        except Exception as exc:
            gpu["error"] = first_line(exc)
    data["gpus"] = gpus
    return data


def pcie_busy_part(torch_data):
    """The PCIe link read while every working GPU multiplies: idle cards drop their link
    speed to save power, so a link read at rest says nothing about the slot."""
    exe = shutil.which("nvidia-smi")
    working = [g["index"] for g in torch_data.get("gpus") or []
               if (g.get("matmul") or {}).get("finite")]
    if exe is None or not working:
        return None
    stage("PCIe link under load")
    import torch

    stop = threading.Event()
    failed = []

    def load():
        try:
            xs = [torch.rand(1024, 1024, device="cuda:%d" % i) for i in working]
            while not stop.is_set():
                for i, x in zip(working, xs):
                    for _ in range(20):
                        x @ x
                    torch.cuda.synchronize(i)
        except Exception as exc:
            failed.append(first_line(exc))

    worker = threading.Thread(target=load)
    worker.daemon = True
    worker.start()
    time.sleep(PCIE_BUSY_SECONDS)
    answer = smi_query(exe, SMI_PCIE, 15)
    stop.set()
    worker.join(30)
    if failed:
        answer["load_error"] = failed[0]
    return answer


# -- LibreYOLO ----------------------------------------------------------------------

def dist_version(name):
    try:
        import importlib.metadata as metadata  # 3.8+
    except ImportError:
        return None
    try:
        return metadata.version(name)
    except Exception:
        return None


def libreyolo_installed():
    import importlib.util
    return importlib.util.find_spec("libreyolo") is not None


def json_document(text):
    """The JSON object a CLI printed on stdout, whatever else it printed around it."""
    text = text.strip()
    try:
        found = json.loads(text)
        if isinstance(found, dict):
            return found
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    return None


def libreyolo_part(params):
    stage("libreyolo checks")
    if not libreyolo_installed():
        return {"installed": False}
    data = {"installed": True, "version": dist_version("libreyolo")}
    ran = run_tool([sys.executable, "-c", LIBREYOLO_CLI, "checks", "--json", "--quiet"],
                   float(params.get("tool_timeout") or 120))
    doc = json_document(ran.get("out") or "")
    if doc is not None:
        data["checks"] = doc
    else:
        data["checks_error"] = ran
    return data


def trim_doctor(doc):
    """LibreYOLO's doctor report, with long path lists cut (it can list thousands)."""
    findings = doc.get("findings")
    if isinstance(findings, list):
        if len(findings) > MAX_FINDINGS:
            doc["findings_dropped"] = len(findings) - MAX_FINDINGS
            findings = findings[:MAX_FINDINGS]
        for finding in findings:
            paths = finding.get("paths") if isinstance(finding, dict) else None
            if isinstance(paths, list) and len(paths) > MAX_PATHS:
                finding["paths_dropped"] = len(paths) - MAX_PATHS
                finding["paths"] = paths[:MAX_PATHS]
        doc["findings"] = findings
    return doc


def doctor_part(params):
    stage("libreyolo doctor")
    if not libreyolo_installed():
        return {"installed": False}
    argv = [sys.executable, "-c", LIBREYOLO_CLI, "doctor", str(params["data"]), "--json",
            "--quiet"]
    if params.get("fast"):
        argv.append("--fast")
    if params.get("strict"):
        argv.append("--strict")
    ran = run_tool(argv, float(params.get("tool_timeout") or 1800), DOCTOR_OUT_CAP)
    data = {"installed": True, "version": dist_version("libreyolo")}
    doc = json_document(ran.get("out") or "")
    if doc is not None:
        data["report"] = trim_doctor(doc)
        data["rc"] = ran.get("rc")
    else:
        data["failed"] = {k: v for k, v in ran.items() if k != "out"}
        data["failed"]["out"] = (ran.get("out") or "")[-4000:]
    return data


# -- entry --------------------------------------------------------------------------

def check(params):
    part("host", host_part(params))
    stage("nvidia-smi")
    part("smi", smi_part(params))
    torch_data = torch_part(params)
    part("torch", torch_data)
    busy = pcie_busy_part(torch_data)
    if busy is not None:
        part("pcie_busy", busy)
    part("libreyolo", libreyolo_part(params))


def main(params_text, nonce):
    """Entry point: the client ends this source with `sys.exit(main(sys.stdin.read(), NONCE))`
    (tui/remote/programs.py sets NONCE and stdin)."""
    params = json.loads(params_text)
    _NONCE[0] = str(nonce)
    sys.stdout = sys.stderr  # torch and friends print; only frames go to the real stdout
    deadline = int(params.get("deadline") or 0)
    if deadline > 0 and hasattr(signal, "alarm"):
        signal.alarm(deadline)
    try:
        if params.get("mode") == "check":
            check(params)
        elif params.get("mode") == "doctor":
            part("doctor", doctor_part(params))
        else:
            emit({"fatal": "unknown mode %r" % params.get("mode")})
            return 2
    except Exception as exc:
        emit({"fatal": errstr(exc)})
        return 3
    emit({"done": True})
    return 0
