"""Push a run to its box's destinations; a push counts only when verified at the destination.

One round trip first: the box lists the run's files with size, mtime (and
the exact mtime_ns and inode the destroy guard compares) and sha256, hashed
on the box. The listing is a stranger's word: every name must be one the
push itself selects (weights/best.pt, weights/last.pt, weights/epoch_<N>.pt,
summary.json, results.csv, status.json, train_config.yaml, metrics.jsonl,
train.log), every field of the right type, or nothing is pushed. Then, per
destination in `[box.push]`:

- `local_dir`: the files come into `<local_dir>/<box>/<run>/` (`<run>` unique per run
  path, run_folder(); tui.actions.localdir: never through a link, 0600 files in 0700
  folders, never into a folder holding another run's push), each written as
  `.<name>.part` and renamed only once its sha256 equals the box's; a `.part`
  left by an interrupted push is continued from its size. Over SFTP, or, where
  the box refuses the SFTP subsystem (RunPod's basic proxy), streamed over an
  exec channel by the push program, resumable the same way; the result says which.
- `hf_repo`: the box uploads with its own huggingface_hub (the bytes never
  cross the jump host), or with `upload_from = "panel"` the files are pulled
  and uploaded from the panel's machine; either way the panel then asks the
  Hub itself for each file's sha256 at the new commit (tui.actions.hub).

The Hub token travels only inside the program text sent on the SSH channel's
stdin (`python3 -`): never in argv, the remote command line, the environment,
a message or an exception. Nothing on the box is changed by a push.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import asyncssh

from tui.actions.boxprog import PushError, box_payload, run_box_program, scrub
from tui.actions.hub import (
    HubError,
    box_token,
    hub_sha256s,
    resolve_token,
    token_notice,
    upload_from_panel,
)
from tui.actions.localdir import RunFolder, UnsafeDestination
from tui.model.config import BoxConfig
from tui.model.fields import epoch_of
from tui.model.redact import REDACTED
from tui.model.sizing import human_bytes
from tui.model.text import clean, clean_block
from tui.onbox import push as push_box
from tui.remote.session import BoxError, BoxSession
from tui.store import paths
from tui.store.journal import PushOutcome

__all__ = ["PushError", "PushResult", "PushedFile", "box_payload", "files_to_push",
           "push_run", "resolve_token", "run_folder", "safe_run_path", "token_notice"]

CHUNK = 1 << 20
MIN_IDLE_SECONDS = 10.0
# A push program may run at most this long plus its bytes at MIN_RATE (a 1 GB upload:
# about 75 min): generous for any real box, and a box that beats without end is stopped.
DEADLINE_BASE_SECONDS = 600.0
MIN_RATE = 256 << 10  # bytes per second
LIST_DEADLINE_SECONDS = 4 * 3600.0  # hashing a run of unknown size (1 TB at 70 MB/s)
# The sizes come from the box: whatever it claims, a push program runs at most this long,
# and it is stopped sooner when nothing moves for the stall time (no file bytes, no step).
MAX_DEADLINE_SECONDS = 12 * 3600.0
STALL_SECONDS = 600.0
MAX_FILE_BYTES = 1 << 42  # 4 TiB: past this a size is a lie, not a checkpoint
UNTOUCHED = "the run's files on the box are untouched"
VIA_SFTP = "over SFTP"
VIA_EXEC = "over an exec channel (the box offers no SFTP)"
# SFTP listed but something else answered on it (a forced command's banner, a shell).
VIA_EXEC_SFTP_UNUSABLE = ("over an exec channel (the box's SFTP did not answer as SFTP: "
                          "a login banner or forced command in its way)")
FROM_BOX = "uploaded from the box"
FROM_PANEL = "pulled to this machine and uploaded from here"

Progress = Callable[[str, int, int], None]  # (file name, bytes done, bytes total)


@dataclass(frozen=True)
class PushedFile:
    """One file of the run as the box had it when the push began."""

    name: str  # path relative to the run dir, e.g. "weights/best.pt"
    size: int
    sha256: str  # on the box
    mtime: float  # on the box, at the time of the push
    mtime_ns: int | None = None  # exact: the destroy guard compares these two and the size
    inode: int | None = None


@dataclass(frozen=True)
class PushResult:
    """What one destination got; `verified` only when every sha256 there equals the box's."""

    box: str
    run: str
    run_path: str
    destination: str  # "hf://<repo>/<run name>/" or "<local_dir>/<box>/<run>/"
    files: tuple[PushedFile, ...]
    verified: bool
    outcome: PushOutcome
    message: str
    how: str = ""  # which way the bytes went (VIA_SFTP, VIA_EXEC, FROM_BOX, FROM_PANEL)


# -- pure helpers ---------------------------------------------------------------------

Epochs = bool | list[int]  # every epoch_<N>.pt, or these N only


def files_to_push(run_dir_listing: Iterable[str], include_epochs: Epochs) -> list[str]:
    """Which of a run's files (relative names) a push copies, in push order.

    The same function picks them on the box (push_box.select_files), so both
    sides agree.
    """
    return push_box.select_files(run_dir_listing, include_epochs)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_RESERVED = frozenset({".", "..", ".git", ".cache"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def deadline(size: int) -> float:
    """How long a push program moving `size` bytes (the box's claim) may run in all: never
    past MAX_DEADLINE_SECONDS, so a claimed 4 TiB file cannot hold the box for months."""
    return min(DEADLINE_BASE_SECONDS + size / MIN_RATE, MAX_DEADLINE_SECONDS)


def safe_component(name: str) -> str:
    """One path component, readable but harmless: control characters become `_`.

    `.`, `..` (and `.git`, `.cache`, which the Hub refuses) get a leading `_`
    so a run name can never climb out of, or hide inside, its destination.
    """
    text = _CONTROL.sub("_", clean(name).replace("\ufffd", "_"))
    return f"_{text}" if text in _RESERVED or not text else text


def safe_run_path(run_name: str) -> str:
    """A run's name (maybe nested, `exp/run1`) as a relative path safe for a folder or repo."""
    parts = [safe_component(part) for part in run_name.split("/") if part]
    return "/".join(parts) or "_"


def run_folder(run_name: str, run_path: str, roots: int = 1) -> str:
    """Where a run goes below `<local_dir>/<box>/` and in a Hub repo: unique per run path.

    The safe name, plus `~` and a hash of the run path wherever two runs could share
    it: a box with several runs roots (`/a/exp1` and `/b/exp1`), a name changed by
    cleaning (`a<newline>b` and `a_b`), a name holding `~` (so no plain name can take
    the shape of a hashed one), a name a held secret was taken out of (`run-***`: two
    runs may differ only there; tui.model.box_redact). Otherwise one run's push would
    overwrite another's.
    """
    safe = safe_run_path(run_name)
    if roots > 1 or safe != run_name or "~" in run_name or REDACTED in run_name:
        digest = hashlib.sha256(run_path.encode("utf-8", "surrogateescape")).hexdigest()
        safe = f"{safe}~{digest[:10]}"
    return safe


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_FILE_BYTES


def check_listing(rows: object, include_epochs: Epochs, box: str) -> list[PushedFile]:
    """The box's listing, refused whole unless every row is a file this push selected.

    A name the push did not ask for (`../../.bashrc`, `/etc/passwd`, `weights/x`),
    a repeated name, a size or hash of the wrong shape: the box is not believed.
    """
    if not isinstance(rows, list):
        raise PushError(f"box {box}: the listing is not a list of files; nothing was pushed")
    files: list[PushedFile] = []
    seen: set[str] = set()
    for row in rows:
        name = row.get("name") if isinstance(row, dict) else None
        if not isinstance(name, str) or files_to_push([name], include_epochs) != [name] \
                or name in seen:
            shown = clean(repr(name))[:120]
            raise PushError(f"box {box} listed a file this push did not ask for ({shown}): "
                            f"refused, nothing was written; {UNTOUCHED}")
        seen.add(name)
        sha, mtime = row.get("sha256"), row.get("mtime")
        if not _count(row.get("size")) or not isinstance(sha, str) \
                or not _SHA256.fullmatch(sha) or isinstance(mtime, bool) \
                or not isinstance(mtime, int | float) or not -1e11 < mtime < 1e11:
            raise PushError(f"box {box} listed {name} with a size, sha256 or mtime of the "
                            f"wrong shape: refused, nothing was written; {UNTOUCHED}")
        exact = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64
                    for v in (row.get("mtime_ns"), row.get("inode")))
        files.append(PushedFile(name, row["size"], sha, float(mtime),
                                row["mtime_ns"] if exact else None,
                                row["inode"] if exact else None))
    return files


# -- the listing ----------------------------------------------------------------------

@dataclass(frozen=True)
class Listing:
    """The run's files as the box hashed them, and whether it can talk to the Hub."""

    files: tuple[PushedFile, ...]
    unsteady: tuple[str, ...]  # still being written while hashed
    hub: bool


async def list_run(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                   include_epochs: Epochs, idle_seconds: float,
                   stall_seconds: float = STALL_SECONDS) -> Listing:
    """One round trip: the files to push, with size, mtime and sha256 taken on the box."""
    answer = await run_box_program(
        conn, {"mode": "list", "run_path": run_path, "include_epochs": include_epochs},
        box=box, idle_seconds=idle_seconds, deadline_seconds=LIST_DEADLINE_SECONDS,
        stall_seconds=stall_seconds)
    if "error" in answer:
        if answer.get("kind") == "no_run":
            raise PushError(f"box {box} has no run directory {run_path!r} (moved or deleted?)")
        raise PushError(f"box {box}: listing the run failed: {scrub(str(answer['error']), None)}")
    done = answer["done"]
    if not isinstance(done, dict):
        raise PushError(f"box {box}: the listing is not an object; nothing was pushed")
    rows = done.get("files")
    files = check_listing(rows, include_epochs, box)
    listed = rows if isinstance(rows, list) else []  # check_listing refused anything else
    unsteady = tuple(file.name for file, row in zip(files, listed, strict=True)
                     if row.get("steady", True) is not True)
    return Listing(tuple(files), unsteady, done.get("hub") is True)


# -- local folder: over SFTP, else over an exec channel ---------------------------------

class _Source:
    """Where a file's bytes come from: SFTP, or the push program streaming over exec."""

    how = ""

    async def fetch(self, file: PushedFile, start: int, sink: Callable[[bytes], None]) -> None:
        raise NotImplementedError

    async def changed(self, file: PushedFile) -> str:
        """Words on why a file's sha256 never matched (is it still being written?)."""
        return ""


class _Sftp(_Source):
    how = VIA_SFTP

    def __init__(self, sftp: asyncssh.SFTPClient, box: str, run_path: str,
                 stall_seconds: float) -> None:
        self.sftp = sftp
        self.box = box
        self.run_path = run_path
        self.stall = stall_seconds

    async def fetch(self, file: PushedFile, start: int, sink: Callable[[bytes], None]) -> None:
        done = start
        async with self.sftp.open(posixpath.join(self.run_path, file.name), "rb") as src:
            while done < file.size:
                try:
                    block = await asyncio.wait_for(
                        src.read(min(CHUNK, file.size - done), done), self.stall)
                except TimeoutError:
                    raise PushError(f"box {self.box}: no bytes of {file.name} came over SFTP "
                                    f"for {self.stall:g} s; it was stopped") from None
                if not block:
                    break
                # asyncssh annotates read() as AnyStr whatever the mode: "rb" reads bytes.
                sink(block)  # type: ignore[arg-type]
                done += len(block)

    async def changed(self, file: PushedFile) -> str:
        try:
            st = await self.sftp.stat(posixpath.join(self.run_path, file.name))
        except asyncssh.SFTPError:
            return " (it is gone from the box now)"
        if st.size != file.size or (st.mtime is not None and abs(st.mtime - file.mtime) > 1):
            return " (it changed on the box during the push: is training still writing it?)"
        return ""


class _Exec(_Source):
    how = VIA_EXEC

    def __init__(self, conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                 idle_seconds: float, stall_seconds: float, how: str = VIA_EXEC) -> None:
        self.how = how  # why not SFTP: none offered, or one that did not answer as SFTP
        self.conn = conn
        self.box = box
        self.run_path = run_path
        self.idle = idle_seconds
        self.stall = stall_seconds

    async def fetch(self, file: PushedFile, start: int, sink: Callable[[bytes], None]) -> None:
        got = [start]

        def on_data(block: bytes) -> None:
            if got[0] + len(block) > file.size:
                raise PushError(f"box {self.box} sent more of {file.name} than it listed: "
                                "refused")
            got[0] += len(block)
            sink(block)

        answer = await run_box_program(
            self.conn, {"mode": "read", "run_path": self.run_path, "name": file.name,
                        "offset": start, "size": file.size},
            box=self.box, idle_seconds=self.idle, on_data=on_data,
            deadline_seconds=deadline(file.size - start), stall_seconds=self.stall)
        if "error" in answer:
            raise PushError(f"box {self.box}: reading {file.name} failed: "
                            f"{scrub(str(answer['error']), None)}")


@dataclass
class _Pulled:
    ok: bool
    note: str = ""  # "resumed at N", "already there", or why it failed


NEVER_MATCHED = "its sha256 never matched the box's"
RELISTS = 3  # times small files training rewrote mid-pull are hashed again and pulled
RELIST_BYTES = 64 << 20  # "small": what the box's own Hub push snapshots whole
RELIST_PAUSE = 1.0  # seconds before the first relist, doubled for each next: an epoch's
# save takes a moment, and three relists in a row can all fall inside it


def _hash_fd(fd: int, length: int | None) -> Any:
    """sha256 of the first `length` bytes of an open file (all of it for None)."""
    digest = hashlib.sha256()
    left = length
    offset = 0
    while left is None or left > 0:
        block = os.pread(fd, CHUNK if left is None else min(CHUNK, left), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
        if left is not None:
            left -= len(block)
    return digest


async def _pull_file(source: _Source, folder: RunFolder, file: PushedFile,
                     progress: Progress | None) -> _Pulled:
    """One file into place, verified; resumes a `.part`, redoes it once from 0 on a mismatch."""
    have = folder.open_regular(file.name)
    if have is not None:
        try:
            same = os.fstat(have).st_size == file.size and \
                (await asyncio.to_thread(_hash_fd, have, None)).hexdigest() == file.sha256
            if same:
                folder.fix_mode(have)
        finally:
            os.close(have)
        if same:
            if progress is not None:
                progress(file.name, file.size, file.size)
            return _Pulled(True, "already there")
    fd, start = folder.open_part(file.name)
    try:
        if start > file.size:
            start = 0  # longer than the file: not a prefix of it
        resumed_at = start
        for attempt in range(2):
            digest = await asyncio.to_thread(_hash_fd, fd, start) if start else hashlib.sha256()
            os.ftruncate(fd, start)
            if progress is not None:
                progress(file.name, start, file.size)
            await source.fetch(file, start, _Writer(fd, digest, start, file, progress))
            os.fsync(fd)
            if digest.hexdigest() == file.sha256:
                folder.finish(file.name, file.mtime_ns if file.mtime_ns is not None
                              else round(file.mtime * 1e9))
                if attempt:
                    return _Pulled(True, "redone from 0 after a sha256 mismatch")
                return _Pulled(True, f"resumed at {resumed_at} bytes" if resumed_at else "")
            start = 0
    finally:
        os.close(fd)
    folder.discard_part(file.name)
    return _Pulled(False, NEVER_MATCHED + await source.changed(file))


class _Writer:
    """Appends what a source sends to the part file, hashing it, reporting progress."""

    def __init__(self, fd: int, digest: Any, start: int, file: PushedFile,
                 progress: Progress | None) -> None:
        self.fd = fd
        self.digest = digest
        self.at = start
        self.file = file
        self.progress = progress

    def __call__(self, block: bytes) -> None:
        view = memoryview(block)
        while view:
            written = os.pwrite(self.fd, view, self.at)
            self.at += written
            view = view[written:]
        self.digest.update(block)
        if self.progress is not None:
            self.progress(self.file.name, self.at, self.file.size)


async def _open_source(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                       idle_seconds: float, stall_seconds: float
                       ) -> tuple[_Source, asyncssh.SFTPClient | None]:
    """SFTP when the box offers it, else the push program over an exec channel."""
    try:
        sftp = await asyncio.wait_for(conn.start_sftp_client(), idle_seconds)
    except asyncssh.ChannelOpenError:  # no SFTP subsystem here
        return _Exec(conn, box, run_path, idle_seconds, stall_seconds), None
    except (asyncssh.SFTPError, TimeoutError):  # something else answered
        return _Exec(conn, box, run_path, idle_seconds, stall_seconds,
                     VIA_EXEC_SFTP_UNUSABLE), None
    return _Sftp(sftp, box, run_path, stall_seconds), sftp


def no_room(folder: RunFolder, files: Iterable[PushedFile]) -> str | None:
    """Why the destination cannot hold the files the box listed, or None when it can: the
    bytes still to come (what is there already, whole or as .part, counts) against the
    free space, asked before a byte is pulled."""
    missing = [(f, max(0, f.size - folder.held(f.name))) for f in files]
    need = sum(left for _, left in missing)
    free = shutil.disk_usage(folder.path).free
    if need <= free:
        return None
    biggest = max(missing, key=lambda pair: pair[1])[0]
    return (f"{biggest.name} needs {human_bytes(biggest.size)} "
            f"({human_bytes(need)} still to come for all {len(missing)} files) and "
            f"{folder.path} has {human_bytes(free)} free")


async def pull_run(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                   run_name: str, listing: Listing, base: Path, parts: list[str],
                   progress: Progress | None, idle_seconds: float,
                   stall_seconds: float = STALL_SECONDS
                   ) -> tuple[bool, str, str, Path, Listing]:
    """The run's files into `base/parts/`, each verified: (all verified, words, how, folder,
    the listing with the files pulled again as rewritten)."""
    dest = base.joinpath(*parts)
    destination = f"{dest}/"
    pulled: dict[str, _Pulled] = {}
    how = ""
    try:
        with RunFolder(base, parts) as folder:
            short = no_room(folder, listing.files)
            if short is not None:
                return False, (f"pulling run {run_name!r} from box {box} into {destination} "
                               f"refused: {short}; nothing was pulled or written there; "
                               f"{UNTOUCHED}"), how, dest, listing
            folder.claim(box, run_path)
            source, sftp = await _open_source(conn, box, run_path, idle_seconds,
                                              stall_seconds)
            how = source.how
            try:
                for file in listing.files:
                    try:
                        pulled[file.name] = await _pull_file(source, folder, file, progress)
                    except asyncssh.SFTPNoSuchFile:
                        pulled[file.name] = _Pulled(False, "it disappeared from the box")
                listing = await _pull_rewritten(conn, box, run_path, listing, pulled, source,
                                                folder, progress, idle_seconds, stall_seconds)
            finally:
                if sftp is not None:
                    sftp.exit()
    except UnsafeDestination as exc:
        return False, (f"pulling run {run_name!r} from box {box} refused: {exc}; nothing was "
                       f"written there; {UNTOUCHED}"), how, dest, listing
    except (asyncssh.Error, OSError, PushError) as exc:
        words = exc.message if isinstance(exc, PushError) else str(exc) or type(exc).__name__
        done = sum(p.ok for p in pulled.values())
        return False, (f"pulling run {run_name!r} from box {box} into {destination} {how} "
                       f"stopped: {words}; {done} of {len(listing.files)} files verified "
                       f"there, unfinished ones kept as .part to resume; {UNTOUCHED}"), \
            how, dest, listing
    failed = [f"{name}: {p.note}" for name, p in pulled.items() if not p.ok]
    present = [name for name, p in pulled.items() if p.ok and p.note == "already there"]
    notes = [f"{name} {p.note}" for name, p in pulled.items()
             if p.ok and p.note and p.note != "already there"]
    if present:
        notes.append(f"already there: {', '.join(present)}")
    renamed = "" if "/".join(parts[1:]) == run_name else \
        " (the run's name made safe and unique for a path)"
    if failed:
        ok = len(pulled) - len(failed)
        return False, (f"pulling run {run_name!r} from box {box} into {destination}{renamed} "
                       f"{how} failed for {'; '.join(failed)}; {ok} of {len(pulled)} files "
                       f"verified there; {UNTOUCHED}"), how, dest, listing
    total = human_bytes(sum(f.size for f in listing.files))
    text = (f"{len(pulled)} files ({total}) of run {run_name!r} from box {box} are in "
            f"{destination}{renamed}, {how}, every sha256 matching the box's")
    if notes:
        text += "; " + "; ".join(notes)
    return True, text, how, dest, listing


async def _pull_rewritten(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                          listing: Listing, pulled: dict[str, _Pulled], source: _Source,
                          folder: RunFolder, progress: Progress | None, idle_seconds: float,
                          stall_seconds: float) -> Listing:
    """Small files training rewrote while they were pulled (last.pt, status.json at an
    epoch's end), hashed again on the box and pulled as they are now, a few times at most:
    verified copies of the files as the box then had them, and the listing says so."""
    for round_ in range(RELISTS):
        moved = [f for f in listing.files if not pulled[f.name].ok and f.size <= RELIST_BYTES
                 and pulled[f.name].note.startswith(NEVER_MATCHED)]
        if not moved:
            break
        await asyncio.sleep(RELIST_PAUSE * 2 ** round_)  # let the save finish
        epochs = [n for f in moved if (n := epoch_of(f.name.removeprefix("weights/")))
                  is not None]
        fresh = {f.name: f for f in (await list_run(conn, box, run_path, epochs or False,
                                                    idle_seconds, stall_seconds)).files}
        for file in moved:
            again = fresh.get(file.name)
            if again is None or again.size > RELIST_BYTES:
                continue
            if (await _pull_file(source, folder, again, progress)).ok:
                pulled[file.name] = _Pulled(True, "rewritten on the box during the push: "
                                                  "pulled again as it is now")
                listing = replace(listing, files=tuple(again if f.name == file.name else f
                                                       for f in listing.files))
    return listing


async def push_local(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                     run_name: str, listing: Listing, local_dir: str,
                     progress: Progress | None, idle_seconds: float = MIN_IDLE_SECONDS,
                     folder: str | None = None,
                     stall_seconds: float = STALL_SECONDS) -> PushResult:
    """The run's files into `<local_dir>/<box>/<run>/`, each verified (`folder`: the run's
    place there, run_folder())."""
    base, parts = _local_parts(local_dir, box, folder or safe_run_path(run_name))
    ok, words, how, dest, listing = await pull_run(conn, box, run_path, run_name, listing,
                                                   base, parts, progress, idle_seconds,
                                                   stall_seconds)
    return PushResult(box, run_name, run_path, f"{dest}/", listing.files, ok,
                      "done" if ok else "failed", clean_block(words), how)


def _local_parts(local_dir: str, box: str, folder: str) -> tuple[Path, list[str]]:
    return Path(local_dir).expanduser(), [safe_component(box), *folder.split("/")]


# -- Hugging Face repo --------------------------------------------------------------------

def _not_installed(box: str) -> str:
    return (f"huggingface_hub is not installed on box {box}: pip install huggingface_hub there "
            f"(or set upload_from = \"panel\"); nothing was uploaded and {UNTOUCHED}")


async def _verify_at_hub(result: Callable[[bool, str], PushResult], listing: Listing,
                         repo: str, prefix: str, commit: str, destination: str,
                         token: str | None, endpoint: str | None, run_name: str, box: str,
                         changed: Iterable[str], how: str) -> PushResult:
    """Ask the Hub what the commit holds; verified only when every sha256 equals the box's."""
    try:
        found = await hub_sha256s(repo, [f"{prefix}/{f.name}" for f in listing.files],
                                  commit, token=token, endpoint=endpoint)
    except HubError as exc:
        return result(False, f"{how} to {destination} but not verified: {exc.message}; push "
                             f"again; {UNTOUCHED}")
    missing = [f.name for f in listing.files if found.get(f"{prefix}/{f.name}") is None]
    differ = [f.name for f in listing.files
              if f.name not in missing and found[f"{prefix}/{f.name}"] != f.sha256]
    if not missing and not differ:
        total = human_bytes(sum(f.size for f in listing.files))
        return result(True, f"{len(listing.files)} files ({total}) of run {run_name!r} from "
                            f"box {box} are at {destination} (commit {commit[:12]}), {how}; "
                            "the Hub's own sha256 of each matches the box's")
    problems = []
    if differ:
        problems.append(f"sha256 on the Hub differs from the box's for {', '.join(differ)}")
    if missing:
        problems.append(f"the Hub does not list {', '.join(missing)} at commit {commit[:12]}")
    moved = sorted(set(changed) | set(listing.unsteady))
    if moved:
        problems.append(f"changed on the box during the push (training still writing?): "
                        f"{', '.join(moved)}")
    return result(False, f"{how} to {destination} (commit {commit[:12]}) but not verified: "
                         f"{'; '.join(problems)}; push again; {UNTOUCHED}")


async def push_hub(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                   run_name: str, listing: Listing, repo: str, *, token: str | None,
                   endpoint: str | None, progress: Progress | None,
                   idle_seconds: float, folder: str | None = None,
                   stall_seconds: float = STALL_SECONDS) -> PushResult:
    """The box uploads the run's files into `<run>/` of the repo; the panel asks the Hub."""
    prefix = folder or safe_run_path(run_name)
    destination = f"hf://{repo}/{prefix}/"

    def result(verified: bool, message: str) -> PushResult:
        return PushResult(box, run_name, run_path, destination, listing.files, verified,
                          "done" if verified else "failed", scrub(message, token), FROM_BOX)

    if not listing.hub:
        return result(False, _not_installed(box))
    sizes = {f.name: f.size for f in listing.files}
    commits: list[str] = []  # the last commit id the box named, nothing more

    def on_event(event: dict[str, Any]) -> None:
        oid = event.get("committed")
        if isinstance(oid, str) and _COMMIT.fullmatch(oid):
            commits[:] = [oid]
        name = event.get("sending") or event.get("sent")
        if progress is not None and isinstance(name, str) and name in sizes:
            progress(name, sizes[name] if "sent" in event else 0, sizes[name])

    params = {"mode": "hub", "run_path": run_path, "repo": repo, "prefix": prefix,
              "token": token, "endpoint": endpoint,
              "message": f"Push run {prefix} from box {box}",
              "files": [{"name": f.name, "size": f.size, "mtime": f.mtime, "sha256": f.sha256}
                        for f in listing.files]}
    try:
        answer = await run_box_program(conn, params, box=box, idle_seconds=idle_seconds,
                                       secret=token, on_event=on_event,
                                       deadline_seconds=deadline(sum(sizes.values())),
                                       stall_seconds=stall_seconds)
    except PushError as exc:
        return result(False, f"{exc.message}; {_commit_note(commits)}; {UNTOUCHED}")
    if "error" in answer:
        return result(False, _hub_error(answer, box, repo, destination, commits, token))
    done = answer["done"] if isinstance(answer["done"], dict) else {}
    commit = done.get("commit") if isinstance(done.get("commit"), str) else ""
    changed = [c for c in done.get("changed") or () if isinstance(c, str)]
    try:
        listing = relist(listing, done.get("relisted"), box)
    except PushError as exc:
        return result(False, f"{exc.message}; {_commit_note(commits)}")
    return await _verify_at_hub(result, listing, repo, prefix, str(commit), destination,
                                token, endpoint, run_name, box, changed, "uploaded from the box")


def relist(listing: Listing, rows: object, box: str) -> Listing:
    """The listing with the files the box uploaded as a snapshot taken after it (training
    rewrote them in between): those bytes were sent, so they are what the Hub is checked
    against and what the push's record names. Rows are checked as a listing's are, and
    only files of this listing may be relisted."""
    if not rows:
        return listing
    fresh = {f.name: f for f in check_listing(rows, True, box)}
    if not fresh.keys() <= {f.name for f in listing.files}:
        raise PushError(f"box {box} relisted a file this push did not send: refused")
    return replace(listing, files=tuple(fresh.get(f.name, f) for f in listing.files),
                   unsteady=tuple(n for n in listing.unsteady if n not in fresh))


async def push_hub_from_panel(conn: asyncssh.SSHClientConnection, box: str, run_path: str,
                              run_name: str, listing: Listing, repo: str, *,
                              local_dir: str | None, token: str | None, endpoint: str | None,
                              progress: Progress | None, idle_seconds: float,
                              folder: str | None = None,
                              stall_seconds: float = STALL_SECONDS) -> PushResult:
    """`upload_from = "panel"`: pull and verify here, upload from here, then ask the Hub.

    The token never leaves this machine. The files are staged in the box's
    local_dir folder when it has one (a second copy costs nothing there), else
    in a staging folder that is removed once the Hub holds them.
    """
    prefix = folder or safe_run_path(run_name)
    destination = f"hf://{repo}/{prefix}/"

    def result(verified: bool, message: str) -> PushResult:
        return PushResult(box, run_name, run_path, destination, listing.files, verified,
                          "done" if verified else "failed", scrub(message, token), FROM_PANEL)

    if local_dir:
        base, parts = _local_parts(local_dir, box, prefix)
        staging = None
    else:
        base, parts = paths.state_dir() / "staging", [safe_component(box),
                                                      *prefix.split("/")]
        staging = base.joinpath(*parts)
    ok, words, _, dest, listing = await pull_run(conn, box, run_path, run_name, listing, base,
                                                 parts, progress, idle_seconds, stall_seconds)
    if not ok:
        return result(False, f"not uploaded: {words}")
    try:
        commit = await upload_from_panel(
            repo, [(f"{prefix}/{f.name}", dest / f.name) for f in listing.files],
            f"Push run {prefix} from box {box}", token=token, endpoint=endpoint)
    except HubError as exc:
        return result(False, f"{exc.message}; the files are verified in {dest}/; {UNTOUCHED}")
    verdict = await _verify_at_hub(result, listing, repo, prefix, commit, destination, token,
                                   endpoint, run_name, box, (), FROM_PANEL)
    if verdict.verified and staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
    return verdict


def _commit_note(commits: list[str]) -> str:
    if commits:
        return f"commit {commits[-1][:12]} was made but not verified"
    return "nothing was committed"


def _hub_error(answer: dict[str, Any], box: str, repo: str, destination: str,
               commits: list[str], token: str | None) -> str:
    kind, error = answer.get("kind"), scrub(str(answer.get("error")), token)
    if kind == "no_hub":
        return (f"huggingface_hub is not installed on box {box} (import failed: {error}): "
                f"pip install huggingface_hub there (or set upload_from = \"panel\"); nothing "
                f"was uploaded and {UNTOUCHED}")
    if kind == "not_found":
        return (f"the Hub has no repo {repo} this token can write to (create it, e.g. "
                f"`hf repo create {repo}`); nothing was committed; {UNTOUCHED}")
    if kind == "auth":
        return (f"the Hub refused the token for {repo} ({error}); set HF_TOKEN (or the box's "
                f"token_env) or log in on the panel's machine; {_commit_note(commits)}; "
                f"{UNTOUCHED}")
    stage = answer.get("stage")
    return (f"pushing to {destination} from box {box} failed at "
            f"{clean(stage) if isinstance(stage, str) else 'running'}: {error}; "
            f"{_commit_note(commits)}; {UNTOUCHED}")


# -- the action -----------------------------------------------------------------------

async def push_run(session: BoxSession, box: BoxConfig, run_path: str, run_name: str, *,
                   include_epochs: Epochs = False, progress: Progress | None = None,
                   token: str | None = None, hub_endpoint: str | None = None,
                   stall_seconds: float = STALL_SECONDS) -> list[PushResult]:
    """Push one run to every destination of its box; one result per destination.

    Each program on the box is stopped once nothing moves for `stall_seconds` (no file
    bytes, no step done), and in all after deadline(): the box's claimed sizes never
    set how long it may hold the box.

    Failures come back as results (outcome "failed", and what is still safe),
    not exceptions; only a box with no destination at all raises ValueError,
    so an empty list can never be mistaken for "all verified".
    """
    push = box.push
    targets: list[tuple[str, str]] = []
    if push is not None and push.local_dir:
        targets.append(("local", push.local_dir))
    if push is not None and push.hf_repo:
        targets.append(("hf", push.hf_repo))
    if push is None or not targets:
        raise ValueError(f"box {box.name} has no push destination: set hf_repo or local_dir "
                         f"under [box.push]")
    idle = max(session.timeout, MIN_IDLE_SECONDS)
    folder = run_folder(run_name, run_path, len(box.runs_roots))
    problem: str | None = None
    hub_token: str | None = None
    try:
        if push.hf_repo:
            hub_token, _ = box_token(box, token)
        conn = await session.connection()
        listing = await list_run(conn, box.name, run_path, include_epochs, idle, stall_seconds)
    except (BoxError, PushError, HubError) as exc:
        problem = f"{exc.message}; {UNTOUCHED}"
    else:
        if not listing.files:
            problem = (f"nothing to push: run {run_name!r} on box {box.name} holds none of "
                       f"{', '.join(push_box.FIXED_FILES)}; {UNTOUCHED}")
    if problem is not None:
        return [PushResult(box.name, run_name, run_path, _destination(box.name, folder, kind,
                                                                      where),
                           (), False, "failed", clean_block(problem)) for kind, where in targets]
    results = []
    endpoint = hub_endpoint or os.environ.get("HF_ENDPOINT")
    for kind, where in targets:
        if kind == "local":
            results.append(await push_local(conn, box.name, run_path, run_name, listing, where,
                                            progress, idle, folder, stall_seconds))
        elif push.upload_from == "panel":
            results.append(await push_hub_from_panel(
                conn, box.name, run_path, run_name, listing, where, local_dir=push.local_dir,
                token=hub_token, endpoint=endpoint, progress=progress, idle_seconds=idle,
                folder=folder, stall_seconds=stall_seconds))
        else:
            results.append(await push_hub(
                conn, box.name, run_path, run_name, listing, where, token=hub_token,
                endpoint=endpoint, progress=progress, idle_seconds=idle, folder=folder,
                stall_seconds=stall_seconds))
    return results


def _destination(box: str, folder: str, kind: str, where: str) -> str:
    if kind == "hf":
        return f"hf://{where}/{folder}/"
    base, parts = _local_parts(where, box, folder)
    return f"{base.joinpath(*parts)}/"
