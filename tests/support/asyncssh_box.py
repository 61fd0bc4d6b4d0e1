"""An in-process asyncssh box on 127.0.0.1 that misbehaves on cue, for the fault tests.

The box itself is the demo's (tui.demo.servers.BoxServer): it accepts only
the test client key and runs nothing but `python3 -` with explicit copy loops.
This wrapper adds the faults, switched on and off between refreshes:

- `delay`: seconds to sit on a probe's answer before sending it (a slow box);
- `drop`: send half the answer, then abort the TCP connection (a box that
  dies mid-probe);
- `cut()` / `restore()`: stop listening and abort every connection (the
  network to the box is gone: connects are refused), then listen again on
  the same port with the same host key.

Plain infrastructure, no pytest fixtures; it runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import asyncssh

from tui.demo.servers import CHUNK, PROBE_COMMAND, BoxServer, ConnectionDropped

__all__ = ["PROBE_COMMAND", "FaultyBox", "box_python"]


def box_python() -> str:
    """The box's interpreter: the system python3 (what a rented box has), else ours."""
    return shutil.which("python3", path="/usr/bin:/bin") or sys.executable


class FaultyBox(BoxServer):
    """One asyncssh server; `await start()`, then flip `delay` / `drop` or `cut()`."""

    def __init__(self, client_public_line: str, *, cwd: Path | None = None) -> None:
        # One-shot only: its faults act on each probe's first answer, and this box is
        # also the one that cannot keep a probe (the fallback path is tested on it).
        super().__init__("faulty", client_public_line, cwd=cwd, python=box_python(),
                         keep_probe=False)
        self.delay = 0.0
        self.drop = False

    @property
    def connections(self) -> int:
        return self.stats.connections

    @property
    def probes(self) -> int:
        """Probes whose child was started."""
        return self.stats.probes

    async def cut(self) -> None:
        await self.stop_listening()

    async def restore(self) -> None:
        await self.listen()

    async def answer(self, process: asyncssh.SSHServerProcess,
                     child: asyncio.subprocess.Process) -> None:
        """The child's stdout onto the channel; the faults act on its first chunk."""
        assert child.stdout is not None
        first = True
        while data := await child.stdout.read(CHUNK):
            if first:
                first = False
                if self.delay:
                    await asyncio.sleep(self.delay)
                if self.drop:
                    process.stdout.write(data[:len(data) // 2])
                    await process.stdout.drain()
                    process.channel.get_connection().abort()
                    raise ConnectionDropped
            process.stdout.write(data)
            await process.stdout.drain()
