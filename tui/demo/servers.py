"""In-process SSH servers on 127.0.0.1: demo boxes that run `python3 -`, and a jump host.

A box runs nothing but `python3 -` (what the probe needs): a real child
process whose stdin, stdout and stderr are copied by hand to and from the
channel, in bytes, so the exit code and every byte arrive as a real sshd
would deliver them. The jump host opens no sessions and forwards TCP to
127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncssh

PROBE_COMMAND = "python3 -"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
NOT_FOUND = 127
CHUNK = 65536


def box_python() -> str:
    """The boxes' interpreter: python3 from PATH, else this one."""
    return shutil.which("python3") or sys.executable


@dataclass
class ServerStats:
    """What a server saw; the tests read it (e.g. that a box was reached through the jump)."""

    connections: int = 0
    sessions: int = 0
    refused_commands: int = 0
    forwards: list[int] = field(default_factory=list)  # destination ports (jump host)


class _Tracked(asyncssh.SSHServer):
    """Keeps the server's live connections so closing the demo can end them."""

    def __init__(self, server: DemoServer) -> None:
        self.server = server
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.server.conns.add(conn)
        self.server.stats.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.server.conns.discard(self.conn)


class _JumpHost(_Tracked):
    def session_requested(self) -> bool:
        return False  # a jump host here only forwards

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str,
                             orig_port: int) -> bool:
        if dest_host not in LOOPBACK:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "the demo jump host forwards to 127.0.0.1 only")
        self.server.stats.forwards.append(dest_port)
        return True


class DemoServer:
    """One asyncssh server on an ephemeral port of 127.0.0.1."""

    def __init__(self, name: str, host_key: asyncssh.SSHKey, client_key: asyncssh.SSHKey,
                 *, jump: bool = False, env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> None:
        self.name = name
        self.host_key = host_key
        self.client_key = client_key
        self.jump = jump
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stats = ServerStats()
        self.conns: set[asyncssh.SSHServerConnection] = set()
        self.children: set[asyncio.subprocess.Process] = set()
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self.port = 0

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key("openssh").decode().strip()
        return f"[127.0.0.1]:{self.port} {key}"

    async def start(self) -> None:
        authorized = asyncssh.import_authorized_keys(
            self.client_key.export_public_key("openssh").decode())
        kind = _JumpHost if self.jump else _Tracked
        self._acceptor = await asyncssh.create_server(
            lambda: kind(self), "127.0.0.1", 0,
            server_host_keys=[self.host_key], authorized_client_keys=authorized,
            process_factory=None if self.jump else self._serve, encoding=None,
            allow_pty=False, agent_forwarding=False, x11_forwarding=False,
            password_auth=False, kbdint_auth=False, keepalive_interval=0)
        self.port = self._acceptor.get_port()

    async def close(self) -> None:
        """Stop listening, end every connection, kill any probe still running."""
        if self._acceptor is not None:
            self._acceptor.close()
        for conn in list(self.conns):
            conn.close()
        for child in list(self.children):
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
        for child in list(self.children):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.wait(), 5)
        for conn in list(self.conns):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)
        if self._acceptor is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._acceptor.wait_closed(), 2)
            self._acceptor = None

    async def _serve(self, process: asyncssh.SSHServerProcess) -> None:
        self.stats.sessions += 1
        if process.command != PROBE_COMMAND:
            self.stats.refused_commands += 1
            process.stderr.write(
                f"{self.name}: demo box: only `{PROBE_COMMAND}` runs here, "
                f"not {process.command!r}\n".encode())
            process.exit(NOT_FOUND)
            return
        child = await asyncio.create_subprocess_exec(
            box_python(), "-", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd)
        self.children.add(child)
        code: int | None = None
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(_feed(process.stdin, child))
                group.create_task(_copy(child.stdout, process.stdout))
                group.create_task(_copy(child.stderr, process.stderr))
            code = await child.wait()
        except* (asyncssh.Error, OSError):
            pass  # the client went away: nothing left to tell it
        finally:
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
            self.children.discard(child)
        with contextlib.suppress(asyncssh.Error, OSError):
            if code is None:
                process.close()
            elif code < 0:
                process.exit_with_signal(_signal_name(-code))
            else:
                process.exit(code)


async def _feed(source: asyncssh.SSHReader, child: asyncio.subprocess.Process) -> None:
    """The channel's stdin into the child's, then EOF."""
    sink = child.stdin
    assert sink is not None
    try:
        while data := await source.read(CHUNK):
            sink.write(data)
            await sink.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child stopped reading: its exit code tells the rest
    finally:
        with contextlib.suppress(OSError):
            sink.close()


async def _copy(source: asyncio.StreamReader | None, sink: asyncssh.SSHWriter) -> None:
    assert source is not None
    while data := await source.read(CHUNK):
        sink.write(data)
        await sink.drain()


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return "KILL"
