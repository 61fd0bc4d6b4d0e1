"""One program running on a box over one SSH channel: frames out of its stdout, bounded.

Everything read from the box is bounded: frames by `max_frame` and noise by
`max_noise` (tui.remote.framing), stderr by keeping only its tail. When the
program ends without a frame, `no_answer` turns what is known (exit status,
signal, output, whether the connection is gone) into the state and the words
the box shows. A bounded tail of stdout is kept too: an endpoint that wants a
terminal may say so on either stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass

import asyncssh

from tui.model.box import Connection
from tui.remote.errors import BoxError
from tui.remote.framing import FrameError, FrameReader

CHUNK = 1 << 16
# stdout is read a whole channel window at a time (see tui.actions.boxprog.READ_BYTES):
# asyncssh opens the window again on each packet it hands on, not on what was read.
STDOUT_READ = 1 << 22
STDERR_TAIL = 2000
STDOUT_TAIL = 2000  # what a PTY-only endpoint printed on stdout, matched against its complaint
MAX_NOISE = 1 << 20
_ASKS_FOR_A_TERMINAL = re.compile(r"\bpty\b|pseudo-terminal", re.IGNORECASE)
PTY_ONLY_FIX = ("this endpoint only offers interactive shells (RunPod's basic proxy); use the "
                "pod's public IP and TCP port (SSH over exposed TCP)")


@dataclass(frozen=True)
class Ending:
    """How a program's channel ended, when it ended without the answer we waited for."""

    exit_status: int | None
    exit_signal: str | None
    stdout_bytes: int
    stderr: str
    connection_lost: bool
    stdout_tail: str = ""  # the last bytes of stdout, decoded: only ever matched, never shown


class OnboxProcess:
    """A started program: `send` to its stdin, `next_frame` from its stdout."""

    def __init__(self, proc: asyncssh.SSHClientProcess[bytes]) -> None:
        self.proc = proc
        self.stdout_bytes = 0
        self.stderr_bytes = 0
        self.bytes_out = 0
        self.frames = 0
        self._stderr_tail = b""
        self._stdout_tail = b""
        self._reader: FrameReader | None = None  # frames of the nonce asked for last
        self._nonce = ""
        self._queued: list[bytes] = []
        self._eof = False
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    @classmethod
    async def start(cls, conn: asyncssh.SSHClientConnection, command: str) -> OnboxProcess:
        """Open a session channel running `command`. Raises asyncssh's errors as they come."""
        proc = await conn.create_process(command, encoding=None)
        return cls(proc)

    @property
    def alive(self) -> bool:
        """False once stdout ended or the channel closed: the program can answer no more."""
        return not self._eof and self.proc.exit_status is None \
            and self.proc.exit_signal is None and not self.proc.is_closing()

    @property
    def stderr(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace")

    def send(self, data: bytes, *, eof: bool = False) -> None:
        self.proc.stdin.write(data)
        self.bytes_out += len(data)
        if eof:
            self.proc.stdin.write_eof()

    async def _drain_stderr(self) -> None:
        """Read stderr as it comes (an unread stream would stall the program), keep a tail."""
        with contextlib.suppress(asyncssh.Error, OSError):
            while data := await self.proc.stderr.read(CHUNK):
                self.stderr_bytes += len(data)
                self._stderr_tail = (self._stderr_tail + data)[-STDERR_TAIL:]

    async def next_frame(self, nonce: str, *, max_frame: int,
                         max_noise: int = MAX_NOISE) -> bytes | None:
        """The next frame with `nonce`; None if stdout ends first. FrameError if the
        output breaks a cap; asyncssh/OS errors if the connection fails under it."""
        if self._reader is None or self._nonce != nonce:
            rest = self._reader.take_rest() if self._reader is not None else b""
            self._reader, self._nonce, self._queued = (
                FrameReader(nonce, max_frame=max_frame, max_noise=max_noise), nonce, [])
            self._queued.extend(self._reader.feed(rest))
        while not self._queued:
            if self._eof:
                return None
            data = await self.proc.stdout.read(STDOUT_READ)
            if not data:
                self._eof = True
                if self._reader.in_frame:
                    raise FrameError("the answer was cut short")
                return None
            self.stdout_bytes += len(data)
            self._stdout_tail = (self._stdout_tail + data)[-STDOUT_TAIL:]
            self._queued.extend(self._reader.feed(data))
        self.frames += 1
        return self._queued.pop(0)

    async def ending(self, conn: asyncssh.SSHClientConnection, lost: bool,
                     wait: float = 2.0) -> Ending:
        """Wait (briefly) for the channel to close, then say how the program ended."""
        with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
            await asyncio.wait_for(self.proc.wait_closed(), wait)
        with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.5)
        signal = self.proc.exit_signal[0] if self.proc.exit_signal else None
        return Ending(self.proc.exit_status, signal, self.stdout_bytes, self.stderr.strip(),
                      lost or conn.is_closed(),
                      self._stdout_tail.decode("utf-8", "replace"))

    def close(self) -> None:
        """End the channel (the program gets EOF and SIGPIPE); nothing more is read."""
        self._eof = True
        with contextlib.suppress(Exception):
            self.proc.close()
        self._stderr_task.cancel()


def asks_for_a_terminal(*texts: str) -> bool:
    """True when an endpoint's output complains that no terminal was asked for (RunPod's
    basic proxy: "Your SSH client doesn't support PTY"), on whichever stream it used."""
    return any(_ASKS_FOR_A_TERMINAL.search(text) for text in texts)


def pty_only(ending: Ending) -> bool:
    """The endpoint ran no command: it closed a command's session in silence (exit 0 or no
    status), or said it wants a terminal."""
    silent = ending.stdout_bytes == 0 and not ending.stderr
    return (silent and ending.exit_status in (None, 0) and not ending.exit_signal) \
        or asks_for_a_terminal(ending.stderr, ending.stdout_tail)


def no_answer(box: str, what: str, ending: Ending, reason: str | None = None) -> BoxError:
    """The error for a program that ended without its answer, from how it ended."""
    text = ending.stderr
    if ending.connection_lost:
        return BoxError(Connection.UNREACHABLE,
                        f"box {box}: connection lost during the {what}")
    if ending.exit_status == 127 or ("python3" in text and "not found" in text):
        return BoxError(Connection.PROBE_FAILED,
                        f"box {box}: python3 not found on the box "
                        f"(install it, e.g. apt-get install python3-minimal)")
    if ending.exit_signal:
        return BoxError(Connection.PROBE_FAILED,
                        f"box {box}: {what} killed by signal {ending.exit_signal}")
    silent = ending.stdout_bytes == 0 and not text
    if pty_only(ending):
        return BoxError(Connection.PTY_ONLY,
                        f"box {box}: the SSH server ran no command (the session closed "
                        f"{'with no output' if silent else 'asking for a terminal'}): "
                        f"{PTY_ONLY_FIX}")
    if ending.exit_status is None:
        return BoxError(Connection.UNREACHABLE,
                        f"box {box}: connection lost during the {what} (the session ended "
                        f"without an exit status)")
    tail = text[-300:] or "no error output"
    why = f" ({reason})" if reason else ""
    return BoxError(Connection.PROBE_FAILED,
                    f"box {box}: {what} exited {ending.exit_status} without a readable "
                    f"answer{why}: {tail}")
