"""Beam (beam.cloud) through its own `beam` CLI, the way its users run it.

An app is a Beam deployment name; its state comes from `beam deployment list
--format json` and `beam task list --format json`, a stop is `beam deployment stop
ID...`, a volume is read with `beam ls VOLUME/PATH` and `beam cp beam://VOLUME/PATH
LOCAL`. The CLI runs as a subprocess (argv only, never a shell) with the user's own
login (~/.beam/config.ini or BEAM_TOKEN in the environment, passed through, never in
argv), stdin closed so a login prompt ends at once instead of waiting, stdout capped
at 4 MiB (more is an error, not a short answer), stderr at its last 64 KiB, and a
timeout after which the CLI and its children are killed. docs/serverless-beam.md
gives the commands, their sources, and what Beam leaves undocumented.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.model import beam_output
from tui.model.redact import redact, secrets_in_env
from tui.model.serverless import STOP_TIMEOUT, AppState, ServerlessError, VolumeEntry
from tui.model.text import clean

STDOUT_CAP = 4 << 20
STDERR_CAP = 64 << 10
_CHUNK = 64 << 10
# A table wider than the terminal wraps its names over several lines; the CLI's
# renderer takes its width from COLUMNS when stdout is not a terminal.
_COLUMNS = "4096"
_GLOB = set("*?[")
_VERSIONS: dict[tuple[str, int, int, int], tuple[int, int, int]] = {}


@dataclass(frozen=True)
class _Answer:
    code: int
    stdout: str
    stderr: str
    env: Mapping[str, str]

    @property
    def text(self) -> str:
        return self.stderr + "\n" + self.stdout


# Variables that make the CLI's renderer draw colour or a terminal into a pipe.
_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The user's environment (their login with it), plus what keeps the output plain."""
    merged = {k: v for k, v in (os.environ if env is None else env).items()
              if k not in _FORCING}
    merged["COLUMNS"] = _COLUMNS
    merged["PYTHONIOENCODING"] = "utf-8"
    merged["NO_COLOR"] = "1"
    return merged


def _resolve(cli: str, env: Mapping[str, str]) -> str:
    """The CLI's path: an explicit path as given, else found on the subprocess's PATH."""
    if os.sep in cli:
        path = Path(cli)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    else:
        found = shutil.which(cli, path=env.get("PATH", os.defpath))
        if found:
            return found
    raise ServerlessError("cli_missing", f"the beam CLI ({clean(cli)}) is not installed "
                          "or not on PATH: install it with `pip install beam-client`")


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    data = bytearray()
    while chunk := await stream.read(_CHUNK):
        if len(data) + len(chunk) > cap:
            data.extend(chunk[:cap - len(data)])
            return bytes(data), True
        data.extend(chunk)
    return bytes(data), False


async def _read_tail(stream: asyncio.StreamReader, cap: int) -> bytes:
    data = bytearray()
    while chunk := await stream.read(_CHUNK):
        data.extend(chunk)
        if len(data) > cap:
            del data[:len(data) - cap]
    return bytes(data)


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


async def _run(argv: Sequence[str], env: dict[str, str], timeout: float,
               cwd: str | None = None) -> _Answer:
    """One bounded CLI call: its exit code and cleaned-later text, or ServerlessError."""
    what = " ".join(argv[1:3])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ServerlessError("cli_missing", f"the beam CLI could not be started "
                              f"({type(exc).__name__}): install it with "
                              "`pip install beam-client`") from None
    assert proc.stdout is not None and proc.stderr is not None
    err_task = asyncio.ensure_future(_read_tail(proc.stderr, STDERR_CAP))
    try:
        async with asyncio.timeout(timeout):
            out, overflow = await _read_capped(proc.stdout, STDOUT_CAP)
            if overflow:
                _kill(proc)
            err = await err_task
            code = await proc.wait()
    except TimeoutError:
        raise ServerlessError("failed", f"beam {what} did not answer within "
                              f"{timeout:g} s; it was stopped") from None
    finally:
        _kill(proc)
        err_task.cancel()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
    if overflow:
        raise ServerlessError("failed", f"beam {what} printed more than "
                              f"{STDOUT_CAP >> 20} MiB; its answer was not read")
    return _Answer(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), env)


def _failure(answer: _Answer, what: str, *, volume: bool = False,
             kind: str | None = None) -> ServerlessError:
    """The CLI's failure in the contract's words: its kind, its own last line (cleaned,
    any secret of the environment it ran in starred), and what to do."""
    kind = kind or beam_output.failure_kind(answer.text, volume=volume)
    said = beam_output.last_line(answer.stdout) or beam_output.last_line(answer.stderr)
    said = redact(said, secrets_in_env(answer.env, ("BEAM_TOKEN", "BETA9_TOKEN")))
    hints = {"not_logged_in": "log in with `beam config create` or set BEAM_TOKEN",
             "cli_too_old": "upgrade with `pip install --upgrade beam-client`"}
    hint = f"; {hints[kind]}" if kind in hints else ""
    said = said or f"exit {answer.code}"
    # The CLI's last line alone may be a prompt (`Token:`) or half a notice (`Minimum:
    # 0.3.0`): the kind goes first, in words, and the line follows as the CLI's own.
    label = _LABELS.get(kind)
    if label and label.lower() not in said.lower():
        said = f"{label} (the CLI said: {said})"
    return ServerlessError(kind, f"beam {what}: {said}{hint}")


_LABELS = {"not_logged_in": "not logged in", "cli_too_old": "CLI too old"}


async def _checked(cli: str, env: Mapping[str, str] | None,
                   timeout: float) -> tuple[str, dict[str, str]]:
    """The CLI's path and the environment to run it in, once its version is known good.

    `beam --version` runs once per installed CLI (keyed by its file), not per call:
    every `beam` start costs a Python start and a version check of its own."""
    full_env = _env(env)
    path = _resolve(cli, full_env)
    try:
        stat = os.stat(path)
    except OSError:
        raise ServerlessError("cli_missing", f"the beam CLI at {clean(path)} is gone") from None
    key = (path, stat.st_mtime_ns, stat.st_size, stat.st_ino)
    version = _VERSIONS.get(key)
    if version is None:
        answer = await _run([path, "--version"], full_env, timeout)
        found = beam_output.version_of(answer.stdout)
        if answer.code != 0 or found is None:
            raise _failure(answer, "--version")
        version = found
        _VERSIONS[key] = version
    if version < beam_output.MIN_VERSION:
        have = ".".join(map(str, version))
        need = ".".join(map(str, beam_output.MIN_VERSION))
        raise ServerlessError("cli_too_old", f"beam CLI {have} is older than {need}, the "
                              "oldest gpurent-tui reads: upgrade with "
                              "`pip install --upgrade beam-client`")
    return path, full_env


def _app_name(app: str) -> str:
    if (not app or len(app) > 200 or app.startswith("-") or "=" in app or "," in app
            or clean(app) != app or app.strip() != app):
        raise ServerlessError("failed", f"{clean(app[:200])!r} is not a Beam deployment "
                              "name gpurent-tui can ask for")
    return app


def _volume_path(volume: str, path: str, *, listing: bool = False) -> tuple[str, str]:
    """The volume name and a clean '/'-separated path in it, or a clear refusal."""
    if (not volume or len(volume) > 200 or volume.startswith("-") or "/" in volume
            or clean(volume) != volume or ":" in volume):
        raise ServerlessError("failed", f"{clean(volume[:200])!r} is not a volume name")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    rel = "/".join(parts)
    if ".." in parts or clean(rel) != rel or len(rel) > 4096:
        raise ServerlessError("failed", f"{clean(path[:200])!r} is not a path on "
                              f"volume {volume}")
    if listing and _GLOB & set(rel):
        raise ServerlessError("failed", f"{clean(rel[:200])!r}: `beam ls` reads * ? [ as "
                              "patterns; gpurent-tui lists plain paths only")
    return volume, rel


async def _deployments(path: str, env: dict[str, str], app: str,
                       timeout: float) -> list[Mapping[str, Any]]:
    argv = [path, "deployment", "list", "--format", "json", "--limit", "100",
            "--filter", f"name={app}"]
    answer = await _run(argv, env, timeout)
    if answer.code != 0:
        raise _failure(answer, "deployment list")
    try:
        records = await asyncio.to_thread(beam_output.json_list, answer.stdout)
    except ValueError as exc:
        kind = beam_output.failure_kind(answer.text)
        if kind != "failed":
            raise _failure(answer, "deployment list", kind=kind) from None
        raise ServerlessError("failed", f"beam deployment list: {exc}; "
                              f"{beam_output.last_line(answer.stdout)}") from None
    return beam_output.named(records, app)


async def app_state(app: str, *, cli: str = "beam", env: Mapping[str, str] | None = None,
                    timeout: float = 20.0) -> AppState:
    """The app (a Beam deployment name): running, stopped or missing, and its running
    tasks with the earliest task's start as the run's start."""
    _app_name(app)
    path, full_env = await _checked(cli, env, timeout)
    mine = await _deployments(path, full_env, app, timeout)
    if not mine:
        return beam_output.app_state(app, [], [])
    stubs = [beam_output.safe_id(d.get("stub_id")) for d in mine]
    argv = [path, "task", "list", "--format", "json", "--limit", "1000",
            "--filter", "status=running"]
    if stubs and all(stubs):
        argv += ["--filter", "stub-id=" + ",".join(s for s in stubs if s)]
    answer = await _run(argv, full_env, timeout)
    if answer.code != 0:
        raise _failure(answer, "task list")
    try:
        tasks = await asyncio.to_thread(beam_output.json_list, answer.stdout)
    except ValueError as exc:
        raise ServerlessError("failed", f"beam task list: {exc}; "
                              f"{beam_output.last_line(answer.stdout)}") from None
    return beam_output.app_state(app, mine, tasks)


async def stop_app(app: str, *, cli: str = "beam", env: Mapping[str, str] | None = None,
                   timeout: float = STOP_TIMEOUT) -> None:
    """Stop every active version of the app (`beam deployment stop ID...`).

    An app already stopped is left alone. The CLI exits 0 even when a stop is refused
    (it prints a cross line and goes on), so each id must be confirmed in its output.
    The stop may take effect a moment later: read app_state to see it."""
    _app_name(app)
    path, full_env = await _checked(cli, env, timeout)
    mine = await _deployments(path, full_env, app, timeout)
    if not mine:
        raise ServerlessError("app_not_found", f"beam: no deployment named {app!r} "
                              "(beam deployment list)")
    ids = beam_output.active_ids(mine)
    if not ids:
        return
    answer = await _run([path, "deployment", "stop", *ids], full_env, timeout)
    stopped = {line.split("Stopped deployment:", 1)[1].strip()
               for line in answer.stdout.splitlines() if "Stopped deployment:" in line}
    if answer.code != 0 or not set(ids) <= stopped:
        raise _failure(answer, "deployment stop")


def _remote(volume: str, rel: str) -> str:
    return f"beam://{volume}/{rel}"


async def list_volume(volume: str, path: str, *, cli: str = "beam",
                      env: Mapping[str, str] | None = None,
                      timeout: float = 20.0) -> list[VolumeEntry]:
    """The entries of a folder on a volume (`beam ls VOLUME/PATH`).

    Beam lists a missing path as an empty table (exit 0), so an empty listing of a
    folder other than the root is said as path_missing: Beam cannot tell an empty
    folder from a missing one."""
    volume, rel = _volume_path(volume, path, listing=True)
    cli_path, full_env = await _checked(cli, env, timeout)
    target = f"{volume}/{rel}" if rel else volume
    answer = await _run([cli_path, "ls", target], full_env, timeout)
    if answer.code != 0:
        raise _failure(answer, f"ls {target}", volume=True)
    try:
        # Off the event loop: a listing near the 4 MiB cap takes a good fraction of a
        # second to read (benchmarks/beam_cli.py), and the panel must keep drawing.
        entries = await asyncio.to_thread(beam_output.ls_entries, answer.stdout, rel,
                                          time.time())
    except ValueError as exc:
        kind = beam_output.failure_kind(answer.text, volume=True)
        if kind != "failed":
            raise _failure(answer, f"ls {target}", volume=True, kind=kind) from None
        raise ServerlessError("failed", f"beam ls {clean(target)}: {exc}") from None
    if not entries and rel:
        raise ServerlessError("path_missing", f"beam ls {clean(target)}: nothing there "
                              "(Beam lists a missing path and an empty folder alike)")
    return entries


async def _download(volume: str, path: str, into: Path, cli: str,
                    env: Mapping[str, str] | None, timeout: float) -> Path:
    """`beam cp beam://VOLUME/PATH file` run inside `into` (the CLI names its progress
    by the destination's path under its working folder, and fails for one outside)."""
    volume, rel = _volume_path(volume, path)
    if not rel:
        raise ServerlessError("failed", f"no file named on volume {volume}")
    cli_path, full_env = await _checked(cli, env, timeout)
    answer = await _run([cli_path, "cp", _remote(volume, rel), "file"], full_env, timeout,
                        cwd=str(into))
    what = f"cp {_remote(volume, rel)}"
    if answer.code != 0:
        raise _failure(answer, what, volume=True)
    got = into / "file"
    if got.is_dir():
        raise ServerlessError("failed", f"beam {clean(what)}: that is a folder, not a file")
    if not got.is_file():
        raise ServerlessError("path_missing", f"beam {clean(what)}: nothing was copied")
    return got


async def read_volume_file(volume: str, path: str, *, limit: int = 1 << 20,
                           cli: str = "beam", env: Mapping[str, str] | None = None,
                           timeout: float = 20.0) -> bytes:
    """A small file from a volume (status.json), at most `limit` bytes.

    The CLI writes only to disk: the file lands in a private temporary folder, is
    measured before it is read, and the folder is removed."""
    into = _private_folder(None)
    try:
        got = await _download(volume, path, into, cli, env, timeout)
        try:
            if got.stat().st_size > limit:
                raise ServerlessError("failed", f"{clean(volume)}/{clean(path)} is larger "
                                      f"than {limit} bytes; not read")
            with got.open("rb") as handle:
                return handle.read(limit + 1)[:limit]
        except OSError as exc:
            raise ServerlessError("failed", f"reading the copy of {clean(volume)}/"
                                  f"{clean(path)}: {clean(str(exc))}") from None
    finally:
        shutil.rmtree(into, ignore_errors=True)


async def fetch_volume_file(volume: str, path: str, dest: Path, *, cli: str = "beam",
                            env: Mapping[str, str] | None = None,
                            timeout: float = 600.0) -> None:
    """Copy a file from a volume to `dest`: whole or not at all (a temporary name beside
    dest, renamed into place once the CLI says it is done)."""
    into = _private_folder(dest.parent)
    try:
        got = await _download(volume, path, into, cli, env, timeout)
        try:
            os.replace(got, dest)
        except OSError as exc:
            raise ServerlessError("failed", f"could not put the copy at {clean(str(dest))}: "
                                  f"{clean(str(exc))}") from None
    finally:
        shutil.rmtree(into, ignore_errors=True)


def _private_folder(beside: Path | None) -> Path:
    """A fresh folder only we can read: in the system's temporary place, or beside the
    destination (same file system, so the finished copy is renamed, not copied)."""
    try:
        if beside is not None:
            beside.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".gpurent-beam-", dir=beside))
    except OSError as exc:
        raise ServerlessError("failed", f"no room for a download in "
                              f"{clean(str(beside or tempfile.gettempdir()))}: "
                              f"{clean(str(exc))}") from None
