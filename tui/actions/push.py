"""Push a run's checkpoints to its box's destinations; a push counts only when verified.

One round trip first: the box lists the run's files with size, mtime and
sha256 (hashed on the box, streamed). Then, per destination in `[box.push]`:

- `local_dir`: the files come over SFTP into `<local_dir>/<box>/<run>/`, each
  written as `.<name>.part` and renamed only once its sha256 equals the box's;
  a `.part` left by an interrupted push is continued from its size.
- `hf_repo`: the box uploads with its own huggingface_hub (the bytes never
  cross the jump host), then asks the Hub for each file's sha256 and we
  compare it with the box's.

The Hub token travels only inside the program text sent on the SSH channel's
stdin (`python3 -`): never in argv, the remote command line, the environment,
a message or an exception. Nothing on the box is changed by a push.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import asyncssh

from tui.model.config import BoxConfig
from tui.onbox import push as push_box
from tui.remote.session import BoxError, BoxSession

PUSH_COMMAND = "python3 -"
CHUNK = 1 << 20
MIN_IDLE_SECONDS = 10.0
UNTOUCHED = "the run's files on the box are untouched"

Progress = Callable[[str, int, int], None]  # (file name, bytes done, bytes total)


@dataclass(frozen=True)
class PushedFile:
    """One file of the run as the box had it when the push began."""

    name: str  # path relative to the run dir, e.g. "weights/best.pt"
    size: int
    sha256: str  # on the box
    mtime: float  # on the box, at the time of the push


@dataclass(frozen=True)
class PushResult:
    """What one destination got; `verified` only when every sha256 there equals the box's."""

    box: str
    run: str
    run_path: str
    destination: str  # "hf://<repo>/<run name>/" or "<local_dir>/<box>/<run>/"
    files: tuple[PushedFile, ...]
    verified: bool
    outcome: str  # "done" | "failed"
    message: str


class PushError(Exception):
    """A push step that failed, in words a person can act on (never holding a secret)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# -- pure helpers ---------------------------------------------------------------------

def files_to_push(run_dir_listing: Iterable[str], include_epochs: bool) -> list[str]:
    """Which of a run's files (relative names) a push copies, in push order.

    The same function picks them on the box (push_box.select_files), so both
    sides agree.
    """
    return push_box.select_files(run_dir_listing, include_epochs)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RESERVED = frozenset({".", "..", ".git", ".cache"})


def safe_component(name: str) -> str:
    """One path component, readable but harmless: control characters become `_`.

    `.`, `..` (and `.git`, `.cache`, which the Hub refuses) get a leading `_`
    so a run name can never climb out of, or hide inside, its destination.
    """
    text = _CONTROL.sub("_", name)
    return f"_{text}" if text in _RESERVED or not text else text


def safe_run_path(run_name: str) -> str:
    """A run's name (maybe nested, `exp/run1`) as a relative path safe for a folder or repo."""
    parts = [safe_component(part) for part in run_name.split("/") if part]
    return "/".join(parts) or "_"


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def scrub(text: str, secret: str | None) -> str:
    """The text with the secret blanked out: box errors end up in messages."""
    return text.replace(secret, "***") if secret else text


def resolve_token(token: str | None) -> str | None:
    """The Hub token: the argument, else `HF_TOKEN`, else huggingface_hub's saved one."""
    if token:
        return token
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


# -- the on-box program ---------------------------------------------------------------

@functools.cache
def _box_source() -> str:
    return resources.files("tui.onbox").joinpath("push.py").read_text()


def box_payload(params: dict[str, Any]) -> bytes:
    """What `python3 -` reads: the on-box program, its parameters as a literal, the call."""
    literal = repr(json.dumps(params, separators=(",", ":")))
    return f"{_box_source()}\nPARAMS = {literal}\nsys.exit(main(PARAMS))\n".encode()


async def box_connection(session: BoxSession) -> asyncssh.SSHClientConnection:
    """The box's own SSH connection, from the session already held (opened if needed)."""
    public = getattr(session, "connection", None)
    if callable(public):
        return await public()
    async with session._lock:  # until BoxSession.connection() exists everywhere
        if not session.connected:
            await session.connect()
        return session._conns[-1]


async def run_box_program(conn: asyncssh.SSHClientConnection, params: dict[str, Any], *,
                          box: str, idle_seconds: float, secret: str | None = None,
                          on_event: Callable[[dict[str, Any]], None] | None = None
                          ) -> dict[str, Any]:
    """Run push_box on the box and return its last word (`done` or `error`).

    Timed by silence, not by length: the program beats every few seconds, so a
    long hash or upload is fine and a hung box is caught after `idle_seconds`.
    """
    try:
        proc = await conn.create_process(PUSH_COMMAND, encoding=None)
    except asyncssh.ChannelOpenError as exc:
        raise PushError(f"box {box}: the box refused a session: {exc.reason}") from None
    except (asyncssh.Error, OSError) as exc:
        raise PushError(f"box {box}: connection lost ({exc})") from None
    stderr_task = asyncio.ensure_future(proc.stderr.read())
    final: dict[str, Any] | None = None
    err = b""
    try:
        proc.stdin.write(box_payload(params))
        proc.stdin.write_eof()
        while line := await asyncio.wait_for(proc.stdout.readline(), idle_seconds):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if "done" in event or "error" in event:
                final = event
            elif on_event is not None:
                on_event(event)
        await asyncio.wait_for(proc.wait(), idle_seconds)
        err = await asyncio.wait_for(stderr_task, idle_seconds)
    except TimeoutError:
        if final is None:
            raise PushError(f"box {box}: the push program went silent for {idle_seconds:g} s")\
                from None
    except (asyncssh.Error, OSError) as exc:
        if final is None:
            raise PushError(f"box {box}: connection lost during the push "
                            f"({scrub(str(exc), secret)})") from None
    finally:
        proc.close()
        if not stderr_task.done():
            stderr_task.cancel()
    if final is not None:
        return final
    err_text = scrub(err.decode("utf-8", "replace").strip(), secret)
    if proc.exit_status == 127 or ("python3" in err_text and "not found" in err_text):
        raise PushError(f"box {box}: python3 not found on the box "
                        f"(install it, e.g. apt-get install python3-minimal)")
    raise PushError(f"box {box}: the push program exited {proc.exit_status} without an "
                    f"answer: {err_text[-300:] or 'no error output'}")


@dataclass(frozen=True)
class Listing:
    """The run's files as the box hashed them, and whether it can talk to the Hub."""

    files: tuple[PushedFile, ...]
    unsteady: tuple[str, ...]  # still being written while hashed
    hub: bool


async def list_run(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                   include_epochs: bool, idle_seconds: float) -> Listing:
    """One round trip: the files to push, with size, mtime and sha256 taken on the box."""
    answer = await run_box_program(
        conn, {"mode": "list", "run_path": run_path, "include_epochs": include_epochs},
        box=box, idle_seconds=idle_seconds)
    if "error" in answer:
        if answer.get("kind") == "no_run":
            raise PushError(f"box {box} has no run directory {run_path!r} (moved or deleted?)")
        raise PushError(f"box {box}: listing the run failed: {answer['error']}")
    done = answer["done"]
    files = tuple(PushedFile(row["name"], int(row["size"]), row["sha256"], float(row["mtime"]))
                  for row in done["files"])
    unsteady = tuple(row["name"] for row in done["files"] if not row.get("steady", True))
    return Listing(files, unsteady, bool(done.get("hub")))


# -- local folder over SFTP -----------------------------------------------------------

def _sha256_file(path: Path, limit: int | None = None) -> str:
    digest = hashlib.sha256()
    left = limit
    with path.open("rb") as f:
        while left is None or left > 0:
            block = f.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest.hexdigest()


def _hasher_of_prefix(path: Path, length: int) -> Any:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        left = length
        while left > 0:
            block = f.read(min(CHUNK, left))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest


@dataclass
class _Pulled:
    ok: bool
    note: str = ""  # "resumed at N", "already there", or why it failed


async def _download(sftp: asyncssh.SFTPClient, remote: str, part: Path, start: int,
                    file: PushedFile, progress: Progress | None) -> str:
    """Fetch `remote` into `part` from byte `start` on; the sha256 of the whole part."""
    digest = await asyncio.to_thread(_hasher_of_prefix, part, start) if start \
        else hashlib.sha256()
    done = start
    with part.open("r+b" if start else "wb") as out:
        out.seek(start)
        out.truncate()
        if progress is not None:
            progress(file.name, done, file.size)
        async with sftp.open(remote, "rb") as src:
            while done < file.size:
                block = await src.read(min(CHUNK, file.size - done), done)
                if not block:
                    break
                out.write(block)
                digest.update(block)
                done += len(block)
                if progress is not None:
                    progress(file.name, done, file.size)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


async def _pull_file(sftp: asyncssh.SFTPClient, run_path: str, dest: Path, file: PushedFile,
                     progress: Progress | None) -> _Pulled:
    """One file into place, verified; resumes a `.part`, redoes it once from 0 on a mismatch."""
    final = dest / file.name
    part = final.with_name(f".{final.name}.part")
    remote = posixpath.join(run_path, file.name)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.is_file() and final.stat().st_size == file.size \
            and await asyncio.to_thread(_sha256_file, final) == file.sha256:
        if progress is not None:
            progress(file.name, file.size, file.size)
        return _Pulled(True, "already there")
    start = part.stat().st_size if part.is_file() else 0
    if start > file.size:
        start = 0  # longer than the file: not a prefix of it
    resumed_at = start
    for attempt in range(2):
        got = await _download(sftp, remote, part, start, file, progress)
        if got == file.sha256:
            os.utime(part, (file.mtime, file.mtime))
            os.replace(part, final)
            if attempt:
                return _Pulled(True, "redone from 0 after a sha256 mismatch")
            return _Pulled(True, f"resumed at {resumed_at} bytes" if resumed_at else "")
        start = 0
    part.unlink(missing_ok=True)
    why = "its sha256 never matched the box's"
    try:
        st = await sftp.stat(remote)
        if st.size != file.size or (st.mtime is not None and abs(st.mtime - file.mtime) > 1):
            why += " (it changed on the box during the push: is training still writing it?)"
    except asyncssh.SFTPError:
        why += " (it is gone from the box now)"
    return _Pulled(False, why)


async def push_local(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                     run_name: str, listing: Listing, local_dir: str,
                     progress: Progress | None) -> PushResult:
    """The run's files into `<local_dir>/<box>/<run>/` over SFTP, each verified."""
    dest = Path(local_dir).expanduser() / safe_component(box) / safe_run_path(run_name)
    destination = f"{dest}/"

    def result(verified: bool, message: str) -> PushResult:
        return PushResult(box, run_name, run_path, destination, listing.files, verified,
                          "done" if verified else "failed", message)

    pulled: dict[str, _Pulled] = {}
    try:
        dest.mkdir(parents=True, exist_ok=True)
        async with conn.start_sftp_client() as sftp:
            for file in listing.files:
                try:
                    pulled[file.name] = await _pull_file(sftp, run_path, dest, file, progress)
                except asyncssh.SFTPNoSuchFile:
                    pulled[file.name] = _Pulled(False, "it disappeared from the box")
    except (asyncssh.Error, OSError) as exc:
        done = sum(p.ok for p in pulled.values())
        return result(False, f"pulling run {run_name!r} from box {box} into {destination} "
                             f"stopped: {exc}; {done} of {len(listing.files)} files verified "
                             f"there, unfinished ones kept as .part to resume; {UNTOUCHED}")
    failed = [f"{name}: {p.note}" for name, p in pulled.items() if not p.ok]
    present = [name for name, p in pulled.items() if p.ok and p.note == "already there"]
    notes = [f"{name} {p.note}" for name, p in pulled.items()
             if p.ok and p.note and p.note != "already there"]
    if present:
        notes.append(f"already there: {', '.join(present)}")
    renamed = "" if safe_run_path(run_name) == run_name else \
        " (the run's name made safe for a path)"
    if failed:
        ok = len(pulled) - len(failed)
        return result(False, f"pulling run {run_name!r} from box {box} into {destination}"
                             f"{renamed} failed for {'; '.join(failed)}; {ok} of "
                             f"{len(pulled)} files verified there; {UNTOUCHED}")
    total = human_bytes(sum(f.size for f in listing.files))
    text = (f"{len(pulled)} files ({total}) of run {run_name!r} from box {box} are in "
            f"{destination}{renamed}, every sha256 matching the box's")
    if notes:
        text += "; " + "; ".join(notes)
    return result(True, text)


# -- Hugging Face repo, uploaded from the box ------------------------------------------

def _not_installed(box: str) -> str:
    return (f"huggingface_hub is not installed on box {box}: pip install huggingface_hub there; "
            f"nothing was uploaded and {UNTOUCHED}")


async def push_hub(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                   run_name: str, listing: Listing, repo: str, *, token: str | None,
                   endpoint: str | None, progress: Progress | None,
                   idle_seconds: float) -> PushResult:
    """The box uploads the run's files into `<run>/` of the repo; we check the Hub's sha256."""
    prefix = safe_run_path(run_name)
    destination = f"hf://{repo}/{prefix}/"

    def result(verified: bool, message: str) -> PushResult:
        return PushResult(box, run_name, run_path, destination, listing.files, verified,
                          "done" if verified else "failed", scrub(message, token))

    if not listing.hub:
        return result(False, _not_installed(box))
    sizes = {f.name: f.size for f in listing.files}
    commits: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("committed"):
            commits.append(str(event["committed"]))
        name = event.get("sending") or event.get("sent")
        if progress is not None and name in sizes:
            progress(name, sizes[name] if "sent" in event else 0, sizes[name])

    params = {"mode": "hub", "run_path": run_path, "repo": repo, "prefix": prefix,
              "token": token, "endpoint": endpoint,
              "message": f"Push run {prefix} from box {box}",
              "files": [{"name": f.name, "size": f.size, "mtime": f.mtime}
                        for f in listing.files]}
    try:
        answer = await run_box_program(conn, params, box=box, idle_seconds=idle_seconds,
                                       secret=token, on_event=on_event)
    except PushError as exc:
        return result(False, f"{exc.message}; {_commit_note(commits)}; {UNTOUCHED}")
    if "error" in answer:
        return result(False, _hub_error(answer, box, repo, destination, commits))
    done = answer["done"]
    found: dict[str, dict[str, Any]] = done.get("files") or {}
    commit = str(done.get("commit") or "")[:12]
    missing = [f.name for f in listing.files if found.get(f.name, {}).get("sha256") is None]
    differ = [f.name for f in listing.files
              if f.name not in missing and found[f.name]["sha256"] != f.sha256]
    if not missing and not differ:
        total = human_bytes(sum(f.size for f in listing.files))
        return result(True, f"{len(listing.files)} files ({total}) of run {run_name!r} from "
                            f"box {box} are at {destination} (commit {commit}), every sha256 "
                            f"on the Hub matching the box's")
    problems = []
    if differ:
        problems.append(f"sha256 on the Hub differs from the box's for {', '.join(differ)}")
    if missing:
        problems.append(f"the Hub does not list {', '.join(missing)}")
    moved = sorted(set(done.get("changed") or ()) | set(listing.unsteady))
    if moved:
        problems.append(f"changed on the box during the push (training still writing?): "
                        f"{', '.join(moved)}")
    return result(False, f"uploaded to {destination} (commit {commit}) but not verified: "
                         f"{'; '.join(problems)}; push again; {UNTOUCHED}")


def _commit_note(commits: list[str]) -> str:
    if commits:
        return f"commit {commits[-1][:12]} was made but not verified"
    return "nothing was committed"


def _hub_error(answer: dict[str, Any], box: str, repo: str, destination: str,
               commits: list[str]) -> str:
    kind, error = answer.get("kind"), str(answer.get("error"))
    if kind == "no_hub":
        return (f"huggingface_hub is not installed on box {box} (import failed: {error}): "
                f"pip install huggingface_hub there; nothing was uploaded and {UNTOUCHED}")
    if kind == "not_found":
        return (f"the Hub has no repo {repo} this token can write to (create it, e.g. "
                f"`hf repo create {repo}`); nothing was committed; {UNTOUCHED}")
    if kind == "auth":
        return (f"the Hub refused the token for {repo} ({error}); set HF_TOKEN or log in on "
                f"the panel's machine; {_commit_note(commits)}; {UNTOUCHED}")
    stage = answer.get("stage") or "running"
    return (f"pushing to {destination} from box {box} failed at {stage}: {error}; "
            f"{_commit_note(commits)}; {UNTOUCHED}")


# -- the action -----------------------------------------------------------------------

async def push_run(session: BoxSession, box: BoxConfig, run_path: str, run_name: str, *,
                   include_epochs: bool = False, progress: Progress | None = None,
                   token: str | None = None, hub_endpoint: str | None = None
                   ) -> list[PushResult]:
    """Push one run to every destination of its box; one result per destination.

    Failures come back as results (outcome "failed", and what is still safe),
    not exceptions; only a box with no destination at all raises ValueError,
    so an empty list can never be mistaken for "all verified".
    """
    targets: list[tuple[str, str]] = []
    if box.push is not None and box.push.hf_repo:
        targets.append(("hf", box.push.hf_repo))
    if box.push is not None and box.push.local_dir:
        targets.append(("local", box.push.local_dir))
    if not targets:
        raise ValueError(f"box {box.name} has no push destination: set hf_repo or local_dir "
                         f"under [box.push]")
    idle = max(float(getattr(session, "timeout", MIN_IDLE_SECONDS)), MIN_IDLE_SECONDS)
    problem: str | None = None
    try:
        conn = await box_connection(session)
        listing = await list_run(conn, box.name, run_path, include_epochs, idle)
    except (BoxError, PushError) as exc:
        problem = f"{exc.message}; {UNTOUCHED}"
    else:
        if not listing.files:
            problem = (f"nothing to push: run {run_name!r} on box {box.name} holds none of "
                       f"{', '.join(push_box.FIXED_FILES)}; {UNTOUCHED}")
    if problem is not None:
        return [PushResult(box.name, run_name, run_path, _destination(box.name, run_name, kind,
                                                                      where),
                           (), False, "failed", problem) for kind, where in targets]
    results = []
    for kind, where in targets:
        if kind == "hf":
            results.append(await push_hub(
                conn, box.name, run_path, run_name, listing, where,
                token=resolve_token(token), endpoint=hub_endpoint or os.environ.get("HF_ENDPOINT"),
                progress=progress, idle_seconds=idle))
        else:
            results.append(await push_local(conn, box.name, run_path, run_name, listing, where,
                                            progress))
    return results


def _destination(box: str, run_name: str, kind: str, where: str) -> str:
    if kind == "hf":
        return f"hf://{where}/{safe_run_path(run_name)}/"
    return f"{Path(where).expanduser() / safe_component(box) / safe_run_path(run_name)}/"
