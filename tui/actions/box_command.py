"""Run one configured command on a box over its kept-open SSH session, and say how it ended.

A manual box's stop_command or destroy_command is the user's own line, run
as-is. What comes back keeps apart what a caller must not confuse: the
command never started (nothing happened), it exited with a status, or the
connection was lost or timed out while it ran (a shutdown looks like that,
so whether it worked is unknown). An endpoint that runs no commands at all
(RunPod's basic proxy: it refuses them, or closes them in silence or asking
for a terminal) reads "not_started", with the way to reach the box instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncssh

from tui.remote.channel import PTY_ONLY_FIX, Ending, no_answer, pty_only
from tui.remote.framing import new_nonce
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
        return CommandResult("not_started", reason=_refused(exc))
    except (asyncssh.Error, OSError) as exc:
        return CommandResult("lost", reason=f"the SSH connection was lost while it ran "
                                            f"({exc or type(exc).__name__})")
    stderr = result.stderr if isinstance(result.stderr, str) else ""
    stdout = result.stdout if isinstance(result.stdout, str) else ""
    ending = Ending(result.exit_status, None, len(stdout), stderr.strip(), False, stdout[-2000:])
    if result.exit_status is not None and pty_only(ending) \
            and await _runs_no_command(conn, timeout):
        words = no_answer(session.box.name, "command", ending).message
        return CommandResult("not_started",
                             reason=words.removeprefix(f"box {session.box.name}: "))
    if result.exit_status is None or result.exit_status < 0:
        signal = result.exit_signal[0] if result.exit_signal else "unknown"
        return CommandResult("signal", stderr_tail=tail(stderr),
                             reason=f"it ended without an exit status (signal {signal})")
    return CommandResult("exited", result.exit_status, tail(stderr))


def _refused(exc: asyncssh.ChannelOpenError) -> str:
    if exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED:  # an exec request turned down
        return f"the SSH server refused to run a command ({exc.reason}): {PTY_ONLY_FIX}"
    return f"the box refused a session: {exc.reason}"


async def _runs_no_command(conn: asyncssh.SSHClientConnection, timeout: float) -> bool:
    """After a command ended in silence (or asking for a terminal), ask the endpoint to echo
    a fresh nonce: a box that runs commands echoes it (banner or not), a PTY-only endpoint
    does not, and answers it the same way (in silence, or asking for a terminal). Anything
    else proves nothing (False): a lost connection, a refusal, or a box that runs commands
    but turns this one down with words of its own (a forced command that allows only some
    commands still ran the user's stop_command)."""
    nonce = new_nonce()
    try:
        check = await asyncio.wait_for(conn.run(f"echo {nonce}", check=False), timeout)
    except (TimeoutError, asyncssh.Error, OSError):
        return False
    out = check.stdout if isinstance(check.stdout, str) else ""
    err = check.stderr if isinstance(check.stderr, str) else ""
    if check.exit_status is None or nonce in out:
        return False
    return pty_only(Ending(check.exit_status, None, len(out), err.strip(), False, out[-2000:]))
