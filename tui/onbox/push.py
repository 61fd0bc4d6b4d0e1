"""The on-box half of a push: sent as the source of `python3 -`, answers in frames.

Runs on the rented box's own python3 (3.6+), so it is standard library only;
huggingface_hub is imported late, and only for a Hub push, so a box without it
can still list and hash its files and say what is missing. It never runs a
shell and never hands a run's name to another program.

The client appends `PARAMS = '<json>'` and `sys.exit(main(PARAMS))` to this
source; the parameters (a Hub token among them) therefore reach the box only
through the SSH channel's stdin. Everything it says goes out in frames
(tui/remote/framing.py: a marker line with the request's nonce and the
payload's length), so a login banner or a library's chatter around them is
ignored. A frame's first byte says what it holds: `J` one JSON event, `D` a
piece of a file's bytes. Events: `{"beat": n, "moved": bytes}` every few
seconds while busy (the client's idle timeout; `moved`, the bytes this process
read and wrote, tells a slow hash or upload from a hung one where
/proc/self/io exists), progress events, then exactly one
`{"done": ...}` or `{"error": ..., "kind": ...}`.

Modes:
  list  {"run_path", "include_epochs"} -> done: {"files": [{name, size, mtime, mtime_ns,
        inode, sha256, steady}], "hub": bool}  (hub: whether huggingface_hub imports here)
  read  {"run_path", "name", "offset", "size"} -> D frames of the file's bytes from
        `offset` up to `size`, then done: {"sent": n}  (a push without SFTP)
  hub   {"run_path", "files": [{name, size, mtime, sha256}], "repo", "prefix", "token",
        "endpoint", "message"} -> events {"sending"|"sent": name}, {"committed": oid};
        done: {"commit", "changed": [names whose size or mtime moved since the listing],
        "relisted": [rows as list's, for small files rewritten since the listing: the
        bytes uploaded are a snapshot read whole, described by these rows]}
        (the panel asks the Hub itself what the commit holds; the box's word is not proof)
"""

import hashlib
import importlib.util
import json
import os
import re
import sys

from tui.onbox.prelude import _LOCK, _NONCE, _SECRETS, _WROTE, Heartbeat, scrub, send

# Everything a run is worth keeping: its weights and its whole history, so a
# push-verify-destroy loses nothing but the box.
FIXED_FILES = ("weights/best.pt", "weights/last.pt", "summary.json", "results.csv",
               "status.json", "train_config.yaml", "metrics.jsonl", "train.log")
# Appended while a run trains: a push sends (and the Hub gets) the bytes listed, no more.
GROWING = ("metrics.jsonl", "train.log")
SMALL_BYTES = 64 << 20
SNAPSHOT_BYTES = 256 << 20  # a Hub push's snapshots held in memory at most, all together
# The whole name, ASCII digits only (fullmatch: `$` would take a trailing newline, `\d`
# would take other scripts' digits): only names the push itself would pick.
# At most nine ASCII digits, as the panel reads them (tui/model/fields.py EPOCH_NAME): a
# longer number is no epoch a run reached, and int() refuses past 4300 digits.
EPOCH_FILE = re.compile(r"weights/epoch_([0-9]{1,9})\.pt")
CHUNK = 1 << 20
HASH_TRIES = 3

_PROC_READ = [0]  # bytes of /proc/self/io this program read itself


def one_line(text, cap=400):
    """An error as one line, secrets blanked, short enough for a status line."""
    return " ".join(scrub(text).split())[:cap]


def emit(event):
    """One event as a `J` frame (the prelude's `send`; `D` frames carry file bytes)."""
    send(b"J" + json.dumps(event).encode("utf-8"))


def io_moved():
    """Bytes this process read and wrote (a hash reading, an upload sending), less what
    it said on stdout (the prelude's count) and read here: what the client counts as
    progress, or None where the kernel does not say (no /proc/self/io). Called with
    _LOCK held."""
    try:
        with open("/proc/self/io", "rb") as f:
            text = f.read()
    except (OSError, IOError):
        return None
    _PROC_READ[0] += len(text)
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(b":")
        fields[key.strip()] = value.strip()
    try:
        return max(0, int(fields[b"rchar"]) + int(fields[b"wchar"]) - _WROTE[0]
                   - _PROC_READ[0])
    except (KeyError, ValueError):
        return None


def beat_event(beats):
    """A heartbeat's event: "still here" while a long hash or upload runs, and how many
    bytes moved so far, so a hung hash or upload is told from a slow one. A push cut by
    the client's going (the prelude's Heartbeat ends the program) is never committed,
    so the Hub keeps what it had."""
    with _LOCK:
        moved = io_moved()
    emit({"beat": beats} if moved is None else {"beat": beats, "moved": moved})


def select_files(names, include_epochs):
    """The run's files worth pushing, in push order, out of the relative names present.

    Shared with the panel (imported there), so both sides pick the same files.
    """
    present = set(names)
    chosen = [name for name in FIXED_FILES if name in present]
    if include_epochs:
        # True: every epoch_<N>.pt; a list of numbers: those epochs only (a milestone push)
        wanted = include_epochs if isinstance(include_epochs, list) else None
        epochs = []
        for name in present:
            match = EPOCH_FILE.fullmatch(name)
            if match and (wanted is None or int(match.group(1)) in wanted):
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


def sha256_of(path, size=None):
    """The sha256 of the file, or of its first `size` bytes."""
    digest = hashlib.sha256()
    left = size
    with open(path, "rb") as f:
        while left is None or left > 0:
            block = f.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest.hexdigest()


def describe_file(path, growing=False):
    """Size, mtime and sha256 of one file, re-hashed while a writer keeps changing it.

    A file that only grows (metrics.jsonl, train.log) is described by the bytes it
    has now: what a push sends and checks is that prefix, which no append changes.
    """
    before = os.stat(path)
    if growing:
        return {"size": before.st_size, "mtime": before.st_mtime,
                "mtime_ns": before.st_mtime_ns, "inode": before.st_ino,
                "sha256": sha256_of(path, before.st_size), "steady": True}
    for _ in range(HASH_TRIES):
        digest = sha256_of(path)
        after = os.stat(path)
        same = (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        if same:
            break
        before = after
    return {"size": after.st_size, "mtime": after.st_mtime, "mtime_ns": after.st_mtime_ns,
            "inode": after.st_ino, "sha256": digest, "steady": same}


def snapshot(path):
    """A small file's bytes read whole while it held still (size and mtime the same before
    and after), with their description; None when it kept changing. A Hub push uploads
    these very bytes, so the sha256 the panel verifies is the one of what was sent, even
    when training rewrote the file between the listing and the upload."""
    for _ in range(HASH_TRIES):
        before = os.stat(path)
        if before.st_size > SMALL_BYTES:
            return None
        with open(path, "rb") as f:
            data = f.read(SMALL_BYTES + 1)
            after = os.fstat(f.fileno())
        same = (after.st_size, after.st_mtime_ns, after.st_ino) == \
            (before.st_size, before.st_mtime_ns, before.st_ino)
        if same and len(data) == after.st_size:
            return data, {"size": after.st_size, "mtime": after.st_mtime,
                          "mtime_ns": after.st_mtime_ns, "inode": after.st_ino,
                          "sha256": hashlib.sha256(data).hexdigest(), "steady": True}
    return None


def list_files(params):
    run_path = params["run_path"]
    if not os.path.isdir(run_path):
        emit({"error": "no run directory at this path", "kind": "no_run"})
        return
    rows = []
    for name in select_files(candidate_names(run_path), params.get("include_epochs")):
        try:
            row = describe_file(os.path.join(run_path, name), name in GROWING)
        except FileNotFoundError:
            continue  # removed while we looked: nothing to push
        row["name"] = name
        rows.append(row)
        emit({"hashed": name, "size": row["size"]})
    hub = importlib.util.find_spec("huggingface_hub") is not None
    emit({"done": {"files": rows, "hub": hub}})


def read_file(params):
    """A file's bytes from `offset` up to `size`, in D frames: a push over an exec channel,
    for boxes without SFTP. Only a name a push selects is ever read."""
    name = params["name"]
    if select_files([name], True) != [name]:
        emit({"error": "not a file a push reads", "kind": "refused"})
        return
    offset, size = int(params["offset"]), int(params["size"])
    sent = 0
    with open(os.path.join(params["run_path"], name), "rb") as f:
        f.seek(offset)
        while offset + sent < size:
            block = f.read(min(CHUNK, size - offset - sent))
            if not block:
                break
            send(b"D" + block)
            sent += len(block)
    emit({"done": {"sent": sent}})


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
    relisted, fixed = [], set()
    ops = []
    budget = [SNAPSHOT_BYTES]
    for f in files:
        content = _content(run_path, f)
        if f["name"] not in GROWING and f["size"] <= budget[0]:
            try:
                taken = snapshot(os.path.join(run_path, f["name"]))
            except OSError:
                taken = None
            if taken is not None:
                content, row = taken
                budget[0] -= len(content)
                fixed.add(f["name"])
                if row["sha256"] != f.get("sha256"):  # rewritten since the listing
                    row["name"] = f["name"]
                    relisted.append(row)
        ops.append(CommitOperationAdd(path_in_repo=prefix + "/" + f["name"],
                                      path_or_fileobj=content))
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
    except Exception as exc:
        emit({"error": one_line(f"{type(exc).__name__}: {exc}"), "kind": _error_kind(exc),
              "stage": stage})
        return
    changed = []
    for f in files:
        if f["name"] in GROWING or f["name"] in fixed:
            continue  # the bytes sent are the ones listed (or relisted): not news
        try:
            st = os.stat(os.path.join(run_path, f["name"]))
        except OSError:
            changed.append(f["name"])
            continue
        if st.st_size != f["size"] or abs(st.st_mtime - f["mtime"]) > 1e-3:
            changed.append(f["name"])
    emit({"done": {"commit": commit, "changed": changed, "relisted": relisted}})


def _content(run_path, f):
    """What to upload for one listed file: a growing one as the bytes listed, no more."""
    path = os.path.join(run_path, f["name"])
    if f["name"] in GROWING and f["size"] <= SMALL_BYTES:
        with open(path, "rb") as src:
            return src.read(f["size"])
    return path


def main(params_text):
    """Entry point: the client appends `sys.exit(main(PARAMS))` to this source."""
    params = json.loads(params_text)
    _SECRETS.append(params.get("token"))
    _NONCE[0] = str(params.get("nonce") or "unset")
    # Library chatter goes to stderr (and would be skipped as noise on stdout anyway).
    sys.stdout = sys.stderr
    beat = Heartbeat(beat_event)
    beat.start()
    try:
        if params.get("mode") == "list":
            list_files(params)
        elif params.get("mode") == "read":
            read_file(params)
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
