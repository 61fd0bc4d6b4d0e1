"""Run one configured command on a box over its kept-open SSH session, and say how it ended.

A manual box's stop_command or destroy_command is the user's own line, run
as-is. What comes back keeps apart what a caller must not confuse: the
command never started (nothing happened), it exited with a status, or the
connection was lost or timed out while it ran (a shutdown looks like that,
so whether it worked is unknown).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncssh

from tui.remote.session import BoxError, BoxSession

STDERR_TAIL_CHARS = 300


@dataclass(frozen=True)
class CommandResult:
    """How one remote command ended."""

    ended: str                # "exited" | "not_started" | "lost" | "timeout" | "signal"
    exit_status: int | None = None
    stderr_tail: str = ""
    reason: str = ""          # words for every ending but "exited"


def tail(text: str, chars: int = STDERR_TAIL_CHARS) -> str:
    """The last `chars` of a command's output, on one line."""
    words = " ".join(text.split())
    return words if len(words) <= chars else "..." + words[-(chars - 3):]


async def run_box_command(session: BoxSession, command: str, timeout: float) -> CommandResult:
    """Run `command` on the session's box; never raises for SSH or the command's own failures."""
    try:
        conn = await session.connection()
    except BoxError as exc:
        return CommandResult("not_started", reason=exc.message)
    try:
        result = await asyncio.wait_for(conn.run(command, check=False), timeout)
    except TimeoutError:
        return CommandResult("timeout", reason=f"it did not finish within {timeout:g} s")
    except asyncssh.ChannelOpenError as exc:
        return CommandResult("not_started", reason=f"the box refused a session: {exc.reason}")
    except (asyncssh.Error, OSError) as exc:
        return CommandResult("lost", reason=f"the SSH connection was lost while it ran "
                                            f"({exc or type(exc).__name__})")
    stderr = result.stderr if isinstance(result.stderr, str) else ""
    if result.exit_status is None or result.exit_status < 0:
        signal = result.exit_signal[0] if result.exit_signal else "unknown"
        return CommandResult("signal", stderr_tail=tail(stderr),
                             reason=f"it ended without an exit status (signal {signal})")
    return CommandResult("exited", result.exit_status, tail(stderr))
