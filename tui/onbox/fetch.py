"""The on-box half of `fetch`: download a staged data set tar from the Hub and unpack it safely.

Sent as the source of `<python> -` (the box's `python` key); standard library
only and Python 3.6 syntax, huggingface_hub imported late (the box's own, so
the bytes go Hub to box, never through the jump host). Started by
BoxSession.run_program, which ends it with `sys.exit(main(sys.stdin.read(), NONCE))`:
its parameters, the Hub token among them, arrive on the SSH channel's stdin,
never in argv or the environment of a child.

Answers are frames (tui/remote/framing.py): `{"stage": ...}` before each step,
`{"progress": {"step", "done", "total"}}` every few seconds while downloading
or extracting, then `{"part": "fetch", "data": {...}}` and `{"done": true}`.

The archive is checked before anything is written: no absolute names, no `..`,
no control characters in names, no devices or fifos, no symlink or hard link
whose target leaves the destination. While extracting, every path is resolved
again against what is already on disk (a symlink made by an earlier member
cannot carry a later one outside), files are created fresh (an existing
symlink at a file's name is replaced, never followed), modes lose setuid bits
and nothing is chowned.
"""

import hashlib
import json
import os
import signal
import sys
import tarfile
import threading
import time

from tui.onbox.prelude import _NONCE, _SECRETS, CLIENT_GONE, emit, scrub, stage

CHUNK = 1 << 20
PROGRESS_SECONDS = 2.0
MAX_MEMBERS = 10000000
MAX_REPORTED = 20

def errstr(exc):
    return scrub("%s: %s" % (type(exc).__name__, exc))[:1000]


class Failed(Exception):
    """A step that failed for a reason the client turns into words: (kind, message)."""

    def __init__(self, kind, message, **extra):
        Exception.__init__(self, message)
        self.kind, self.message, self.extra = kind, message, extra


# -- safety of an archive ------------------------------------------------------------

def _inside(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def member_problem(member, dest):
    """Why a member may not be extracted into `dest` (a real, absolute path), or None.

    Lexical: the name and the link target alone. `extract` checks again against
    the disk as it goes.
    """
    name = member.name
    if any(ord(c) < 32 or ord(c) == 127 for c in name + (member.linkname or "")):
        return "a control character in its name"
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        return "an absolute name"
    if ".." in name.replace("\\", "/").split("/"):
        return "'..' in its name"
    target = os.path.normpath(os.path.join(dest, name))
    if not _inside(target, dest) or target == dest and not member.isdir():
        return "a name outside the destination"
    if member.issym():
        link = member.linkname
        if os.path.isabs(link):
            return "a symlink to an absolute path (%s)" % link[:200]
        if not _inside(os.path.normpath(os.path.join(os.path.dirname(target), link)), dest):
            return "a symlink out of the destination (%s)" % link[:200]
    elif member.islnk():
        link = member.linkname
        if os.path.isabs(link) or ".." in link.replace("\\", "/").split("/"):
            return "a hard link out of the destination (%s)" % link[:200]
        if not _inside(os.path.normpath(os.path.join(dest, link)), dest):
            return "a hard link out of the destination (%s)" % link[:200]
    elif member.isdev() or member.isfifo():
        return "a device or fifo"
    elif not (member.isreg() or member.isdir()):
        return "an unknown member type"
    return None


def check_members(tar, dest):
    """Every member, or Failed("unsafe") listing the refused ones; nothing is written."""
    members = []
    refused = []
    total = 0
    for member in tar:
        members.append(member)
        if len(members) > MAX_MEMBERS:
            raise Failed("unsafe", "more than %d members" % MAX_MEMBERS)
        problem = member_problem(member, dest)
        if problem:
            refused.append({"name": member.name[:300], "why": problem})
        elif member.isreg():
            total += member.size
    if refused:
        raise Failed("unsafe", "%d member(s) refused; nothing was extracted" % len(refused),
                     refused=refused[:MAX_REPORTED], refused_count=len(refused))
    return members, total


def _checked(path, dest, what):
    """`path` with its directory resolved on disk; Failed if that leaves `dest`."""
    parent = os.path.realpath(os.path.dirname(path))
    if not _inside(parent, dest):
        raise Failed("unsafe", "%s would be written outside the destination through a "
                     "symlink; extraction stopped there" % what[:300])
    return os.path.join(parent, os.path.basename(path))


def _replace_link(path):
    if os.path.islink(path):
        os.unlink(path)


def extract(tar, members, dest, total, progress):
    """Write the checked members under `dest`; returns (files, bytes)."""
    written = 0
    files = 0
    for member in members:
        target = _checked(os.path.join(dest, member.name), dest, member.name)
        if member.isdir():
            if os.path.islink(target):
                raise Failed("unsafe", "%s is a symlink where a directory belongs"
                             % member.name[:300])
            if not os.path.isdir(target):
                os.makedirs(target, 0o755)
            continue
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target), 0o755)
            target = _checked(target, dest, member.name)
        if member.issym():
            resolved = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
            if not _inside(resolved, dest):
                raise Failed("unsafe", "symlink %s would point outside the destination; "
                             "extraction stopped there" % member.name[:300])
            _replace_link(target)
            if os.path.lexists(target):
                os.unlink(target)
            os.symlink(member.linkname, target)
            continue
        if member.islnk():
            source = os.path.realpath(os.path.join(dest, member.linkname))
            if not _inside(source, dest) or not os.path.isfile(source):
                raise Failed("unsafe", "hard link %s has no file inside the destination to "
                             "link to" % member.name[:300])
            _replace_link(target)
            if os.path.lexists(target):
                os.unlink(target)
            os.link(source, target)
            files += 1
            continue
        _replace_link(target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        mode = 0o755 if member.mode & 0o100 else 0o644
        fd = os.open(target, flags, mode)
        with os.fdopen(fd, "wb") as out:
            source = tar.extractfile(member)
            while True:
                block = source.read(CHUNK)
                if not block:
                    break
                out.write(block)
                written += len(block)
                progress(written, total)
        os.chmod(target, mode)
        try:
            os.utime(target, (member.mtime, member.mtime))
        except (OSError, OverflowError):
            pass
        files += 1
    return files, written


# -- the steps -----------------------------------------------------------------------

class Ticker(object):
    """Progress events at most every PROGRESS_SECONDS."""

    def __init__(self, step):
        self.step = step
        self.last = 0.0

    def __call__(self, done, total, force=False):
        now = time.time()
        if force or now - self.last >= PROGRESS_SECONDS:
            self.last = now
            emit({"progress": {"step": self.step, "done": done, "total": total}})


def watch_download(folder, total, stop):
    """Report the size of the download in progress (huggingface_hub's `.incomplete` file).

    A report that cannot be written means the client is gone (the fetch was given up,
    or the link dropped: sshd closes our stdout with the channel): the program ends
    then, rather than downloading for hours for nobody. The `.incomplete` file stays in
    the HF cache, where the next fetch resumes it."""
    tick = Ticker("download")
    while not stop.wait(PROGRESS_SECONDS):
        done = 0
        try:
            for entry in os.listdir(folder):
                if entry.endswith(".incomplete"):
                    done += os.path.getsize(os.path.join(folder, entry))
        except OSError:
            continue
        try:
            tick(done, total, force=True)
        except (OSError, ValueError):  # a closed pipe, or a closed file
            os._exit(CLIENT_GONE)


def sha256_of(path):
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def free_bytes(path):
    probe = path
    while not os.path.exists(probe) and probe != os.path.dirname(probe):
        probe = os.path.dirname(probe)
    vfs = os.statvfs(probe)
    return vfs.f_bavail * vfs.f_frsize


def forget_download(path):
    """Drop a download from the HF cache (its blob and its snapshot link): a wrong one so the
    next fetch starts over, an unpacked one so it stops holding disk."""
    try:
        blob = os.path.realpath(path)
        os.unlink(blob)
        if os.path.islink(path):
            os.unlink(path)
    except OSError:
        pass


def fetch(params):
    token = params.get("token") or None
    _SECRETS.append(token)
    endpoint = params.get("endpoint") or None
    if endpoint:
        os.environ["HF_ENDPOINT"] = endpoint
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    stage("import huggingface_hub")
    try:
        import huggingface_hub
        from huggingface_hub import constants, hf_hub_download
    except ImportError as exc:
        raise Failed("no_hub", errstr(exc)) from None
    repo, filename = params["repo"], params["filename"]
    size, want = int(params["size"]), params["sha256"]
    dest = os.path.realpath(os.path.expanduser(params["dest"]))
    cache = getattr(constants, "HF_HUB_CACHE", None) or os.path.join(
        os.path.expanduser("~"), ".cache", "huggingface", "hub")
    blobs = os.path.join(cache, "datasets--" + repo.replace("/", "--"), "blobs")
    cached = None
    try:
        cached = huggingface_hub.try_to_load_from_cache(
            repo, filename, revision=params.get("revision"), repo_type="dataset")
    except Exception:
        cached = None
    have_cached = isinstance(cached, str) and os.path.isfile(cached)
    if not have_cached and free_bytes(cache) < size:
        raise Failed("no_space", "the HF cache %s has %d bytes free, the tar needs %d"
                     % (cache, free_bytes(cache), size), where=cache)
    stage("download")
    started = time.time()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_download, args=(blobs, size, stop))
    watcher.daemon = True
    watcher.start()
    try:
        path = hf_hub_download(repo, filename, repo_type="dataset",
                               revision=params.get("revision"), token=token,
                               endpoint=endpoint)
    except Exception as exc:
        name = type(exc).__name__
        status = getattr(getattr(exc, "response", None), "status_code", None)
        kind = "auth" if status in (401, 403) else "not_found" if "NotFound" in name else "hub"
        raise Failed(kind, errstr(exc)) from None
    finally:
        stop.set()
    download_s = time.time() - started
    stage("sha256")
    started = time.time()
    got, got_size = sha256_of(path)
    hash_s = time.time() - started
    if got != want or got_size != size:
        forget_download(path)
        raise Failed("mismatch", "the downloaded tar's sha256 is %s (%d bytes), the Hub's is "
                     "%s (%d bytes); the download was dropped from the cache"
                     % (got, got_size, want, size), sha256=got, bytes=got_size)
    stage("check members")
    try:
        with tarfile.open(path, "r:") as tar:
            members, total = check_members(tar, dest)
            if not os.path.isdir(dest):
                os.makedirs(dest, 0o755)
            if free_bytes(dest) < total:
                raise Failed("no_space", "%s has %d bytes free, the data set needs %d"
                             % (dest, free_bytes(dest), total), where=dest)
            stage("extract")
            started = time.time()
            tick = Ticker("extract")
            files, written = extract(tar, members, dest, total, tick)
            extract_s = time.time() - started
    except tarfile.TarError as exc:
        raise Failed("bad_tar", errstr(exc)) from None
    removed = False
    if not params.get("keep_tar"):
        forget_download(path)  # unpacked and whole: the tar would only hold billed disk
        removed = not os.path.exists(path)
    emit({"part": "fetch", "data": {
        "sha256": got, "bytes": got_size, "cached": have_cached, "download_s": download_s,
        "hash_s": hash_s, "extract_s": extract_s, "members": len(members), "files": files,
        "extracted_bytes": written, "dest": dest, "tar": path, "tar_removed": removed}})


def main(params_text, nonce):
    """Entry point: the client ends this source with `sys.exit(main(sys.stdin.read(), NONCE))`
    (tui/remote/programs.py sets NONCE and stdin)."""
    params = json.loads(params_text)
    _SECRETS.append(params.get("token"))
    _NONCE[0] = str(nonce)
    sys.stdout = sys.stderr  # library chatter must not reach the frames' stream
    deadline = int(params.get("deadline") or 0)
    if deadline > 0 and hasattr(signal, "alarm"):
        signal.alarm(deadline)
    try:
        fetch(params)
    except Failed as exc:
        data = {"error": scrub(exc.message)[:2000], "kind": exc.kind}
        data.update(exc.extra)
        emit({"part": "fetch", "data": data})
        emit({"done": True})
        return 1
    except Exception as exc:
        emit({"fatal": errstr(exc)})
        return 3
    emit({"done": True})
    return 0
