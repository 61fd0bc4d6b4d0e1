"""The on-box watchdog: keeps the money and the weights safe while no panel watches.

Standard library only, Python 3.6+ (huggingface_hub is imported late, for a
Hub push). `gpurent-tui guard` writes it, with probe.py and push.py beside
it (their run discovery and push helpers are reused, never copied), into
`~/.gpurent-tui/guard/` and starts it detached like a launch (new session,
SIGHUP ignored, stdin /dev/null): it outlives the panel and the SSH
connection, and dies with the box.

It watches the box's runs through the files the probe reads (status.json's
state and epoch, metrics.jsonl's growth) and fires once, on the first of:
  timeout  the wall-clock limit (`max_hours` after it was armed)
  done     every run finished (LibreYOLO wrote completed or failed), once some run
           was seen unfinished since it was armed
  stalled  a run claims to be running and no running run progressed for M minutes
           (a hung or SIGSTOPped trainer keeps its pid: pids prove nothing)
  idle     every GPU under 5% for M minutes with no run progressing (off without
           nvidia-smi, and said so in the state)
Then it acts as told per trigger: push (to `hf_repo`, from here, counted only when
the Hub itself lists every file at the new commit with the sha256 hashed here),
then stop or destroy the box from inside: Vast with the instance's own
CONTAINER_API_KEY / CONTAINER_ID, RunPod with RUNPOD_POD_ID and the pod's own
RUNPOD_API_KEY, a manual box with its own stop_command / destroy_command. It
never destroys with weights it could not verify on the Hub, or a picture of the
runs it could not see whole: it stops instead, and says why. A push that a destroy
follows takes every epoch_<N>.pt too (as `push --epochs`), verified like the rest;
a weights/ file no push takes (best_ema.pt, model.pt) or one the Hub did not
verify means a stop, not a destroy, and the state's `kept` names each such file
and why. There is no watchdog counterpart of `destroy --without-snapshots`: giving
up snapshots is a choice made at a panel, so a destroying watchdog keeps them
(on the Hub, or on the stopped box's disk).

Once it has acted it ends: it fires once, so nothing is left to watch. It
records the outcome in its state (`ended`) and exits, whatever the outcome
(a manual box's stop_command that exits 0 but leaves the box up included: the
box going down is not watched). It stays only to try a failed stop or destroy
again: up to `power_tries` (3) attempts, `retry_seconds` (120) apart, its
state saying `staying` (which step, when, attempt 2 of 3) meanwhile; after the
last failure it records that it gave up (the box may still be billing) and
exits. Nothing is retried that no try could change (no stop_command, no key).

Files (one watchdog per box: a new install stops the old one first):
  config.json   what the panel armed (limits, actions, where to push, how to stop)
  secrets.json  0600: the Hub token (and an account key only if the user said so);
                read once at start and removed: from then on held in memory only
  state.json    what the probe reads: limits, progress seen, what it did, heartbeat
                (the file's mtime, touched every beat)
  guard.pid     {pid, ticks, id}; guard.log its output
Nothing it writes (state, log) ever holds a secret.

Two entry points: run as a file (`python3 guard.py`, cwd = its folder) it is
the watchdog; run by the panel as `python3 -` (the loader sets NONCE, stdin
carries the JSON parameters) it answers one control request in a frame:
  {"mode": "stop", "remove": bool, "drop_secrets": bool}
                                   -> {"stopped": bool, "removed": [...], "state": {...}}
  {"mode": "state"}                -> {"state": {...} or null, "pid_alive": bool}
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

from tui.onbox.prelude import alive, read_json, start_ticks, write_json

VERSION = 1
GUARD_DIR = "~/.gpurent-tui/guard"
STATE = "state.json"
CONFIG = "config.json"
SECRETS = "secrets.json"
PIDFILE = "guard.pid"
LOG = "guard.log"
SHIPPED = ("guard.py", "probe.py", "push.py")
TRIGGERS = ("timeout", "done", "stalled", "idle")
FINISHED = ("completed", "failed")
IDLE_PCT = 5.0
TEXT_CAP = 300
MAX_RUNS_SHOWN = 50
MAX_DID = 20
MAX_KEPT = 10          # runs named in the state's `kept` (the rest counted in `kept_more`)
MAX_KEPT_FILES = 10    # files named per run there (the rest counted in `more`)
KEPT_BYTES = 12 << 10  # `kept` as JSON, at most: the probe reads a state of 64 KiB at most
HTTP_TIMEOUT = 20.0
READ_BACK_SECONDS = 90.0
COMMAND_TIMEOUT = 300.0
PUSH_TIMEOUT = 3600.0
API_TRIES = 6          # a stop or destroy sent again on 429, 5xx or no answer
API_BACKOFF = 2.0      # seconds, doubling, when the provider names no Retry-After
POWER_TRIES = 3        # attempts at a failed final stop or destroy before it gives up
RETRY_SECONDS = 120.0  # between those attempts
SCOPED_ENV = {"vast": ("CONTAINER_API_KEY", "CONTAINER_ID"),
              "runpod": ("RUNPOD_API_KEY", "RUNPOD_POD_ID")}
DEFAULT_URLS = {"vast": "https://console.vast.ai", "runpod": "https://api.runpod.io",
                "lambda": "https://cloud.lambda.ai"}

_SECRETS = []  # type: list[str]  # every secret this process holds: blanked out of anything it writes


# -- small helpers ----------------------------------------------------------------------

def here():
    """The watchdog's folder: where this file lies (it is started from there)."""
    return os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() \
        else os.getcwd()


def scrub(text, cap=TEXT_CAP):
    """One line, every secret blanked, no control characters, at most `cap` characters."""
    text = str(text)
    for secret in _SECRETS:
        if secret:
            text = text.replace(secret, "***")
    text = "".join(c if c.isprintable() else " " for c in text)
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap - 1] + "~"


def sibling(name):
    """probe.py or push.py, shipped beside this file: their code, not a copy of it."""
    import importlib.util
    path = os.path.join(here(), name + ".py")
    spec = importlib.util.spec_from_file_location("gpurent_onbox_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def box_env(name):
    """A variable of this instance's environment: ours, else the container's init's
    (providers put CONTAINER_API_KEY / RUNPOD_POD_ID there; an SSH login may not have it)."""
    value = os.environ.get(name)
    if value:
        return value
    try:
        with open("/proc/1/environ", "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("utf-8", "replace") or None
    return None


def loopback(host):
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def http(method, url, key, body=None, timeout=HTTP_TIMEOUT):
    """(status, text, Retry-After seconds or None) of one request with a Bearer key;
    https only, except on loopback."""
    from urllib.error import HTTPError, URLError
    from urllib.parse import urlsplit
    from urllib.request import Request, urlopen
    parts = urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http"
                                        and loopback(parts.hostname or "")):
        return None, "refused: plain http to %s (https only, except loopback)" % \
            parts.hostname, None
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": "Bearer " + key, "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = Request(url, data=data, method=method, headers=headers)
    try:
        with urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read(1 << 16).decode("utf-8", "replace"), None
    except HTTPError as exc:
        try:
            text = exc.read(1 << 16).decode("utf-8", "replace")
        except Exception:
            text = ""
        try:
            wait = float(exc.headers.get("Retry-After") or "")
        except (TypeError, ValueError, AttributeError):
            wait = None
        return exc.code, text, wait
    except (URLError, OSError, ValueError) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc), None


# -- what the runs are doing ------------------------------------------------------------

def read_status(run_dir):
    status = read_json(os.path.join(run_dir, "status.json"))
    return status or {}


def metrics_size(run_dir):
    try:
        return os.stat(os.path.join(run_dir, "metrics.jsonl")).st_size
    except OSError:
        return -1


def gpu_utils(probe):
    """Per-GPU utilization from nvidia-smi (the probe's own reading); (None, why) when
    there is none to read."""
    rows = probe.gpu_rows(10.0)
    if rows.get("absent"):
        return None, "no nvidia-smi on this box: the idle trigger is off"
    if rows.get("error"):
        return None, "nvidia-smi failed (%s): the idle trigger waits" % scrub(rows["error"], 120)
    utils = []
    for line in rows.get("rows") or []:
        parts = [p.strip() for p in line.split(",")]
        try:
            utils.append(float(parts[-5]))
        except (IndexError, ValueError):
            continue
    if not utils:
        return None, "nvidia-smi listed no GPU: the idle trigger waits"
    return utils, None


class Watch:
    """What the watchdog has seen: runs, their progress, the GPUs, since it was armed."""

    def __init__(self, config, now):
        self.config = config
        self.armed_at = now
        self.progress = {}  # run path -> {"key", "at", "state", "epoch", "name"}
        self.idle_since = None
        self.gpu_note = None
        self.picture = []  # why the look at the runs is incomplete (no destroy then)
        # `done` waits until some run was seen unfinished since it was armed: armed on a
        # box of old finished runs while a new one starts, it must not stop the box.
        self.active_seen = False
        self.runs = []     # (path, root, name) found last time
        # The GPUs' busy integral since armed (the driver's average per look, as the panel
        # folds it: tui/model/busy.py), so a box the panel did not watch still has one.
        self.busy = {"covered_s": 0.0, "busy_s": 0.0, "at": None}

    def look(self, probe, now):
        roots = self.config.get("runs_roots") or ["~/runs"]
        found, root_rows, truncated, hidden = probe.find_runs(roots, 1000)
        self.runs = found
        picture = []
        for row in root_rows:
            if row.get("error"):
                picture.append("runs root %s: %s" % (row.get("root"), row["error"]))
        if truncated:
            picture.append("the search was cut short")
        for item in hidden:
            picture.append("%s: %s" % (item.get("path"), item.get("why")))
        self.picture = picture
        seen = set()
        for path, _root, name in found:
            seen.add(path)
            status = read_status(path)
            state = status.get("state") if isinstance(status.get("state"), str) else None
            epoch = status.get("current_epoch")
            epoch = epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
            key = [state, epoch, metrics_size(path)]
            if state not in FINISHED:
                self.active_seen = True
            old = self.progress.get(path)
            if old is None:
                self.progress[path] = {"key": key, "at": now, "state": state, "epoch": epoch,
                                       "name": name}
            else:
                if old["key"][1:] != key[1:]:
                    old["at"] = now  # a new epoch, or metrics.jsonl grew
                old.update(key=key, state=state, epoch=epoch, name=name)
        for path in list(self.progress):
            if path not in seen:
                del self.progress[path]
        self.fold_busy(probe, now)
        minutes = self.config.get("no_progress_minutes")
        utils, why = gpu_utils(probe) if minutes is not None else (None, None)
        self.gpu_note = why
        progressed = self.last_progress()
        busy = utils is None or any(u >= IDLE_PCT for u in utils)
        if busy or (progressed is not None and self.idle_since is not None
                    and progressed > self.idle_since):
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now

    def fold_busy(self, probe, now):
        """The driver's busy average at this look, over the seconds before it that no
        earlier look covered (looks sparser than its ~14 s window leave the gap out)."""
        try:
            windows = [w for w in probe.add_busy({}, 10.0).get("busy") or [] if w]
        except Exception:  # a driver that answers oddly costs the figure, never the watch
            return
        if not windows:
            return
        pct = sum(w[0] for w in windows) / len(windows)
        start, last = now - min(w[1] for w in windows), self.busy["at"]
        if last is not None:
            if now <= last:
                return
            start = max(start, last)
        self.busy["covered_s"] += now - start
        self.busy["busy_s"] += (now - start) * pct / 100.0
        self.busy["at"] = now

    def running(self):
        return [p for p in self.progress.values() if p["state"] == "running"]

    def last_progress(self):
        running = self.running()
        return max(p["at"] for p in running) if running else None

    def trigger(self, now):
        """(trigger, why) of the first condition that holds now, or None."""
        cfg = self.config
        hours = cfg.get("max_hours")
        if hours is not None and now >= self.armed_at + hours * 3600:
            return "timeout", "the wall-clock limit of %s h is reached" % _num(hours)
        if self.active_seen and self.progress and \
                all(p["state"] in FINISHED for p in self.progress.values()):
            states = sorted(set(p["state"] for p in self.progress.values()))
            return "done", "every run finished (%s)" % ", ".join(states)
        minutes = cfg.get("no_progress_minutes")
        if minutes is None:
            return None
        last = self.last_progress()
        if last is not None and now - last >= minutes * 60:
            names = ", ".join(sorted(p["name"] for p in self.running()))[:200]
            return "stalled", "no epoch progress for %s min while running: %s" % (
                _num(minutes), names)
        if self.idle_since is not None and now - self.idle_since >= minutes * 60:
            return "idle", "every GPU under %g%% for %s min with no run progressing" % (
                IDLE_PCT, _num(minutes))
        return None


def _num(value):
    return ("%.4f" % value).rstrip("0").rstrip(".")


# -- acting: push, verified on the Hub ------------------------------------------------

def hub_sha256s(api, repo, paths, commit, token, endpoint):
    """What the Hub holds at `commit` for each path: its sha256 (the LFS oid, or the hash
    of a small file's bytes, downloaded), or None. Asked of the Hub, never assumed."""
    infos = {}
    for info in api.get_paths_info(repo, list(paths), revision=commit):
        infos[info.path] = info
    found = {}
    for path in paths:
        info = infos.get(path)
        if info is None:
            found[path] = None
            continue
        lfs = getattr(info, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs else None
        if sha is None and isinstance(lfs, dict):
            sha = lfs.get("sha256") or lfs.get("oid")
        if sha is None:
            from huggingface_hub import hf_hub_url
            from huggingface_hub.utils import build_hf_headers, get_session
            url = hf_hub_url(repo, path, revision=commit, endpoint=endpoint)
            response = get_session().get(url, headers=build_hf_headers(token=token))
            response.raise_for_status()
            sha = hashlib.sha256(response.content).hexdigest()
        found[path] = str(sha).lower()
    return found


def run_files(push, run_path, epochs):
    """(the run's files a push takes, what in its weights/ none takes). `epochs`: the push
    takes every epoch_<N>.pt too (as `push --epochs`), so only others are left out."""
    chosen = push.select_files(push.candidate_names(run_path), epochs)
    return chosen, weights_left(run_path, chosen)


def weights_left(run_path, taken):
    """What in weights/ no push takes: files not in `taken`, and folders (`weights/old/`:
    a push takes none of what is below). Raises OSError when weights/ cannot be listed:
    what cannot be seen is not safe to destroy."""
    wdir = os.path.join(run_path, "weights")
    try:
        entries = sorted(os.listdir(wdir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    left = []
    for entry in entries:
        name = "weights/" + entry
        full = os.path.join(wdir, entry)
        if os.path.isdir(full):
            left.append(name + "/")
        elif os.path.isfile(full) and name not in taken:
            left.append(name)
    return left


def push_run(push, run_path, name, config, token, epochs=False):
    """Upload one run's files to the Hub in one commit, then ask the Hub what the commit
    holds. Returns (verified, words, the files it meant to push and could not verify)."""
    repo = config["hf_repo"]
    endpoint = config.get("hf_endpoint") or None
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    rows = []
    for rel in run_files(push, run_path, epochs)[0]:
        try:
            row = push.describe_file(os.path.join(run_path, rel), rel in push.GROWING)
        except OSError:
            continue
        row["name"] = rel
        rows.append(row)
    names = [r["name"] for r in rows]
    if not rows:
        return True, "nothing to push", []
    try:
        from huggingface_hub import CommitOperationAdd, HfApi
    except ImportError:
        return False, "huggingface_hub is not installed for python3 on this box", names
    prefix = name.strip("/")
    api = HfApi(endpoint=endpoint, token=token)
    ops = [CommitOperationAdd(path_in_repo=prefix + "/" + r["name"],
                              path_or_fileobj=push._content(run_path, r)) for r in rows]
    try:
        api.preupload_lfs_files(repo, additions=ops)
        info = api.create_commit(repo, operations=ops, commit_message=(
            "gpurent-tui watchdog: %s" % prefix)[:200])
        commit = str(getattr(info, "oid", "") or "")
        if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
            return False, "the Hub gave no commit id; not verified"
        paths = [prefix + "/" + r["name"] for r in rows]
        held = hub_sha256s(api, repo, paths, commit, token, endpoint)
    except Exception as exc:  # huggingface_hub raises many kinds: all mean "not verified"
        return False, scrub("%s: %s" % (type(exc).__name__, exc)), names
    wrong = [r["name"] for r, p in zip(rows, paths) if held.get(p) != r["sha256"]]
    if wrong:
        return False, "the Hub does not hold %s as hashed here (commit %s): not verified" % (
            ", ".join(wrong)[:150], commit[:12]), wrong
    changed = [r["name"] for r in rows if r["name"] not in push.GROWING
               and _changed(os.path.join(run_path, r["name"]), r)]
    if changed:
        return False, "%s changed during the push: not verified" % ", ".join(changed)[:150], \
            changed
    snapshots = sum(1 for n in names if push.EPOCH_FILE.fullmatch(n))
    return True, "%d file(s) verified on the Hub at %s%s" % (
        len(rows), commit[:12],
        " (%d epoch snapshot(s) among them)" % snapshots if snapshots else ""), []


def _changed(path, row):
    try:
        st = os.stat(path)
    except OSError:
        return True
    return (st.st_size, st.st_mtime_ns, st.st_ino) != (row["size"], row["mtime_ns"], row["inode"])


# -- acting: stop or destroy from inside -----------------------------------------------

def provider_credentials(config, secrets):
    """(key, instance id, words) for the provider API: the instance's own scoped key,
    else the account key the user explicitly sent, else (None, id, why not)."""
    provider = config.get("provider")
    key_var, id_var = SCOPED_ENV.get(provider, (None, None))
    instance = (box_env(id_var) if id_var else None) or config.get("instance_id")
    key = box_env(key_var) if key_var else None
    if key:
        _SECRETS.append(key)
        return key, instance, "%s (this instance's own key)" % key_var
    account = secrets.get("account_key")
    if account:
        return account, instance, "the account-wide key sent with --use-account-key"
    if key_var:
        return None, instance, "no %s in this box's environment (and no account key " \
                               "sent): cannot call the %s API" % (key_var, provider)
    return None, instance, "no key for provider %s (only --use-account-key)" % provider


def credentials_words(config, secrets):
    """What the watchdog would stop the box with, for the state (no secret in it)."""
    provider = config.get("provider") or "manual"
    if provider == "manual":
        have = [c for c in ("stop_command", "destroy_command") if config.get(c)]
        return "its own " + " and ".join(have) if have else \
            "no stop_command or destroy_command: it cannot stop this box"
    key, instance, words = provider_credentials(config, secrets)
    if key is None:
        return words
    return "%s for instance %s" % (words, instance)


def power_missing(config, secrets, action):
    """Why `action` cannot be tried on this box at all (no later try could change it), or
    None when a try could work."""
    provider = config.get("provider") or "manual"
    if provider == "manual":
        return None if config.get(action + "_command") else \
            "no %s_command for this box" % action
    if provider == "lambda" and action == "stop":
        return "a Lambda instance cannot be stopped (only destroyed)"
    key, instance, words = provider_credentials(config, secrets)
    if key is None:
        return words
    return None if instance else "no instance id known"


def api_call(config, key, instance, action):
    """The provider's request for `action` on `instance`: (method, url, body)."""
    provider = config["provider"]
    base = (config.get("base_url") or DEFAULT_URLS.get(provider, "")).rstrip("/")
    if provider == "vast":
        url = "%s/api/v0/instances/%s/" % (base, instance)
        if action == "stop":
            return "PUT", url, {"state": "stopped"}
        if action == "destroy":
            return "DELETE", url, None
        return "GET", url, None
    if provider == "runpod":
        url = "%s/v2/pods/%s" % (base, instance)
        if action == "stop":
            return "POST", url + "/action", {"action": "stop"}
        if action == "destroy":
            return "DELETE", url, None
        return "GET", url, None
    if provider == "lambda":
        if action == "destroy":
            return "POST", base + "/api/v1/instance-operations/terminate", \
                {"instance_ids": [instance]}
        return "GET", "%s/api/v1/instances/%s" % (base, instance), None
    raise ValueError("no API for provider %r" % provider)


def read_back(config, key, instance, action, deadline):
    """Ask the provider until it reads the effect (stopped; destroyed or 404); words."""
    provider = config["provider"]
    last = "no answer"
    while True:
        method, url, _ = api_call(config, key, instance, "get")
        status, text, _ = http(method, url, key)
        if status == 404 and action == "destroy":
            return True, "the provider no longer has the instance (HTTP 404)"
        state = None
        try:
            doc = json.loads(text) if status == 200 else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            if provider == "vast":
                obj = doc.get("instances") if isinstance(doc.get("instances"), dict) else doc
                state = obj.get("actual_status")
            elif provider == "runpod":
                state = doc.get("status")
            elif provider == "lambda":
                data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
                state = data.get("status")
        state = str(state).lower() if state is not None else None
        want = {"stop": ("stopped", "exited"), "destroy": ("terminated", "destroyed")}
        if state in want[action]:
            return True, "the provider reads %s" % state
        last = "reads %s" % state if state else "HTTP %s %s" % (status, scrub(text, 120))
        if time.time() >= deadline:
            return False, "not read back (%s): it may still be billing" % last
        time.sleep(2.0)


def provider_act(config, secrets, action, dry_run):
    """Stop or destroy through the provider's API; (done, words, provider's answer)."""
    if config.get("provider") == "lambda" and action == "stop":
        return False, "a Lambda instance cannot be stopped (only destroyed)", None
    key, instance, words = provider_credentials(config, secrets)
    if key is None or not instance:
        return False, words if key is None else "no instance id known", None
    method, url, body = api_call(config, key, instance, action)
    if dry_run:
        return False, "dry run: would send %s %s with %s" % (method, url, words), None
    # A rate limit (Vast's 429 "API requests too frequent" is common), a 5xx or a lost
    # connection must not leave the box billing: sent again, with a pause. Sending a stop
    # or a destroy twice is harmless; the read-back below decides what happened.
    tries = int(config.get("api_tries") or API_TRIES)
    for attempt in range(1, tries + 1):
        status, text, retry_after = http(method, url, key, body)
        answer = scrub("HTTP %s %s" % (status, text), TEXT_CAP)
        try:
            doc = json.loads(text) if status is not None and text.strip() else {}
        except ValueError:
            doc = {}
        refused = isinstance(doc, dict) and doc.get("success") is False
        if status is not None and status < 400 and not refused:
            break
        again = status is None or status == 429 or status >= 500 or \
            (refused and "frequent" in text.lower())
        if not again or attempt == tries:
            why = "the provider said it failed" if refused else \
                "the provider refused or did not answer"
            if attempt > 1:
                why += " (%d tries)" % attempt
            return False, why, answer
        pause = retry_after if retry_after is not None else API_BACKOFF * 2 ** (attempt - 1)
        time.sleep(min(max(pause, 0.0), 60.0))
    ok, seen = read_back(config, key, instance, action, time.time() + READ_BACK_SECONDS)
    tried = " after %d tries" % attempt if attempt > 1 else ""
    return ok, "%s sent with %s%s; %s" % (action, words, tried, seen), answer


def command_act(config, action, dry_run):
    """A manual box's own stop_command / destroy_command, run here."""
    command = config.get(action + "_command")
    if not command:
        return False, "no %s_command for this box" % action, None
    if dry_run:
        return False, "dry run: would run its %s_command" % action, None
    try:
        proc = subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        return False, "its %s_command did not end within %g s" % (action, COMMAND_TIMEOUT), None
    except OSError as exc:
        return False, "its %s_command could not start: %s" % (action, exc), None
    output = scrub(proc.stdout.decode("utf-8", "replace")[-2000:], 200)
    answer = "exit %d%s" % (proc.returncode, ": " + output if output else "")
    if proc.returncode != 0:
        return False, "its %s_command failed" % action, answer
    return True, "its %s_command ran (exit 0); its effect is the box going down" % action, \
        answer


# -- the watchdog ---------------------------------------------------------------------

class Guard:
    def __init__(self, folder):
        self.folder = folder
        self.config = read_json(os.path.join(folder, CONFIG)) or {}
        self.secrets = read_json(os.path.join(folder, SECRETS)) or {}
        for value in self.secrets.values():
            if isinstance(value, str):
                _SECRETS.append(value)
        try:
            os.unlink(os.path.join(folder, SECRETS))  # held in memory only from now on
        except OSError:
            pass
        self.id = str(self.config.get("id") or "")
        self.poll = max(0.05, float(self.config.get("poll_seconds") or 30.0))
        self.beat = max(0.05, float(self.config.get("beat_seconds") or self.poll))
        self.dry_run = bool(self.config.get("dry_run"))
        self.can_stop = credentials_words(self.config, self.secrets)
        self.watch = Watch(self.config, time.time())
        self.tries = max(1, int(self.config.get("power_tries") or POWER_TRIES))
        self.retry_seconds = max(0.05, float(self.config.get("retry_seconds")
                                             or RETRY_SECONDS))
        self.fired = None
        self.did = []
        self.staying = None  # {action, retry_at, attempt, attempts} while a retry waits
        self.kept = []  # {run, files, more, why}: what a destroy would have lost, so it stopped
        self.kept_more = 0  # runs with such files beyond those `kept` names
        self.ended = None
        self.doc = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def path(self, name):
        return os.path.join(self.folder, name)

    # the state the probe reads
    def state(self, now):
        watch = self.watch
        runs = []
        for path in sorted(watch.progress)[:MAX_RUNS_SHOWN]:
            p = watch.progress[path]
            runs.append({"name": scrub(p["name"], 120), "state": p["state"],
                         "epoch": p["epoch"], "progress_at": round(p["at"], 3)})
        cfg = self.config
        return {
            "v": VERSION, "id": self.id, "pid": os.getpid(),
            "armed": self.fired is None and self.ended is None,
            "dry_run": self.dry_run, "armed_at": round(watch.armed_at, 3),
            "max_hours": cfg.get("max_hours"),
            "no_progress_minutes": cfg.get("no_progress_minutes"),
            "actions": cfg.get("actions") or {},
            "beat_seconds": self.beat,
            "hf_repo": cfg.get("hf_repo"),
            "gpu_note": watch.gpu_note,
            "gpu_busy": {"covered_s": round(watch.busy["covered_s"], 1),
                         "busy_s": round(watch.busy["busy_s"], 1)},
            "idle_since": watch.idle_since,
            "last_progress_at": watch.last_progress(),
            "runs": runs,
            "can_stop": self.can_stop,
            "fired": self.fired,
            "did": self.did[-MAX_DID:],
            "staying": self.staying,
            "kept": self.kept, "kept_more": self.kept_more,
            "ended": self.ended,
        }

    def save(self, now):
        doc = self.state(now)
        with self.lock:
            if doc != self.doc:
                write_json(self.path(STATE), doc, 0o644)
                self.doc = doc
            else:
                self.touch()

    def touch(self):
        try:
            os.utime(self.path(STATE), None)
        except OSError:
            pass

    def heartbeat(self):
        """The state file's mtime is the heartbeat, also while a long push runs."""
        while not self.stopping.wait(self.beat):
            with self.lock:
                self.touch()

    def sleep(self, seconds):
        """Short naps, so SIGTERM (remove, a new install) ends it at once."""
        until = time.time() + seconds
        while not self.stopping.is_set() and time.time() < until:
            time.sleep(min(0.2, max(0.0, until - time.time())))

    def replaced(self):
        record = read_json(self.path(PIDFILE)) or {}
        return record.get("id") != self.id or record.get("pid") != os.getpid()

    def record(self, action, outcome, detail, answer=None):
        entry = {"action": action, "outcome": outcome, "at": round(time.time(), 3),
                 "detail": scrub(detail)}
        if answer is not None:
            entry["answer"] = scrub(answer)
        self.did.append(entry)
        print("%s %s: %s: %s%s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   action, outcome, entry["detail"],
                                   " (" + entry["answer"] + ")" if answer else ""), flush=True)

    def act(self, trigger, why, probe):
        now = time.time()
        self.fired = {"trigger": trigger, "at": round(now, 3), "why": scrub(why)}
        steps = list((self.config.get("actions") or {}).get(trigger) or ["push", "stop"])
        self.record("fired", "dry_run" if self.dry_run else "acting",
                    "%s: %s; then %s" % (trigger, why, ", ".join(steps)))
        self.save(now)
        final = "destroy" if "destroy" in steps else "stop" if "stop" in steps else None
        verified = False  # a destroy needs this run's own verified push, nothing less
        if "push" in steps:  # a destroy loses the epoch snapshots too: they go along
            verified = self.push_all(probe, epochs=final == "destroy")
            self.save(time.time())
        if final == "destroy" and not verified and not self.dry_run:
            self.record("destroy", "refused", "weights not verified on the Hub (see the push): "
                                              "stopping instead, the disk is kept%s"
                        % self.kept_words())
            final = "stop"
        if final == "destroy" and self.left_out():
            self.record("destroy", "refused", "weights no push takes would be lost with the "
                                              "box: stopping instead, the disk is kept%s"
                        % self.kept_words())
            final = "stop"
        if final == "destroy" and self.watch.picture:
            self.record("destroy", "refused", "the look at the runs is incomplete (%s): "
                                              "stopping instead" % "; ".join(self.watch.picture))
            final = "stop"
        ended = self.finish(final) if final is not None else "exited after acting"
        if self.ended is None:  # a signal's own words (remove, a new install) stand
            self.ended = ended
        self.save(time.time())

    def finish(self, action):
        """The final stop or destroy, tried again while it fails and a try could change
        that; the words the watchdog ends with."""
        hopeless = power_missing(self.config, self.secrets, action)
        for attempt in range(1, self.tries + 1):
            outcome = self.power(action)
            if outcome == "dry_run":
                return "exited after its dry run"
            if outcome != "failed":
                return "exited after acting"
            if hopeless is not None:
                return "exited: it cannot %s this box (%s)" % (action, hopeless)
            if attempt == self.tries:
                break
            retry_at = time.time() + self.retry_seconds
            self.staying = {"action": action, "retry_at": round(retry_at, 3),
                            "attempt": attempt + 1, "attempts": self.tries}
            print("staying: retrying the %s in %s s (attempt %d of %d)" % (
                action, _num(self.retry_seconds), attempt + 1, self.tries), flush=True)
            self.save(time.time())
            self.sleep(self.retry_seconds)
            self.staying = None
            if self.stopping.is_set():
                return "stopped before its %s was tried again" % action
        return "exited: the %s failed %d times; the box may still be billing" % (
            action, self.tries)

    def keep(self, name, files, why):
        """Name, in the state, files a destroy would lose and why the box was not destroyed."""
        files = [scrub(f, 120) for f in files]
        entry = {"run": scrub(name, 120), "files": files[:MAX_KEPT_FILES],
                 "more": max(0, len(files) - MAX_KEPT_FILES), "why": scrub(why, 200)}
        while entry["files"] and len(json.dumps(self.kept + [entry])) > KEPT_BYTES:
            entry["files"].pop()
            entry["more"] += 1
        if len(self.kept) >= MAX_KEPT or len(json.dumps(self.kept + [entry])) > KEPT_BYTES:
            self.kept_more += 1  # counted, so the state never reads as "nothing else kept"
            return
        self.kept.append(entry)

    def kept_words(self):
        """`; kept: r1: weights/best_ema.pt; r2: ...` for a refusal's record."""
        if not self.kept:
            return ""
        return "; kept: " + "; ".join("%s: %s" % (k["run"], ", ".join(k["files"]) or "?")
                                      for k in self.kept)

    def left_out(self):
        """Whether a run holds weights/ files no push takes (best_ema.pt, model.pt): a destroy
        would lose them. Each run's are named in `kept`; a run whose weights cannot be
        listed counts too (what cannot be seen is not safe)."""
        push = sibling("push")
        found = False
        for path, _root, name in list(self.watch.runs):
            try:
                left = run_files(push, path, True)[1]
            except Exception as exc:
                self.keep(name, [], "its weights/ could not be listed (%s: %s)" % (
                    type(exc).__name__, exc))
                found = True
                continue
            if left:
                self.keep(name, left, "no push takes it (only best.pt, last.pt, epoch_<N>.pt "
                                      "and the history): a destroy would lose it")
                found = True
        return found

    def push_all(self, probe, epochs=False):
        """Every run, pushed and verified; True only if every one is. `epochs`: the epoch
        snapshots go too (a destroy follows). What it could not verify is named in `kept`."""
        if not self.config.get("hf_repo"):
            self.record("push", "skipped", "no hf_repo in the box's [box.push]: nothing pushed")
            return False
        if self.dry_run:  # a dry run is sent no token: it says what it would push
            self.record("push", "dry_run", "would push %d run(s) to %s and verify them "
                        "on the Hub" % (len(self.watch.runs), self.config["hf_repo"]))
            return False
        token = self.secrets.get("hf_token")
        if not token:
            self.record("push", "skipped", self.config.get("no_token_reason")
                        or "no Hub token was sent to this box: nothing pushed")
            return False
        if not self.watch.runs:  # a wrong or empty runs root: nothing found is not verified
            self.record("push", "skipped", "no run found under the runs roots: nothing "
                                           "pushed, nothing verified")
            return False
        push = sibling("push")
        push._SECRETS.append(token)
        results = []
        runs = list(self.watch.runs)

        def every_run():
            for path, _root, name in runs:
                try:
                    ok, words, unverified = push_run(push, path, name, self.config, token,
                                                     epochs)
                except Exception as exc:  # one run's trouble is recorded, the others go on
                    ok, words, unverified = False, "%s: %s" % (type(exc).__name__, exc), []
                self.record("push", "verified" if ok else "failed", "%s: %s" % (name, words))
                if not ok:
                    self.keep(name, unverified, "not verified on the Hub: " + words)
                results.append(ok)

        # A Hub that never answers must not keep the box billing: past the limit the
        # box is stopped without the push (never destroyed: nothing was verified).
        worker = threading.Thread(target=every_run, daemon=True)
        worker.start()
        limit = float(self.config.get("push_timeout_seconds") or PUSH_TIMEOUT)
        worker.join(limit)
        if worker.is_alive():
            self.record("push", "failed", "the push did not finish within %s s; going on "
                                          "without it" % _num(limit))
            for _path, _root, name in runs[len(results):]:
                self.keep(name, [], "its push did not finish within %s s" % _num(limit))
            return False
        return bool(results) and len(results) == len(runs) and all(results)

    def power(self, action):
        """One attempt at stopping or destroying the box; its outcome, recorded."""
        provider = self.config.get("provider") or "manual"
        sending = None
        if not self.dry_run:
            # Said and saved before the provider is asked: its answer (and the read-back)
            # comes when the box is going down, SSH with it; a panel that looks now must
            # know the stop is ours, not the provider's. The final outcome replaces it.
            self.record(action, "sending", "asking %s to %s the box" % (
                "its own %s_command" % action if provider == "manual" else provider, action))
            sending = self.did[-1]
            self.save(time.time())
        try:
            if provider == "manual":
                ok, words, answer = command_act(self.config, action, self.dry_run)
            else:
                ok, words, answer = provider_act(self.config, self.secrets, action,
                                                 self.dry_run)
        except Exception as exc:
            ok, words, answer = False, "%s: %s" % (type(exc).__name__, exc), None
        # A manual box's command exiting 0 is not the effect (the box going down is):
        # "ran", as the panel says "command ran; effect not observed".
        outcome = "dry_run" if self.dry_run else "failed" if not ok else \
            "ran" if provider == "manual" else "done"
        if self.dry_run and action == "destroy":
            words += (" (only once every run's push, epoch snapshots included, verified and "
                      "no weights/ file is one no push takes; else it would stop)")
        if sending is not None and sending in self.did:
            self.did.remove(sending)
        self.record(action, outcome, words, answer)
        return outcome

    def run(self):
        probe = sibling("probe")
        beat = threading.Thread(target=self.heartbeat, daemon=True)
        beat.start()
        print("%s watchdog %s armed (pid %d)" % (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), self.id, os.getpid()),
            flush=True)
        while not self.stopping.is_set():
            now = time.time()
            if self.replaced():
                self.ended = "replaced by another watchdog"
                break
            try:
                self.watch.look(probe, now)
                found = self.watch.trigger(now) if self.fired is None else None
                if found is not None:
                    self.act(found[0], found[1], probe)  # then it ends: it fires once
                self.save(now)
            except Exception as exc:  # a bad run or a full disk: said, and watched again
                words = scrub("%s: %s" % (type(exc).__name__, exc), 120)
                print("look failed: %s" % words, flush=True)
                if self.fired is not None and self.ended is None:  # it fires only once
                    self.ended = "exited: acting failed (%s)" % words
            if self.ended:
                break
            self.sleep(self.poll)
        self.stopping.set()
        if self.ended and not self.replaced():
            self.save(time.time())
        print("%s watchdog %s ended: %s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                            self.id, self.ended), flush=True)
        return 0


def daemon():
    sys.dont_write_bytecode = True  # no __pycache__ beside it: --remove leaves nothing
    folder = here()
    record = read_json(os.path.join(folder, PIDFILE))
    config = read_json(os.path.join(folder, CONFIG)) or {}
    if record and record.get("id") != config.get("id") and alive(record.get("pid"),
                                                                 record.get("ticks")):
        print("another watchdog runs here (pid %s): not starting" % record.get("pid"),
              flush=True)
        return 1
    guard = Guard(folder)
    write_json(os.path.join(folder, PIDFILE), {"pid": os.getpid(), "id": guard.id,
                                               "ticks": start_ticks(os.getpid())[1]})

    def on_term(signum, frame):
        guard.ended = "stopped by signal %d" % signum
        guard.stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return guard.run()


# -- control requests from the panel --------------------------------------------------

def emit(obj):
    payload = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    head = ("\n--gpurent-%s %d\n" % (globals().get("NONCE", ""), len(payload))).encode()
    out = getattr(sys.stdout, "buffer", sys.stdout)
    out.write(head + payload)
    out.flush()


def stop_running(folder, grace=5.0):
    """Stop the watchdog the pidfile names, if it is still that process."""
    record = read_json(os.path.join(folder, PIDFILE)) or {}
    pid, ticks = record.get("pid"), record.get("ticks")
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


def control(params_text):
    params = json.loads(params_text)
    folder = os.path.expanduser(params.get("dir") or GUARD_DIR)
    mode = params.get("mode")
    if mode == "stop":
        stopped = stop_running(folder)
        state = read_json(os.path.join(folder, STATE), 1 << 16)
        removed = []
        if params.get("drop_secrets"):
            try:
                os.unlink(os.path.join(folder, SECRETS))
                removed.append(SECRETS)
            except OSError:
                pass
        if params.get("remove"):
            names = list(SHIPPED) + [CONFIG, SECRETS, STATE, PIDFILE, LOG, STATE + ".tmp",
                                     PIDFILE + ".tmp", CONFIG + ".tmp"]
            for name in names:
                try:
                    os.unlink(os.path.join(folder, name))
                    removed.append(name)
                except OSError:
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass
        emit({"stopped": stopped, "removed": removed, "state": state})
    elif mode == "state":
        record = read_json(os.path.join(folder, PIDFILE)) or {}
        emit({"state": read_json(os.path.join(folder, STATE), 1 << 16),
              "pid_alive": alive(record.get("pid"), record.get("ticks")),
              "pid_id": record.get("id")})
    else:
        emit({"error": "unknown mode %r" % mode})
        return 2
    return 0


if __name__ == "__main__":
    if "NONCE" in globals():
        try:
            sys.exit(control(sys.stdin.read()))
        except Exception as exc:
            emit({"error": "%s: %s" % (type(exc).__name__, exc)})
            sys.exit(3)
    sys.exit(daemon())
