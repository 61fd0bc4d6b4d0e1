"""The on-box launcher: start a program detached from the SSH session, and watch it start.

Run by BoxSession.run_program (stdlib only, Python 3.6+): the loader sets
the global `NONCE` and makes `sys.stdin` read the JSON parameters, so the
arguments (run names with spaces, quotes or `$()` among them) reach the box
through the channel's stdin and go to the started program as an argv list:
no shell ever reads them. Every answer is a frame (see tui/remote/framing.py):
`\\n--gpurent-<nonce> <length>\\n<json>`.

Detached means what survives the SSH connection dropping a second later: a
new session (setsid: no controlling terminal, so no hangup reaches it),
SIGHUP ignored as nohup does, stdin from /dev/null, stdout and stderr
appended to a file. `detach()` is the one place that does it; every mode
that starts something goes through it.

Modes (`PARAMS["mode"]`):
  launch   {id, python, kind: cli|script, args, project, name, resume, script?, wait}
           -> {"started": {...}}, beats, then one of {"appeared"}, {"died"}, {"waiting"};
           or {"refused": reason, "code"} when nothing was started
  wait     {id, project, name, wait} -> the same watch as launch, for a launch already
           started (the client lost its connection while waiting)
  detach   {argv, log, cwd?, env?, files?} -> {"started": {pid, ticks, log}}
  monitor_start {python, run_dir, ports, wait} -> {"starting": {pid, ticks, log}} once it
           started one, beats, then {"monitor": {port, run_id, started, ...}}; a client gone
           before the answer gets the monitor it started stopped (nobody else would)
  monitor_stop  {pid, ticks} -> {"stopped": bool, "reason"}
Anything unexpected: {"error": words}.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from tui.onbox.prelude import alive, read_json, send, start_ticks, write_json

OUTPUT = "output.log"
RECORD = "launch.json"
LAUNCH_SUFFIX = ".launch"
RUN_MARKERS = ("status.json", "metrics.jsonl", "results.csv")
TAIL_BYTES = 6000
STATUS_CAP = 1 << 16
SCRIPT_CAP = 1 << 20
BEAT_SECONDS = 2.0
POLL_SECONDS = 0.2
# Runs `libreyolo` with exactly the box's interpreter when no console script sits beside it.
CLI_SHIM = ("import sys;from libreyolo.cli import entrypoint;"
            "sys.argv[0]='libreyolo';sys.exit(entrypoint())")

# Set once the client stopped reading: the started program goes on regardless.
_GONE = []  # type: list[bool]


def emit(obj):
    """One framed answer; a client that went away is noted, never an error."""
    if _GONE:
        return False
    try:
        send(json.dumps(obj, separators=(",", ":")).encode("utf-8"))
    except (OSError, ValueError):
        _GONE.append(True)
        return False
    return True


def _errstr(exc):
    return "%s: %s" % (type(exc).__name__, exc)


# -- processes -------------------------------------------------------------------------

def _ignore_hangup():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def detach(argv, log_path, cwd=None, env=None):
    """Start `argv` so that it outlives this SSH session; return the Popen.

    New session, SIGHUP ignored, stdin /dev/null, stdout and stderr appended
    to `log_path` (created 0600). Raises OSError when the program cannot start.
    """
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with open(os.devnull, "rb") as null:
            return subprocess.Popen(argv, stdin=null, stdout=fd, stderr=subprocess.STDOUT,
                                    cwd=cwd, env=env, close_fds=True,
                                    start_new_session=True, preexec_fn=_ignore_hangup)
    finally:
        os.close(fd)


def find_python(python):
    """The interpreter's path on this box, or None."""
    python = os.path.expanduser(python)
    if os.sep in python:
        return python if os.path.isfile(python) and os.access(python, os.X_OK) else None
    return shutil.which(python)


def libreyolo_argv(python):
    """How to run `libreyolo` with this interpreter: its console script, else the shim."""
    script = os.path.join(os.path.dirname(python), "libreyolo")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [python, "-c", CLI_SHIM]


def read_tail(path, offset=0, limit=TAIL_BYTES):
    """The last `limit` bytes of a file after `offset`, as text (undecodable bytes replaced)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            end = f.tell()
            start = max(offset if offset <= end else 0, end - limit)
            f.seek(start)
            data = f.read(limit)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def status_sig(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return "%d:%d:%d" % (st.st_mtime_ns, st.st_size, st.st_ino)


# -- launch ----------------------------------------------------------------------------

def run_paths(project, name):
    project = os.path.abspath(os.path.expanduser(project))
    run_dir = os.path.join(project, name)
    return project, run_dir, run_dir + LAUNCH_SUFFIX


def name_problem(name):
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name:
        return "a run name is one non-empty path component (no '/')"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "a run name holds no control characters"
    return None


def script_name(name):
    base = os.path.basename(str(name)) or "train.py"
    if base in (OUTPUT, RECORD) or base.startswith("."):
        base = "script-" + base.lstrip(".")
    return base


def train_argv(params, python, run_dir, project, name):
    """The program to start, as an argv list."""
    args = [str(a) for a in params.get("args") or []]
    if params.get("kind") == "script":
        return None, args
    argv = libreyolo_argv(python) + ["train"] + args
    argv += ["--project", project, "--name", name, "--exist-ok"]
    if params.get("resume"):
        if not params.get("has_resume"):
            argv += ["--resume", "true"]
        if not params.get("has_model"):
            argv += ["--model", os.path.join(run_dir, "weights", "last.pt")]
    return argv, args


def launch(params):
    name = params.get("name")
    problem = name_problem(name)
    if problem:
        return emit({"refused": problem, "code": "name"})
    project, run_dir, launch_dir = run_paths(params["project"], name)
    if os.path.lexists(run_dir) and not params.get("resume"):
        return emit({"refused": "run directory %s already exists (pass --resume to continue "
                                "it, or choose another --name)" % run_dir, "code": "exists",
                     "run_dir": run_dir})
    if params.get("resume") and not os.path.isdir(run_dir):
        return emit({"refused": "--resume: there is no run directory %s to continue"
                                % run_dir, "code": "missing", "run_dir": run_dir})
    earlier = read_json(os.path.join(launch_dir, RECORD), STATUS_CAP)
    if earlier and alive(earlier.get("pid"), earlier.get("ticks")):
        return emit({"refused": "a process started for this run is still running there "
                                "(pid %s)" % earlier.get("pid"), "code": "running",
                     "run_dir": run_dir})
    python = find_python(str(params.get("python") or "python3"))
    if python is None:
        return emit({"refused": "the interpreter %s was not found on this box"
                                % params.get("python"), "code": "python"})
    try:
        os.makedirs(launch_dir, exist_ok=True)
    except OSError as exc:
        return emit({"refused": "cannot create %s: %s" % (launch_dir, _errstr(exc)),
                     "code": "io"})
    argv, args = train_argv(params, python, run_dir, project, name)
    if argv is None:
        script = params.get("script") or {}
        text = script.get("text")
        if not isinstance(text, str) or len(text) > SCRIPT_CAP:
            return emit({"refused": "no script text, or a script over 1 MB", "code": "script"})
        path = os.path.join(launch_dir, script_name(script.get("name")))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        argv = [python, path] + args
    log = os.path.join(launch_dir, OUTPUT)
    before = status_sig(os.path.join(run_dir, "status.json"))
    with open(log, "ab") as f:
        f.write(("--- gpurent-tui launch %s at %s ---\n"
                 % (params.get("id"), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
                .encode("utf-8"))
        offset = f.tell()
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", "GPURENT_RUN_DIR": run_dir,
                "GPURENT_PROJECT": project, "GPURENT_NAME": name})
    try:
        proc = detach(argv, log, cwd=os.path.expanduser("~"), env=env)
    except OSError as exc:
        return emit({"refused": "cannot start %s: %s" % (argv[0], _errstr(exc)),
                     "code": "start"})
    record = {"id": params.get("id"), "pid": proc.pid, "ticks": start_ticks(proc.pid)[1],
              "argv": argv, "run_dir": run_dir, "log": log, "offset": offset,
              "before": before, "time": time.time()}
    write_json(os.path.join(launch_dir, RECORD), record, 0o666)  # as open() makes it
    emit({"started": {"pid": proc.pid, "run_dir": run_dir, "log": log, "argv": argv}})
    return watch(record, proc, float(params.get("wait") or 600))


def wait_again(params):
    name = params.get("name")
    if name_problem(name):
        return emit({"error": name_problem(name)})
    _, run_dir, launch_dir = run_paths(params["project"], name)
    record = read_json(os.path.join(launch_dir, RECORD), STATUS_CAP)
    if not record or record.get("id") != params.get("id"):
        return emit({"not_started": "no launch %s recorded in %s"
                                    % (params.get("id"), launch_dir), "run_dir": run_dir})
    emit({"started": {"pid": record.get("pid"), "run_dir": run_dir, "log": record.get("log"),
                      "argv": record.get("argv")}})
    return watch(record, None, float(params.get("wait") or 600))


def _status_brief(path):
    status = read_json(path, STATUS_CAP) or {}
    brief = {}
    for key in ("state", "pid", "total_epochs", "current_epoch", "save_dir", "started_at"):
        if key in status:
            brief[key] = status[key]
    error = status.get("error")
    if isinstance(error, dict):
        brief["error"] = {"type": str(error.get("type"))[:200],
                          "message": str(error.get("message"))[:2000]}
    return brief


def watch(record, proc, wait):
    """Until status.json appears (new since the launch), the process dies, or `wait` passes."""
    status_path = os.path.join(record["run_dir"], "status.json")
    deadline = time.time() + wait
    beat_at = time.time() + BEAT_SECONDS
    while True:
        sig = status_sig(status_path)
        if sig is not None and sig != record.get("before"):
            brief = _status_brief(status_path)
            answer = {"status": brief, "run_dir": record["run_dir"]}
            if brief.get("state") == "failed":
                answer["tail"] = read_tail(record["log"], record.get("offset", 0))
            return emit({"appeared": answer})
        running = proc.poll() is None if proc is not None else \
            alive(record.get("pid"), record.get("ticks"))
        if not running:
            if status_sig(status_path) not in (None, record.get("before")):
                continue  # it wrote status.json just before it ended: report that
            code = proc.returncode if proc is not None else None
            return emit({"died": {"exit": code, "pid": record.get("pid"),
                                  "tail": read_tail(record["log"], record.get("offset", 0))}})
        now = time.time()
        if now >= deadline:
            return emit({"waiting": {"pid": record.get("pid"),
                                     "tail": read_tail(record["log"], record.get("offset", 0))}})
        if now >= beat_at:
            beat_at = now + BEAT_SECONDS
            if not emit({"beat": True}):
                return True  # the client is gone; the program goes on without us
        time.sleep(POLL_SECONDS)


def detach_mode(params):
    """Start any program detached (the watchdog uses this): files first, then argv."""
    for item in params.get("files") or []:
        path = os.path.expanduser(item["path"])
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(item.get("mode", 0o600)))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(item["text"])
    argv = [os.path.expanduser(str(a)) if i == 0 else str(a)
            for i, a in enumerate(params["argv"])]
    log = os.path.expanduser(params["log"])
    if os.path.dirname(log):
        os.makedirs(os.path.dirname(log), exist_ok=True)
    env = dict(os.environ)
    env.update(params.get("env") or {})
    try:
        proc = detach(argv, log, cwd=os.path.expanduser(params.get("cwd") or "~"), env=env)
    except OSError as exc:
        return emit({"error": "cannot start %s: %s" % (argv[0], _errstr(exc))})
    return emit({"started": {"pid": proc.pid, "ticks": start_ticks(proc.pid)[1], "log": log}})


# -- libreyolo monitor -----------------------------------------------------------------

def _get_json(port, path, timeout=1.0):
    try:
        from urllib.request import urlopen
        with urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as resp:
            data = resp.read(STATUS_CAP + 1)
        value = json.loads(data.decode("utf-8", "replace"))
    except Exception:  # anything else on that port is simply not a monitor
        return None
    return value if isinstance(value, dict) else None


def serving(ports, run_dir):
    """(port, run id) of a monitor already serving `run_dir` on 127.0.0.1, or None."""
    real = os.path.realpath(run_dir)
    for port in ports:
        answer = _get_json(port, "/api/runs")
        root = answer.get("root") if answer else None
        if not isinstance(root, str) or not os.path.isabs(root):
            continue
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return port, os.path.relpath(real, base).replace(os.sep, "/")
    return None


def _monitor_url_port(text):
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        url = doc.get("url") if isinstance(doc, dict) else None
        if isinstance(url, str) and url.rsplit(":", 1)[-1].isdigit():
            return int(url.rsplit(":", 1)[-1])
    return None


def monitor_start(params):
    run_dir = os.path.abspath(os.path.expanduser(params["run_dir"]))
    if not os.path.isdir(run_dir) or not any(
            os.path.exists(os.path.join(run_dir, m)) for m in RUN_MARKERS):
        return emit({"error": "no LibreYOLO run at %s (no status.json, metrics.jsonl or "
                              "results.csv there)" % run_dir})
    ports = [int(p) for p in params.get("ports") or range(8420, 8440)]
    found = serving(ports, run_dir)
    if found:
        return emit({"monitor": {"port": found[0], "run_id": found[1], "started": False}})
    python = find_python(str(params.get("python") or "python3"))
    if python is None:
        return emit({"error": "the interpreter %s was not found on this box"
                              % params.get("python")})
    import tempfile
    fd, log = tempfile.mkstemp(prefix="gpurent-monitor-", suffix=".log")
    os.close(fd)
    argv = libreyolo_argv(python) + ["monitor", run_dir, "--no-browser", "--json",
                                     "--host", "127.0.0.1", "--port", str(ports[0])]
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    try:
        proc = detach(argv, log, cwd=os.path.dirname(run_dir), env=env)
    except OSError as exc:
        return emit({"error": "cannot start %s: %s" % (argv[0], _errstr(exc))})
    ticks = start_ticks(proc.pid)[1]
    deadline = time.time() + float(params.get("wait") or 60)
    beat_at = time.time() + BEAT_SECONDS
    # The client learns what to stop before the (slow) wait for the URL; if it is gone
    # already, or goes meanwhile (Ctrl+C, a cut link), this monitor is nobody's.
    alive_client = emit({"starting": {"pid": proc.pid, "ticks": ticks, "log": log}})
    while True:
        if not alive_client:
            _stop(proc.pid, ticks)
            proc.poll()
            _remove(log)
            return False
        port = _monitor_url_port(read_tail(log, 0, 1 << 16))
        if port is not None:
            alive_client = emit({"monitor": {"port": port, "run_id": os.path.basename(run_dir),
                                             "started": True, "pid": proc.pid, "ticks": ticks,
                                             "log": log}})
            if alive_client:
                return True
            continue  # the answer found nobody: stopped above
        if proc.poll() is not None:
            tail = read_tail(log)
            _remove(log)
            return emit({"error": "libreyolo monitor exited %s: %s" % (proc.returncode, tail)})
        if time.time() >= deadline:
            _stop(proc.pid, ticks)
            _remove(log)
            return emit({"error": "libreyolo monitor did not start serving within %gs"
                                  % float(params.get("wait") or 60)})
        if time.time() >= beat_at:
            beat_at = time.time() + BEAT_SECONDS
            alive_client = emit({"beat": True})
        time.sleep(POLL_SECONDS)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _stop(pid, ticks, grace=5.0):
    if not alive(pid, ticks):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    deadline = time.time() + grace
    while time.time() < deadline:
        if not alive(pid, ticks):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    return True


def monitor_stop(params):
    pid, ticks = params.get("pid"), params.get("ticks")
    if not alive(pid, ticks):
        stopped, reason = False, "it had already ended"
    else:
        stopped, reason = _stop(pid, ticks), "stopped"
    if isinstance(params.get("log"), str) and os.path.basename(params["log"]).startswith(
            "gpurent-monitor-"):
        _remove(params["log"])
    return emit({"stopped": stopped, "reason": reason})


MODES = {"launch": launch, "wait": wait_again, "detach": detach_mode,
         "monitor_start": monitor_start, "monitor_stop": monitor_stop}


def main(params_text):
    params = json.loads(params_text)
    try:
        MODES[params.get("mode")](params)
    except Exception as exc:
        emit({"error": _errstr(exc)})
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.stdin.read()))
