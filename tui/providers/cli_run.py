"""A provider's own CLI (`modal`, `beam`) run as a subprocess: argv only, never a shell;
the user's environment passed through (their login stays theirs); stdout and stderr
bounded, the call bounded in time, the child killed when it overruns either."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tui.model.serverless import ServerlessError

STDOUT_LIMIT = 4 << 20
STDERR_LIMIT = 64 << 10
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Ran:
    """What one call left: its exit status, its stdout (bounded) and stderr's tail."""

    code: int
    stdout: bytes
    stderr: str


def find_cli(cli: str, env: Mapping[str, str] | None) -> str:
    """The executable `cli` names (a path, or a name looked up on the env's PATH)."""
    path = (env or os.environ).get("PATH", os.defpath)
    found = cli if os.sep in cli else shutil.which(cli, path=path)
    if os.sep in cli and not os.path.isfile(cli):
        raise ServerlessError("cli_missing", f"{os.path.basename(cli)} not found at {cli} "
                              "(the config's `cli`): fix the path, or install it "
                              f"(pip install {os.path.basename(cli)})")
    if found is None or not os.path.isfile(found):
        raise ServerlessError("cli_missing", f"{cli!r} is not on PATH: install it "
                              f"(pip install {os.path.basename(cli)}) or set `cli` to its path")
    if not os.access(found, os.X_OK):
        raise ServerlessError("cli_missing", f"{found} is not executable")
    return found


def child_env(env: Mapping[str, str] | None, extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment (or `env` in its place), plus `extra`."""
    merged = dict(os.environ if env is None else env)
    merged.update(extra)
    return merged


async def _read(stream: asyncio.StreamReader, limit: int, *, keep_tail: bool) -> tuple[
        bytes, bool]:
    """At most `limit` bytes (the head, or with `keep_tail` the last ones), and whether
    the stream said more."""
    kept = bytearray()
    over = False
    while chunk := await stream.read(_CHUNK):
        kept += chunk
        if len(kept) > limit:
            over = True
            if not keep_tail:
                return bytes(kept[:limit + 1]), True
            del kept[:len(kept) - limit]
    return bytes(kept), over


async def run_cli(cli: str, args: Sequence[str], *, env: Mapping[str, str] | None,
                  extra_env: Mapping[str, str], timeout: float, name: str,
                  stdout_limit: int = STDOUT_LIMIT) -> Ran:
    """Run `cli args...`; ServerlessError("failed") when it overruns its time or prints
    more than `stdout_limit` (then it is killed), ("cli_missing") when there is none."""
    exe = find_cli(cli, env)
    try:
        proc = await asyncio.create_subprocess_exec(
            exe, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=child_env(env, extra_env),
            start_new_session=True)
    except (FileNotFoundError, PermissionError) as exc:
        raise ServerlessError("cli_missing", f"{exe} could not be run: {exc.strerror}") \
            from None
    assert proc.stdout is not None and proc.stderr is not None
    out_task = asyncio.ensure_future(_read(proc.stdout, stdout_limit, keep_tail=False))
    err_task = asyncio.ensure_future(_read(proc.stderr, STDERR_LIMIT, keep_tail=True))
    try:
        async with asyncio.timeout(timeout):
            (out, over), (err, _) = await asyncio.gather(out_task, err_task)
            if over:
                _kill(proc)
                raise ServerlessError("failed", f"{name} printed more than "
                                      f"{stdout_limit} bytes: stopped reading it")
            code = await proc.wait()
    except TimeoutError:
        _kill(proc)
        raise ServerlessError("failed", f"{name} did not finish within {timeout:g} s") \
            from None
    finally:
        for task in (out_task, err_task):
            task.cancel()
        if proc.returncode is None:
            _kill(proc)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
    return Ran(code, out, err.decode("utf-8", "replace"))


def _kill(proc: asyncio.subprocess.Process) -> None:
    """The child and whatever it started (its own session) end now."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)
