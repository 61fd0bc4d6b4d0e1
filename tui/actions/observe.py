"""Whether a manual box's stop or destroy took effect, seen from the panel's side.

A `destroy_command` that exits 0 says only that the command ran. The effect
is observed one of two ways: the user's `observe_command`, run on the panel's
machine until it exits 0 (it might ask a provider's console, or a hypervisor,
whether the machine is gone), or else the box itself: it must stop answering
SSH (a fresh connection refused, unroutable or timing out, twice in a row).
A box that still logs us in, or refuses our key or host key, is answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tui.actions.box_command import tail
from tui.model.box import Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxError, BoxSession

Sleep = Callable[[float], Awaitable[Any]]
Clock = Callable[[], float]
DOWN = (Connection.UNREACHABLE, Connection.TIMEOUT)
DOWN_IN_A_ROW = 2
OUTPUT_CAP = 1 << 16


@dataclass(frozen=True)
class Observed:
    seen: bool
    how: str  # what was seen, or why nothing was


async def _run_local(command: str, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """The user's own command on this machine: (exit status or None on timeout, output tail)."""
    proc = await asyncio.create_subprocess_shell(
        command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True)
    assert proc.stdout is not None
    kept = b""
    try:
        async with asyncio.timeout(timeout):
            while data := await proc.stdout.read(OUTPUT_CAP):
                kept = (kept + data)[-OUTPUT_CAP:]
            return await proc.wait(), tail(kept.decode("utf-8", "replace"))
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None, tail(kept.decode("utf-8", "replace"))


async def _answers_ssh(box: BoxConfig, fleet: FleetConfig, timeout: float) -> str | None:
    """None when the box no longer answers SSH; else how it still answered."""
    session = BoxSession(box, fleet, host_key_store(fleet))
    session.timeout = min(session.timeout, timeout)
    try:
        await session.connection()
    except BoxError as exc:
        return None if exc.connection in DOWN else f"it still answers SSH ({exc.connection})"
    finally:
        await session.close()
    return "it still answers SSH (a login succeeded)"


async def observe_manual(action: str, box: BoxConfig, fleet: FleetConfig, *,
                         observe_timeout: float, poll_interval: float, sleep: Sleep,
                         clock: Clock) -> Observed:
    """Watch for the effect of a manual box's stop or destroy until `observe_timeout`."""
    deadline = clock() + observe_timeout
    last = "nothing was observed"
    down = 0
    while True:
        if box.observe_command:
            env = {**os.environ, "GPURENT_BOX": box.name, "GPURENT_ACTION": action,
                   "GPURENT_HOST": box.host}
            status, said = await _run_local(box.observe_command, env,
                                            max(1.0, min(30.0, deadline - clock())))
            if status == 0:
                return Observed(True, "its observe_command exited 0")
            last = (f"its observe_command {'timed out' if status is None else f'exited {status}'}"
                    + (f": {said}" if said else ""))
        else:
            still = await _answers_ssh(box, fleet, max(1.0, min(10.0, poll_interval * 3)))
            if still is None:
                down += 1
                if down >= DOWN_IN_A_ROW:
                    return Observed(True, "the box no longer answers SSH")
                last = "the box stopped answering SSH once"
            else:
                down, last = 0, still
        if clock() >= deadline:
            return Observed(False, f"{last} (watched {observe_timeout:g} s)")
        await sleep(poll_interval)
