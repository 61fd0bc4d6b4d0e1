"""Modal through its own CLI (`modal`), as its users run it: the serverless adapter.

Each function runs one documented command (docs/serverless.md) with the user's own
login, reads its output with tui.model.modal_output, and raises ServerlessError with a
kind and the fix. The CLI's version is checked once per executable (and environment):
an older client prints other JSON keys, and is said as too old, never misread.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tui.model.modal_output import app_from_list, classify, version_problem, volume_entries
from tui.model.serverless import STOP_TIMEOUT, AppState, ServerlessError, VolumeEntry
from tui.providers.cli_run import Ran, find_cli, run_cli

PROVIDER = "modal"
# TZ: the listing's times in UTC (the CLI prints them in the local zone, to the minute);
# COLUMNS: an error's box is not wrapped mid-word; NO_COLOR/TERM: no colour sequences.
_EXTRA_ENV = {"TZ": "UTC", "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
_checked: dict[tuple[str, int, int, int], ServerlessError | None] = {}


async def _modal(args: list[str], *, cli: str, env: Mapping[str, str] | None,
                 timeout: float, stdout_limit: int | None = None) -> Ran:
    await _check_version(cli, env, timeout)
    extra = {} if stdout_limit is None else {"stdout_limit": stdout_limit}
    return await run_cli(cli, args, env=env, extra_env=_EXTRA_ENV, timeout=timeout,
                         name=f"modal {' '.join(args[:2])}", **extra)


async def _check_version(cli: str, env: Mapping[str, str] | None, timeout: float) -> None:
    exe = find_cli(cli, env)
    stat = os.stat(exe)
    key = (exe, stat.st_mtime_ns, stat.st_size, hash(frozenset((env or os.environ).items())))
    if key not in _checked:
        ran = await run_cli(exe, ["--version"], env=env, extra_env=_EXTRA_ENV,
                            timeout=timeout, name="modal --version", stdout_limit=4096)
        _checked[key] = version_problem(ran.stdout.decode("utf-8", "replace")) \
            if ran.code == 0 else classify(ran.stderr, what="app")
    problem = _checked[key]
    if problem is not None:
        _checked.pop(key, None)  # an upgrade in place is seen on the next call
        raise problem


async def app_state(app: str, *, cli: str = "modal", env: Mapping[str, str] | None = None,
                    timeout: float = 20.0) -> AppState:
    """The app as `modal app list --json` reads it (state `missing` when it is not there)."""
    ran = await _modal(["app", "list", "--json"], cli=cli, env=env, timeout=timeout)
    if ran.code != 0:
        raise classify(ran.stderr, what="app")
    return app_from_list(ran.stdout, app)


async def list_volume(volume: str, path: str, *, cli: str = "modal",
                      env: Mapping[str, str] | None = None,
                      timeout: float = 20.0) -> list[VolumeEntry]:
    """One folder of the volume (`modal volume ls --json VOLUME PATH`)."""
    ran = await _modal(["volume", "ls", "--json", "--", volume, path or "/"], cli=cli,
                       env=env, timeout=timeout)
    if ran.code != 0:
        raise classify(ran.stderr, what="volume")
    return volume_entries(ran.stdout)


async def read_volume_file(volume: str, path: str, *, limit: int = 1 << 20,
                           cli: str = "modal", env: Mapping[str, str] | None = None,
                           timeout: float = 20.0) -> bytes:
    """A small file's bytes (`modal volume get VOLUME PATH -`), at most `limit`."""
    try:
        ran = await _modal(["volume", "get", "--", volume, path, "-"], cli=cli, env=env,
                           timeout=timeout, stdout_limit=limit)
    except ServerlessError as exc:
        if "printed more than" in str(exc):
            raise ServerlessError("failed", f"{volume}:{path} is larger than {limit} "
                                  "bytes: not read") from None
        raise
    if ran.code != 0:
        raise classify(ran.stderr, what="volume")
    return ran.stdout


async def fetch_volume_file(volume: str, path: str, dest: Path, *, cli: str = "modal",
                            env: Mapping[str, str] | None = None,
                            timeout: float = 600.0) -> None:
    """Copy one file to `dest` (`modal volume get --force VOLUME PATH TEMP`), whole or not
    at all: the CLI writes into a fresh private folder beside `dest`, and its file is
    renamed over `dest` only once the CLI says it is done, so a failure never leaves a
    partial file at `dest` nor harms a good one already there. path_missing when nothing
    arrived (the CLI may exit 0 for a path with no entries)."""
    into = _private_folder(dest.parent)
    got = into / "file"
    try:
        ran = await _modal(["volume", "get", "--force", "--", volume, path, str(got)],
                           cli=cli, env=env, timeout=timeout, stdout_limit=1 << 20)
        if ran.code != 0:
            raise classify(ran.stderr, what="volume")
        if got.is_dir():
            raise ServerlessError("failed", f"modal volume get {volume} {path}: that is a "
                                  "folder, not a file")
        if not got.is_file():
            raise ServerlessError("path_missing", f"modal volume get {volume} {path}: "
                                  "no file arrived (no such file on the volume?)")
        try:
            os.replace(got, dest)
        except OSError as exc:
            raise ServerlessError("failed", f"could not put the copy at {dest}: "
                                  f"{exc.strerror or type(exc).__name__}") from None
    finally:
        shutil.rmtree(into, ignore_errors=True)


def _private_folder(beside: Path) -> Path:
    """A fresh folder only we can read, beside the destination (same file system: the
    finished copy is renamed into place, not copied)."""
    try:
        beside.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".gpurent-modal-", dir=beside))
    except OSError as exc:
        raise ServerlessError("failed", f"no room for a download in {beside}: "
                              f"{exc.strerror or type(exc).__name__}") from None


async def stop_app(app: str, *, cli: str = "modal", env: Mapping[str, str] | None = None,
                   timeout: float = STOP_TIMEOUT) -> str | None:
    """`modal app stop --yes APP`; an app already stopped is no failure: the CLI's words
    for it come back (the report says so instead of "accepted"), else None."""
    ran = await _modal(["app", "stop", "--yes", "--", app], cli=cli, env=env,
                       timeout=timeout)
    said = (ran.stderr[-4096:] + ran.stdout[-4096:].decode("utf-8", "replace")).lower()
    if "already stopped" in said:
        return "the CLI said it was already stopped"
    if ran.code != 0:
        raise classify(ran.stderr, what="app")
    return None
