"""An in-process SSH endpoint that offers interactive shells only, as RunPod's basic
proxy (ssh.runpod.io) does: logins succeed, a PTY and a shell are granted, but a
command (an `exec` request) is refused, and there is no SFTP.

Plain infrastructure, no pytest fixtures; it runs in the test's event loop.
"""

from __future__ import annotations

import asyncssh


class _ShellOnly(asyncssh.SSHServerSession):  # type: ignore[type-arg]
    def __init__(self, box: PtyOnlyBox) -> None:
        self.box = box
        self._chan: asyncssh.SSHServerChannel | None = None  # type: ignore[type-arg]

    def connection_made(self, chan: asyncssh.SSHServerChannel) -> None:  # type: ignore[type-arg]
        self._chan = chan

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int],
                      term_modes: dict[int, int]) -> bool:
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        if self.box.close_commands:
            self.box.closed.append(command)
            return True
        self.box.refused.append(command)
        return False

    def subsystem_requested(self, subsystem: str) -> bool:
        self.box.refused.append(f"subsystem {subsystem}")
        return False

    def session_started(self) -> None:
        if self._chan is not None and self.box.close_commands:
            self._chan.exit(0)  # at once, in the same write as the exec's reply
        elif self._chan is not None:
            self._chan.write("Welcome. This is an interactive shell only.\r\n")
            self._chan.exit(0)


class _Server(asyncssh.SSHServer):
    def __init__(self, box: PtyOnlyBox) -> None:
        self.box = box

    def session_requested(self) -> _ShellOnly:
        return _ShellOnly(self.box)


class PtyOnlyBox:
    """`await start()`; `refused` lists every command it turned down. With
    `close_commands`, a command is accepted and its session closed at once, exit 0,
    before the client could send it a byte (`closed` lists them)."""

    def __init__(self, client_public_line: str, *, close_commands: bool = False) -> None:
        self.close_commands = close_commands
        self.closed: list[str] = []
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.authorized = asyncssh.import_authorized_keys(client_public_line + "\n")
        self.port = 0
        self.refused: list[str] = []
        self._acceptor: asyncssh.SSHAcceptor | None = None

    def known_hosts_line(self) -> str:
        key = self.host_key.export_public_key("openssh").decode().strip()
        return f"[127.0.0.1]:{self.port} {key}"

    async def start(self) -> None:
        self._acceptor = await asyncssh.create_server(
            lambda: _Server(self), "127.0.0.1", 0, server_host_keys=[self.host_key],
            authorized_client_keys=self.authorized, allow_pty=True, agent_forwarding=False,
            x11_forwarding=False, password_auth=False, kbdint_auth=False, keepalive_interval=0)
        self.port = self._acceptor.get_port()

    async def close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            await self._acceptor.wait_closed()
            self._acceptor = None
