"""`stage` and `fetch`: the guide's first step, one tar of the data set on the Hub.

`stage` packs a folder into one deterministic tar (sorted names, no owners, no
times: the same files always make the same bytes, so the Hub stores a
re-stage once), hashes it while writing, uploads it to a dataset repo
(private unless asked) with this machine's huggingface_hub, and counts only
when the Hub's sha256 of the file equals ours.

`fetch` asks the Hub (from here) for the tar's sha256, size and commit, then
runs tui/onbox/fetch.py on the box with the box's interpreter: the box
downloads with its own huggingface_hub (the bytes go Hub to box), hashes,
checks every member and unpacks. It counts when the box's sha256 equals the
Hub's. The token travels on the SSH channel's stdin only.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tui.actions.hub import HubError, token_value
from tui.actions.onbox_run import describe_end, interpreter_missing, run_onbox
from tui.actions.preflight import params_bytes, program
from tui.actions.push import resolve_token, scrub
from tui.model.config import BoxConfig, FleetConfig
from tui.model.fields import size as byte_count
from tui.model.preflight import interpreter_command
from tui.model.sizing import human_bytes
from tui.model.staging import Expected, FetchReport, StageReport, read_fetch, repo_problem
from tui.model.text import clean
from tui.model.token_rule import SENT_KEY, TokenDecision, decide
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.store import paths
from tui.store.journal import Journal

CHUNK = 1 << 20
FETCH_DEADLINE = 4 * 3600.0
# A fetch that sends nothing new this long (a download that repeats its size) is stopped,
# whatever is left of its deadline.
FETCH_STALL_SECONDS = 600.0

Progress = Callable[[str, int, int], None]  # (step, bytes done, bytes total)


class StageError(Exception):
    """Stage or fetch could not start: bad input, a Hub that says no (never holding a token)."""


class TokenConsent(StageError):
    """A fetch that would send a Hub token to this box for the first time: nothing was
    sent; `notice` is the question to put to the user (then fetch again with `confirmed`)."""

    def __init__(self, notice: str) -> None:
        super().__init__(notice)
        self.notice = notice


# -- packing ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One member to be: its name in the tar, where its bytes are, what it is."""

    arcname: str
    path: Path
    size: int
    is_dir: bool
    executable: bool = False


def collect(folder: Path, *, follow_outside: bool = False) -> tuple[list[Entry], list[str]]:
    """Every directory and file under `folder`, in one sorted order, under the folder's name.

    A symlink is stored as what it points to. One that leads out of the folder
    (a linked `../secrets.env`) would put that file on the Hub with the data
    set, so all such links are listed in a StageError unless `follow_outside`
    says to pack them; links within the folder are fine. A directory reached
    twice (a link loop) and anything that is neither a file nor a directory are
    left out, and said.
    """
    folder = folder.resolve()
    if not folder.is_dir():
        raise StageError(f"{folder} is not a folder")
    entries: list[Entry] = []
    notes: list[str] = []
    outside: list[str] = []
    seen: set[tuple[int, int]] = set()

    def walk(directory: Path, arcdir: str) -> None:
        st = directory.stat()
        if (st.st_dev, st.st_ino) in seen:
            notes.append(f"{directory}: a folder seen before (a link loop?), left out")
            return
        seen.add((st.st_dev, st.st_ino))
        entries.append(Entry(arcdir, directory, 0, True))
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise StageError(f"cannot list {directory}: {exc.strerror or exc}") from None
        for name in names:
            path = directory / name
            arcname = f"{arcdir}/{name}"
            if not follow_outside and (out := _link_out(path, folder)) is not None:
                outside.append(out)
                continue
            try:
                st = path.stat()
            except OSError:
                notes.append(f"{path}: a broken link or unreadable, left out")
                continue
            if stat.S_ISDIR(st.st_mode):
                walk(path, arcname)
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(arcname, path, st.st_size, False,
                                     bool(st.st_mode & stat.S_IXUSR)))
            else:
                notes.append(f"{path}: not a file or folder, left out")

    walk(folder, folder.name)
    if outside:
        listed = "; ".join(outside[:20]) + (f"; and {len(outside) - 20} more"
                                            if len(outside) > 20 else "")
        one = len(outside) == 1
        raise StageError(f"{len(outside)} link{'' if one else 's'} in {folder} "
                         f"point{'s' if one else ''} out of it, so what "
                         f"{'it points' if one else 'they point'} to would be uploaded with "
                         f"the data set: {listed}. Nothing was packed or uploaded: remove "
                         f"{'that link' if one else 'those links'}, or pass --follow-outside "
                         f"to pack what {'it points' if one else 'they point'} to")
    return entries, notes


def _link_out(path: Path, root: Path) -> str | None:
    """`path -> target (where it leads)` when `path` is a link that leads out of `root`
    (through any chain of links); None for anything else."""
    if not path.is_symlink():
        return None
    try:
        target = os.readlink(path)
        real = path.resolve()
    except (OSError, RuntimeError):  # unreadable, or a loop of links: not followed anyway
        return None
    if real == root or real.is_relative_to(root):
        return None
    where = "" if target == str(real) else f" ({clean(str(real))})"
    return f"{clean(str(path))} -> {clean(target)}{where}"


class _Hashing:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.out.write(data)
        self.digest.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.out.flush()


class _Counted:
    """A file being read into the tar, reporting bytes as they go."""

    def __init__(self, f: BinaryIO, step: Callable[[int], None]) -> None:
        self.f = f
        self.step = step

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.step(len(data))
        return data


def pack(entries: list[Entry], out: Path, progress: Progress | None = None
         ) -> tuple[int, str]:
    """Write the tar (deterministic: names sorted, owner 0, times 0, modes 0644/0755).

    Returns its size and sha256, taken while writing. Written to `<out>.part`
    and renamed when whole.
    """
    total = sum(e.size for e in entries)
    done = 0
    last = 0.0

    def step(n: int) -> None:
        nonlocal done, last
        done += n
        now = time.monotonic()
        if progress is not None and (now - last > 0.2 or done == total):
            last = now
            progress("pack", done, total)

    part = out.with_name(out.name + ".part")
    out.parent.mkdir(parents=True, exist_ok=True)
    with part.open("wb") as raw:
        hashing = _Hashing(raw)
        # typeshed asks a stream-mode fileobj for more than tarfile's _Stream uses (write).
        with tarfile.open(fileobj=hashing, mode="w|",  # type: ignore[call-overload]
                          format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                info = tarfile.TarInfo(entry.arcname)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if entry.is_dir:
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                    continue
                info.mode = 0o755 if entry.executable else 0o644
                info.size = entry.size
                with entry.path.open("rb") as f:
                    if os.fstat(f.fileno()).st_size != entry.size:
                        raise StageError(f"{entry.path} changed size while being packed")
                    tar.addfile(info, _Counted(f, step))
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(part, out)
    if progress is not None:
        progress("pack", total, total)
    return hashing.size, hashing.digest.hexdigest()


# -- the Hub, from this machine -----------------------------------------------------------

def _api(endpoint: str | None, token: str | None) -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def _hub_words(exc: Exception, token: str | None) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    name = type(exc).__name__
    if status in (401, 403):
        return "the Hub refused the token (set HF_TOKEN or run `hf auth login`)"
    if "NotFound" in name or status == 404:
        return "the Hub has no such repo or file for this token"
    return scrub(f"{name}: {exc}", token)[:400]


def lfs_sha256(info: Any) -> str | None:
    lfs = getattr(info, "lfs", None)
    sha = getattr(lfs, "sha256", None) if lfs is not None else None
    if sha is None and isinstance(lfs, dict):
        sha = lfs.get("sha256") or lfs.get("oid")
    return sha


def stage(folder: Path, repo: str, *, public: bool = False, name: str | None = None,
          tar_path: Path | None = None, keep_tar: bool = False,
          endpoint: str | None = None, token: str | None = None,
          progress: Progress | None = None, follow_outside: bool = False) -> StageReport:
    """Pack `folder`, upload the tar to dataset repo `repo`, verify it there. Links out of
    the folder are refused before anything is packed unless `follow_outside`."""
    if problem := repo_problem(repo):
        raise StageError(problem)
    from tui.model.staging import tar_name

    entries, notes = collect(folder, follow_outside=follow_outside)
    name = name or tar_name(folder.resolve().name)
    out = tar_path or paths.cache_dir() / "stage" / name
    started = time.monotonic()
    size, sha = pack(entries, out, progress)
    pack_s = time.monotonic() - started
    files = sum(1 for e in entries if not e.is_dir)
    token = resolve_token(token)
    endpoint = endpoint or os.environ.get("HF_ENDPOINT")
    note = f" ({'; '.join(notes[:3])})" if notes else ""

    def report(verified: bool, message: str, **extra: Any) -> StageReport:
        return StageReport(repo, name, size, sha, files, verified, message + note,
                           pack_seconds=pack_s, **extra)

    api = _api(endpoint, token)
    try:
        api.create_repo(repo, repo_type="dataset", private=not public, exist_ok=True)
        private = getattr(api.repo_info(repo, repo_type="dataset"), "private", None)
        if progress is not None:
            progress("upload", 0, size)
        started = time.monotonic()
        commit = api.upload_file(path_or_fileobj=str(out), path_in_repo=name, repo_id=repo,
                                 repo_type="dataset",
                                 commit_message=f"gpurent-tui stage: {name} ({size} bytes, "
                                                f"sha256 {sha})")
        upload_s = time.monotonic() - started
        oid = getattr(commit, "oid", None)
        infos = api.get_paths_info(repo, [name], repo_type="dataset", revision=oid)
    except Exception as exc:  # huggingface_hub raises many kinds; all end the same way
        return report(False, f"uploading {out} to {repo} failed: {_hub_words(exc, token)}; "
                             f"the tar is kept at {out}")
    if progress is not None:
        progress("upload", size, size)
    hub_sha = lfs_sha256(infos[0]) if infos else None
    hub_size = getattr(infos[0], "size", None) if infos else None
    if hub_sha != sha or hub_size != size:
        return report(False, f"the Hub holds {name} with sha256 {hub_sha} ({hub_size} bytes), "
                             f"packed here {sha} ({size} bytes): not verified; the tar is kept "
                             f"at {out}", commit=oid, private=private)
    kept = ""
    if keep_tar or tar_path is not None:
        kept = f"; the tar stays at {out}"
    else:
        out.unlink(missing_ok=True)
    visibility = "private" if private is True else "PUBLIC" if private is False \
        else "visibility unknown"
    warn = " (the repo already existed and is public)" if private is False and not public \
        else ""
    return report(True, f"{files} files of {folder} staged as {name} ({human_bytes(size)}) in "
                        f"dataset repo {repo} ({visibility}{warn}), commit {str(oid)[:12]}, "
                        f"sha256 on the Hub equal to the packed tar's{kept}",
                  commit=oid, private=private, upload_seconds=upload_s)


def hub_expected(repo: str, filename: str | None, *, endpoint: str | None,
                 token: str | None) -> Expected:
    """The staged tar as the Hub describes it here: name, size, sha256, pinned commit."""
    if problem := repo_problem(repo):
        raise StageError(problem)
    api = _api(endpoint, token)
    try:
        info = api.repo_info(repo, repo_type="dataset")
        revision = getattr(info, "sha", None)
        needs_token = getattr(info, "private", None) is not False \
            or bool(getattr(info, "gated", False))
        if filename is None:
            tars = sorted(f.path for f in api.list_repo_tree(repo, repo_type="dataset",
                                                             revision=revision)
                          if getattr(f, "path", "").endswith(".tar"))
            if len(tars) != 1:
                listed = ", ".join(tars) or "none"
                raise StageError(f"dataset repo {repo} holds {len(tars)} tar files ({listed}): "
                                 "name one with --file")
            filename = tars[0]
        infos = api.get_paths_info(repo, [filename], repo_type="dataset", revision=revision)
    except StageError:
        raise
    except Exception as exc:
        raise StageError(f"asking the Hub about {repo}: {_hub_words(exc, token)}") from None
    if not infos:
        raise StageError(f"dataset repo {repo} has no file {filename}")
    found = infos[0]
    sha = lfs_sha256(found)
    if sha is None:
        sha = _hash_small_file(repo, filename, revision, endpoint, token)
    return Expected(repo, filename, int(found.size), sha, revision, needs_token)


def _hash_small_file(repo: str, filename: str, revision: str | None, endpoint: str | None,
                     token: str | None) -> str:
    """A file the Hub keeps in git (small by its rules) has no LFS sha256: hash its bytes."""
    from huggingface_hub import hf_hub_download

    with tempfile.TemporaryDirectory() as tmp:
        path = hf_hub_download(repo, filename, repo_type="dataset", revision=revision,
                               endpoint=endpoint, token=token, cache_dir=tmp)
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- fetch ------------------------------------------------------------------------------

def default_dest(box: BoxConfig) -> str:
    """Where a data set lands: on the persistent volume when the box has one."""
    return f"{box.persistent.rstrip('/')}/data" if box.persistent else "~/data"


async def fetch_box(session: BoxSession, box: BoxConfig, expected: Expected, *, dest: str,
                    token: str | None, endpoint: str | None,
                    deadline: float = FETCH_DEADLINE, keep_tar: bool = False,
                    progress: Progress | None = None,
                    stall_seconds: float = FETCH_STALL_SECONDS) -> FetchReport:
    """Run the fetch on the box; a report always comes back."""
    params = {"repo": expected.repo, "filename": expected.filename,
              "revision": expected.revision, "size": expected.size,
              "sha256": expected.sha256, "token": token, "endpoint": endpoint, "dest": dest,
              "keep_tar": keep_tar, "deadline": max(5, int(deadline) - 3)}

    def seen(frame: dict[str, Any]) -> None:
        event = frame.get("progress")
        if progress is None or not isinstance(event, dict):
            return
        # The box's numbers, bounded as bytes (a 4001-digit count overflows float(), in
        # the fetch screen's sizes), and no more done than the total.
        step, done, total = (event.get("step"), byte_count(event.get("done")),
                             byte_count(event.get("total")))
        if step in ("download", "extract") and done is not None and total is not None \
                and done <= total:
            progress(step, done, total)

    run = await run_onbox(session, interpreter_command(box.python), program("fetch"),
                          params_bytes(params), deadline=deadline, what="fetch",
                          on_frame=seen, stall_seconds=stall_seconds)
    parts = run.parts()
    failure = None
    if "fetch" not in parts:
        if interpreter_missing(run):
            failure = (f"the interpreter {box.python} was not found on box {box.name}: set "
                       f"`python` for this box")
        else:
            failure = scrub(describe_end(run, f"the fetch on box {box.name}", deadline), token)
    report = read_fetch(parts.get("fetch"), expected, box=box.name, dest=dest, failure=failure)
    if token and token in report.message:  # the box's words never carry the token out
        report = FetchReport(**{**report.__dict__, "message": scrub(report.message, token)})
    return report


async def fetch(fleet: FleetConfig, box: BoxConfig, repo: str, *, filename: str | None = None,
                dest: str | None = None, journal: Journal | None = None,
                endpoint: str | None = None, token: str | None = None,
                deadline: float = FETCH_DEADLINE, keep_tar: bool = False,
                progress: Progress | None = None,
                session: BoxSession | None = None, confirmed: bool = False) -> FetchReport:
    """Ask the Hub here, fetch on the box, journal the outcome: the headless command, and
    the panel's (over its watcher's `session`, left open).

    `token` is this machine's, for asking the Hub; what goes to the box is what the one
    rule (tui.model.token_rule) allows: none for a public data set, the box's own
    token_env, never any to an upload_from = "panel" box (StageError for a private data
    set there). The first send to a box raises TokenConsent unless `confirmed`."""
    import asyncio

    token = resolve_token(token)
    endpoint = endpoint or os.environ.get("HF_ENDPOINT")
    expected = await asyncio.to_thread(hub_expected, repo, filename, endpoint=endpoint,
                                       token=token)
    decision = fetch_decision(box, expected, journal)
    box_token = fetch_token(box, decision, token, confirmed)
    dest = dest or default_dest(box)
    own = session is None
    use = BoxSession(box, fleet, host_key_store(fleet)) if session is None else session
    try:
        report = await fetch_box(use, box, expected, dest=dest, token=box_token,
                                 endpoint=endpoint, deadline=deadline, keep_tar=keep_tar,
                                 progress=progress)
    finally:
        if own:
            await use.close()
    if journal is not None:
        journal.record(box=box.name, action="fetch",
                       outcome="done" if report.verified else "failed",
                       files=[{"name": expected.filename, "size": expected.size,
                               "sha256": expected.sha256}],
                       destination=report.dest, verified=report.verified,
                       message=report.message,
                       details={SENT_KEY: decision.source if box_token else None})
    return report


def fetch_decision(box: BoxConfig, expected: Expected, journal: Journal | None
                   ) -> TokenDecision:
    """The one rule, asked for this fetch: a token only where the data set needs one."""
    return decide(box, "fetch", uses_token=expected.needs_token,
                  entries=journal.entries if journal is not None else (), repo=expected.repo)


def fetch_token(box: BoxConfig, decision: TokenDecision, token: str | None,
                confirmed: bool) -> str | None:
    """The token this fetch sends to the box, or None; StageError when the rule withholds
    one the data set needs, TokenConsent when the user has not said yes yet."""
    if decision.withheld is not None:
        raise StageError(f"not fetched: {decision.withheld}")
    if decision.ask and not confirmed:
        raise TokenConsent(decision.notice or "")
    try:
        return token_value(box, decision, token)
    except HubError as exc:
        raise StageError(f"not fetched: {exc.message}") from None
