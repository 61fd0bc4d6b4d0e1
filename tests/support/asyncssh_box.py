"""An in-process asyncssh box on 127.0.0.1 that misbehaves on cue, for the fault tests.

It accepts only the test client key and runs nothing but `python3 -`: a real
child process whose stdin and stdout are copied to and from the channel by
explicit loops (not `process.redirect()`), so the test decides when the
answer leaves. Faults, switched on and off between refreshes:

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
import contextlib
import shutil
import sys
from pathlib import Path

import asyncssh

PROBE_COMMAND = "python3 -"
CHUNK = 65536


def box_python() -> str:
    """The box's interpreter: the system python3 (what a rented box has), else ours."""
    return shutil.which("python3", path="/usr/bin:/bin") or sys.executable


class _Conn(asyncssh.SSHServer):
    def __init__(self, box: FaultyBox) -> None:
        self.box = box
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.box.conns.add(conn)
        self.box.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.box.conns.discard(self.conn)


class FaultyBox:
    """One asyncssh server; `await start()`, then flip `delay` / `drop` or `cut()`."""

    def __init__(self, client_public_line: str, *, cwd: Path | None = None) -> None:
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.authorized = asyncssh.import_authorized_keys(client_public_line + "\n")
        self.cwd = cwd
        self.port = 0
        self.delay = 0.0
        self.drop = False
        self.connections = 0
        self.probes = 0  # probes whose child was started
        self.conns: set[asyncssh.SSHServerConnection] = set()
        self._children: set[asyncio.subprocess.Process] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._acceptor: asyncssh.SSHAcceptor | None = None

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key("openssh").decode().strip()
        return f"[127.0.0.1]:{self.port} {key}"

    async def start(self) -> None:
        self._acceptor = await asyncssh.create_server(
            lambda: _Conn(self), "127.0.0.1", self.port,
            server_host_keys=[self.host_key], authorized_client_keys=self.authorized,
            process_factory=self._serve, encoding=None, allow_pty=False,
            agent_forwarding=False, x11_forwarding=False, password_auth=False,
            kbdint_auth=False, keepalive_interval=0)
        self.port = self._acceptor.get_port()

    async def cut(self) -> None:
        """The network is gone: nothing listens on the port, every connection is dropped."""
        if self._acceptor is not None:
            self._acceptor.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._acceptor.wait_closed(), 2)
            self._acceptor = None
        for conn in list(self.conns):
            conn.abort()
        await self._end_children()

    async def restore(self) -> None:
        """Listen again on the same port, same host key (the route is back)."""
        await self.start()

    async def close(self) -> None:
        await self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _end_children(self) -> None:
        for child in list(self._children):
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
        for child in list(self._children):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.wait(), 5)

    def _serve(self, process: asyncssh.SSHServerProcess) -> None:
        task = asyncio.ensure_future(self._run(process))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, process: asyncssh.SSHServerProcess) -> None:
        if process.command != PROBE_COMMAND:
            process.stderr.write(f"only `{PROBE_COMMAND}` runs here\n".encode())
            process.exit(127)
            return
        child = await asyncio.create_subprocess_exec(
            box_python(), "-", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=self.cwd)
        self._children.add(child)
        self.probes += 1
        code: int | None = None
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._feed(process, child))
                group.create_task(self._answer(process, child))
                group.create_task(_copy(child.stderr, process.stderr))
            code = await child.wait()
        except* (asyncssh.Error, OSError, _Dropped):
            pass  # the connection is gone (or was dropped on purpose)
        finally:
            self._children.discard(child)
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
        with contextlib.suppress(asyncssh.Error, OSError):
            if code is None:
                process.close()
            else:
                process.exit(code if code >= 0 else 128 - code)

    async def _feed(self, process: asyncssh.SSHServerProcess,
                    child: asyncio.subprocess.Process) -> None:
        """The channel's stdin into the child's, chunk by chunk, then EOF."""
        sink = child.stdin
        assert sink is not None
        try:
            while data := await process.stdin.read(CHUNK):
                sink.write(data)
                await sink.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.close()

    async def _answer(self, process: asyncssh.SSHServerProcess,
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
                    raise _Dropped
            process.stdout.write(data)
            await process.stdout.drain()


class _Dropped(Exception):
    """The connection was dropped mid-answer on cue."""


async def _copy(source: asyncio.StreamReader | None, sink: asyncssh.SSHWriter) -> None:
    assert source is not None
    while data := await source.read(CHUNK):
        sink.write(data)
        await sink.drain()
