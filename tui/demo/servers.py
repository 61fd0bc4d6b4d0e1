"""In-process SSH servers on 127.0.0.1: boxes that run `python3 -`, and a jump host.

One implementation for the demo and the tests (tests/support/asyncssh_box.py
wraps it with faults). A box runs nothing but `python3 -` (what the probe
and the push program need), the kept probe's `python3 -c` loader
(tui.remote.programs; unless `keep_probe=False`), and the few commands it is
given (a manual box's stop_command): a real child process whose stdin, stdout and stderr are
copied by hand to and from the channel, in bytes, so the exit code and every
byte arrive as a real sshd would deliver them. With `sftp_root` it also
serves SFTP, read-only and inside that folder (a local-folder push pulls
over SFTP). The jump host opens no sessions and forwards TCP to 127.0.0.1 only.

`stop_listening()` is the network to the box gone (connects refused, every
connection dropped); `listen()` brings it back on the same port with the
same host key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from tui.remote.programs import SERVE_CODE, SERVE_COMMAND

PROBE_COMMAND = "python3 -"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
NOT_FOUND = 127
CHUNK = 65536

# A command a box accepts besides `python3 -`: gets the server, returns the exit code.
Command = Callable[["BoxServer"], Awaitable[int]]


@dataclass
class ServerStats:
    """What a server saw; the tests read it (e.g. that a box was reached through the jump)."""

    connections: int = 0
    logins: int = 0  # connections that logged in (a benchmark counts them per box)
    sessions: int = 0
    probes: int = 0  # `python3 -` children started
    refused_commands: int = 0
    forwards: list[int] = field(default_factory=list)  # destination ports (jump host)


class _Tracked(asyncssh.SSHServer):
    """Keeps the server's live connections so closing it (or cutting it) can end them."""

    def __init__(self, server: BoxServer) -> None:
        self.server = server
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.server.conns.add(conn)
        self.server.stats.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.server.conns.discard(self.conn)

    def auth_completed(self) -> None:
        self.server.stats.logins += 1


class _JumpHost(_Tracked):
    def session_requested(self) -> bool:
        return False  # a jump host here only forwards

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str,
                             orig_port: int) -> bool:
        if dest_host not in LOOPBACK:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "this jump host forwards to 127.0.0.1 only")
        self.server.stats.forwards.append(dest_port)
        return True


_WRITES = asyncssh.FXF_WRITE | asyncssh.FXF_APPEND | asyncssh.FXF_CREAT | asyncssh.FXF_TRUNC


class ReadOnlySFTP(asyncssh.SFTPServer):
    """SFTP that reads files under one folder and changes nothing anywhere."""

    def __init__(self, chan: asyncssh.SSHServerChannel, root: Path) -> None:
        super().__init__(chan)
        self.root = os.fsencode(os.path.realpath(root))

    def map_path(self, path: bytes) -> bytes:
        real = os.path.realpath(os.path.join(self.root, path))
        if real != self.root and not real.startswith(self.root + b"/"):
            raise asyncssh.SFTPPermissionDenied("outside the box's files")
        return real

    def open(self, path: bytes, pflags: int, attrs: asyncssh.SFTPAttrs) -> object:
        if pflags & _WRITES:
            raise asyncssh.SFTPPermissionDenied("read-only")
        return super().open(path, pflags, attrs)

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise asyncssh.SFTPPermissionDenied("read-only")

    # One refusal for every call that would change something (signatures differ).
    remove = rename = posix_rename = mkdir = rmdir = _refuse
    symlink = link = setstat = lsetstat = fsetstat = _refuse


class BoxServer:
    """One asyncssh server on an ephemeral port of 127.0.0.1.

    `authorized`: the client key (an SSHKey or an OpenSSH public key line).
    `python`: the box's interpreter for `python3 -` (default: this one, which
    has every package the panel has, huggingface_hub included).
    """

    def __init__(self, name: str, authorized: asyncssh.SSHKey | str, *,
                 host_key: asyncssh.SSHKey | None = None, jump: bool = False,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                 python: str | None = None, sftp_root: str | Path | None = None,
                 commands: Mapping[str, Command] | None = None,
                 keep_probe: bool = True) -> None:
        self.name = name
        self.keep_probe = keep_probe
        self.host_key = host_key or asyncssh.generate_private_key("ssh-ed25519")
        line = authorized if isinstance(authorized, str) else \
            authorized.export_public_key("openssh").decode()
        self.authorized = asyncssh.import_authorized_keys(line.strip() + "\n")
        self.jump = jump
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.python = python or sys.executable
        self.sftp_root = Path(sftp_root) if sftp_root is not None else None
        self.commands = dict(commands or {})
        self.stats = ServerStats()
        self.conns: set[asyncssh.SSHServerConnection] = set()
        self.children: set[asyncio.subprocess.Process] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self.port = 0

    @property
    def listening(self) -> bool:
        return self._acceptor is not None

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key("openssh").decode().strip()
        return f"[127.0.0.1]:{self.port} {key}"

    async def start(self) -> None:
        """Listen (on a new port the first time, on the same one after stop_listening)."""
        root = self.sftp_root
        sftp = (lambda chan: ReadOnlySFTP(chan, root)) if root is not None else None
        kind = _JumpHost if self.jump else _Tracked
        self._acceptor = await asyncssh.create_server(
            lambda: kind(self), "127.0.0.1", self.port,
            server_host_keys=[self.host_key], authorized_client_keys=self.authorized,
            process_factory=None if self.jump else self._serve, sftp_factory=sftp,
            encoding=None, allow_pty=False, agent_forwarding=False, x11_forwarding=False,
            password_auth=False, kbdint_auth=False, keepalive_interval=0)
        self.port = self._acceptor.get_port()

    listen = start

    async def stop_listening(self) -> None:
        """The network is gone: nothing listens on the port, every connection is dropped."""
        if self._acceptor is not None:
            self._acceptor.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._acceptor.wait_closed(), 2)
            self._acceptor = None
        for conn in list(self.conns):
            conn.abort()
        await self._end_children()

    async def close(self) -> None:
        """Stop listening, end every connection, kill any child still running."""
        await self.stop_listening()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _end_children(self) -> None:
        for child in list(self.children):
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
        for child in list(self.children):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(child.wait(), 5)

    def _serve(self, process: asyncssh.SSHServerProcess) -> None:
        task = asyncio.ensure_future(self._run(process))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, process: asyncssh.SSHServerProcess) -> None:
        self.stats.sessions += 1
        command = process.command
        if command in self.commands:
            status = await self.commands[command](self)
            with contextlib.suppress(asyncssh.Error, OSError):
                process.exit(status)
            return
        keep = self.keep_probe and command == SERVE_COMMAND
        if command != PROBE_COMMAND and not keep:
            self.stats.refused_commands += 1
            with contextlib.suppress(asyncssh.Error, OSError):
                process.stderr.write(f"{self.name}: only `{PROBE_COMMAND}` runs here, not "
                                     f"{command!r}\n".encode())
                process.exit(NOT_FOUND)
            return
        child = await asyncio.create_subprocess_exec(
            self.python, *(("-c", SERVE_CODE) if keep else ("-",)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env, cwd=self.cwd)
        self.children.add(child)
        self.stats.probes += 1
        code: int | None = None
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(_feed(process.stdin, child))
                group.create_task(self.answer(process, child))
                group.create_task(_copy(child.stderr, process.stderr))
            code = await child.wait()
        except* (asyncssh.Error, OSError, ConnectionDropped):
            pass  # the client went away (or was dropped on purpose): nothing left to tell it
        finally:
            self.children.discard(child)
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
        with contextlib.suppress(asyncssh.Error, OSError):
            if code is None:
                process.close()
            elif code < 0:
                process.exit_with_signal(_signal_name(-code))
            else:
                process.exit(code)

    async def answer(self, process: asyncssh.SSHServerProcess,
                     child: asyncio.subprocess.Process) -> None:
        """The child's stdout onto the channel (a faulty box overrides this)."""
        await _copy(child.stdout, process.stdout)


class ConnectionDropped(Exception):
    """An `answer` that dropped the connection on purpose (a box dying mid-answer)."""


async def _feed(source: asyncssh.SSHReader[bytes], child: asyncio.subprocess.Process) -> None:
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


async def _copy(source: asyncio.StreamReader | None, sink: asyncssh.SSHWriter[bytes]) -> None:
    assert source is not None
    while data := await source.read(CHUNK):
        sink.write(data)
        await sink.drain()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return "KILL"
