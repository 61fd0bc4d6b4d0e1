"""The on-box half of a push: sent as the source of `python3 -`, answers JSON lines.

Runs on the rented box's own python3 (3.6+), so it is standard library only;
huggingface_hub is imported late, and only for a Hub push, so a box without it
can still list and hash its files and say what is missing. It never runs a
shell and never hands a run's name to another program.

The client appends `PARAMS = '<json>'` and `sys.exit(main(PARAMS))` to this
source; the parameters (a Hub token among them) therefore reach the box only
through the SSH channel's stdin. Every stdout line is one JSON object:
`{"beat": n}` every few seconds while busy (the client's idle timeout),
progress events, then exactly one `{"done": ...}` or `{"error": ..., "kind": ...}`.

Modes:
  list  {"run_path", "include_epochs"} -> done: {"files": [{name, size, mtime, sha256,
        steady}], "hub": bool}  (hub: whether huggingface_hub is importable here)
  hub   {"run_path", "files": [{name, size}], "repo", "prefix", "token", "endpoint",
        "message"} -> events {"sending"|"sent": name}, {"committed": oid};
        done: {"commit", "files": {name: {sha256, size, how} | {missing: true}},
        "changed": [names whose size or mtime moved since the listing]}
"""

import hashlib
import importlib.util
import json
import os
import re
import sys
import threading

FIXED_FILES = ("weights/best.pt", "weights/last.pt", "summary.json", "results.csv",
               "status.json")
EPOCH_FILE = re.compile(r"^weights/epoch_(\d+)\.pt$")
CHUNK = 1 << 20
BEAT_SECONDS = 2.0
HASH_TRIES = 3

_OUT = sys.stdout
_LOCK = threading.Lock()
_SECRETS = []


def scrub(text):
    """The text with every secret this program holds replaced: errors leave the box."""
    text = str(text)
    for secret in _SECRETS:
        if secret:
            text = text.replace(secret, "***")
    return text


def one_line(text, cap=400):
    """An error as one line, secrets blanked, short enough for a status line."""
    return " ".join(scrub(text).split())[:cap]


def emit(event):
    with _LOCK:
        _OUT.write(json.dumps(event) + "\n")
        _OUT.flush()


class Heartbeat(threading.Thread):
    """Says "still here" while a long hash or upload runs, so silence means trouble."""

    def __init__(self):
        threading.Thread.__init__(self, daemon=True)
        self.stopped = threading.Event()

    def run(self):
        beats = 0
        while not self.stopped.wait(BEAT_SECONDS):
            beats += 1
            emit({"beat": beats})


def select_files(names, include_epochs):
    """The run's files worth pushing, in push order, out of the relative names present.

    Shared with the panel (imported there), so both sides pick the same files.
    """
    present = set(names)
    chosen = [name for name in FIXED_FILES if name in present]
    if include_epochs:
        epochs = []
        for name in present:
            match = EPOCH_FILE.match(name)
            if match:
                epochs.append((int(match.group(1)), name))
        chosen.extend(name for _, name in sorted(epochs))
    return chosen


def candidate_names(run_path):
    """Relative names of the regular files a push could want (the fixed ones, weights/*)."""
    names = [name for name in FIXED_FILES if os.path.isfile(os.path.join(run_path, name))]
    try:
        entries = os.listdir(os.path.join(run_path, "weights"))
    except OSError:
        entries = []
    for entry in entries:
        name = "weights/" + entry
        if name not in names and os.path.isfile(os.path.join(run_path, name)):
            names.append(name)
    return names


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def describe_file(path):
    """Size, mtime and sha256 of one file, re-hashed while a writer keeps changing it."""
    before = os.stat(path)
    for _ in range(HASH_TRIES):
        digest = sha256_of(path)
        after = os.stat(path)
        same = (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        if same:
            break
        before = after
    return {"size": after.st_size, "mtime": after.st_mtime, "sha256": digest, "steady": same}


def list_files(params):
    run_path = params["run_path"]
    if not os.path.isdir(run_path):
        emit({"error": "no run directory at this path", "kind": "no_run"})
        return
    rows = []
    for name in select_files(candidate_names(run_path), params.get("include_epochs")):
        try:
            row = describe_file(os.path.join(run_path, name))
        except FileNotFoundError:
            continue  # removed while we looked: nothing to push
        row["name"] = name
        rows.append(row)
        emit({"hashed": name, "size": row["size"]})
    hub = importlib.util.find_spec("huggingface_hub") is not None
    emit({"done": {"files": rows, "hub": hub}})


def _lfs_sha256(info):
    lfs = getattr(info, "lfs", None)
    if not lfs:
        return None
    sha = getattr(lfs, "sha256", None)
    if sha is None and isinstance(lfs, dict):
        sha = lfs.get("sha256") or lfs.get("oid")
    return sha


def _hub_sha256(api, repo, path, commit, token, endpoint):
    """A file's sha256 as the Hub holds it: its LFS oid, or the hash of its bytes."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    infos = api.get_paths_info(repo, [path], revision=commit)
    if not infos:
        return None
    info = infos[0]
    sha = _lfs_sha256(info)
    if sha:
        return {"sha256": sha, "size": info.size, "how": "lfs"}
    # A regular (non-LFS) file has only a git blob id: fetch its bytes (small by
    # the Hub's own rules) and hash them.
    url = hf_hub_url(repo, path, revision=commit, endpoint=endpoint)
    response = get_session().get(url, headers=build_hf_headers(token=token))
    hf_raise_for_status(response)
    return {"sha256": hashlib.sha256(response.content).hexdigest(), "size": info.size,
            "how": "download"}


def _error_kind(exc):
    name = type(exc).__name__
    if name in ("RepositoryNotFoundError", "GatedRepoError"):
        return "not_found"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return "auth"
    return "hub"


def hub_push(params):
    token = params.get("token") or None
    _SECRETS.append(token)
    endpoint = params.get("endpoint") or None
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        from huggingface_hub import CommitOperationAdd, HfApi
    except ImportError as exc:
        emit({"error": one_line(exc), "kind": "no_hub"})
        return
    run_path, repo, prefix = params["run_path"], params["repo"], params["prefix"]
    files = params["files"]
    api = HfApi(endpoint=endpoint, token=token)
    ops = [CommitOperationAdd(path_in_repo=prefix + "/" + f["name"],
                              path_or_fileobj=os.path.join(run_path, f["name"]))
           for f in files]
    stage = "upload"
    try:
        preupload = getattr(api, "preupload_lfs_files", None)
        for f, op in zip(files, ops):
            emit({"sending": f["name"]})
            if preupload is not None:
                preupload(repo, additions=[op])  # one file at a time: progress per file
            emit({"sent": f["name"]})
        stage = "commit"
        info = api.create_commit(repo, operations=ops, commit_message=params["message"])
        commit = getattr(info, "oid", None)
        emit({"committed": commit})
        stage = "verify"
        found = {}
        for f, op in zip(files, ops):
            answer = _hub_sha256(api, repo, op.path_in_repo, commit, token, endpoint)
            found[f["name"]] = answer if answer is not None else {"missing": True}
    except Exception as exc:
        emit({"error": one_line(f"{type(exc).__name__}: {exc}"), "kind": _error_kind(exc),
              "stage": stage})
        return
    changed = []
    for f in files:
        try:
            st = os.stat(os.path.join(run_path, f["name"]))
        except OSError:
            changed.append(f["name"])
            continue
        if st.st_size != f["size"] or abs(st.st_mtime - f["mtime"]) > 1e-3:
            changed.append(f["name"])
    emit({"done": {"commit": commit, "files": found, "changed": changed}})


def main(params_text):
    """Entry point: the client appends `sys.exit(main(PARAMS))` to this source."""
    params = json.loads(params_text)
    _SECRETS.append(params.get("token"))
    # Library chatter must not break the JSON lines on stdout.
    sys.stdout = sys.stderr
    beat = Heartbeat()
    beat.start()
    try:
        if params.get("mode") == "list":
            list_files(params)
        elif params.get("mode") == "hub":
            hub_push(params)
        else:
            emit({"error": "unknown mode", "kind": "crash"})
            return 2
    except Exception as exc:
        emit({"error": one_line(f"{type(exc).__name__}: {exc}"), "kind": "crash"})
        return 3
    finally:
        beat.stopped.set()
    return 0
