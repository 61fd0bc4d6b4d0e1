"""Throwaway OpenSSH servers on 127.0.0.1 for the test suite.

The panel talks to rented GPU boxes over SSH (directly or through jump hosts),
so the tests run against a real ``/usr/sbin/sshd`` rather than a mock: that is
the only way to exercise real host-key checking, ``ProxyJump``-style tunnels
and dropped connections.  This module is plain infrastructure (no pytest
fixtures); ``conftest.py`` wraps it.

Everything listens on 127.0.0.1 only and lives in a per-test work directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
# sshd (privilege separation) refuses to start unless this directory exists.
PRIVSEP_DIR = Path("/run/sshd")
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class KeyPair:
    """An OpenSSH key on disk, plus its public half as an ``authorized_keys`` line."""

    private_path: Path
    public_line: str  # "ssh-ed25519 AAAA... comment"


def make_keypair(directory: Path, name: str) -> KeyPair:
    """Generate an unencrypted ed25519 key ``directory/name`` (fast, and what rented boxes use)."""
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / name
    for stale in (private, private.with_name(name + ".pub")):
        stale.unlink(missing_ok=True)  # ssh-keygen would prompt before overwriting
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(private)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    # ssh and sshd both reject private keys readable by others.
    private.chmod(0o600)
    public_line = private.with_name(name + ".pub").read_text().strip()
    return KeyPair(private_path=private, public_line=public_line)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _ppid_map() -> dict[int, int]:
    """Map every live pid to its parent pid, read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # the process exited while we looked
        # The command name (field 2) may contain spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def _descendants(root: int) -> set[int]:
    """All processes below ``root`` in the process tree (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _ppid_map().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _socket_inodes_on_port(port: int) -> set[str]:
    """Inodes of 127.0.0.1 TCP sockets whose local port is ``port`` (listener + connections)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port:
                inodes.add(fields[9])
    inodes.discard("0")  # TIME_WAIT entries have no owning socket
    return inodes


def _sshd_pids_holding(inodes: set[str]) -> set[int]:
    """sshd processes with an open file descriptor on any of the given socket inodes.

    Restricted to the sshd binary so that a client whose ephemeral local port
    happens to equal our port (possible once the listener is gone) is spared.
    """
    if not inodes:
        return set()
    targets = {f"socket:[{inode}]" for inode in inodes}
    holders: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if os.readlink(Path(entry.path, "exe")) != SSHD:
                continue
        except OSError:
            continue
        try:
            fds = os.scandir(Path(entry.path, "fd"))
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) in targets:
                        holders.add(int(entry.name))
                        break
                except OSError:
                    continue
    return holders


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Sshd:
    """One ``sshd -D`` on 127.0.0.1 with its own host key, config and authorized keys.

    ``stop()`` behaves like the box losing power: the listener *and* every
    forked per-connection sshd (and the commands they run) are killed, so
    clients see their established connections drop.
    """

    def __init__(
        self,
        workdir: Path,
        authorized_keys: Sequence[str],
        *,
        host_key: KeyPair | None = None,
        allow_tcp_forwarding: bool = True,
        extra_config: str = "",
        port: int | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.authorized_keys = list(authorized_keys)
        self.allow_tcp_forwarding = allow_tcp_forwarding
        self.extra_config = extra_config
        self.port: int = port if port is not None else free_port()
        # Reused across restart() so clients' known_hosts entries stay valid.
        self.host_key: KeyPair = host_key or make_keypair(self.workdir, "ssh_host_ed25519_key")
        self.config_path = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self.pid_path = self.workdir / "sshd.pid"
        self.authorized_keys_path = self.workdir / "authorized_keys"
        self._proc: subprocess.Popen[bytes] | None = None

    # -- configuration -------------------------------------------------

    def _config_text(self) -> str:
        forwarding = "yes" if self.allow_tcp_forwarding else "no"
        lines = [
            f"Port {self.port}",
            f"ListenAddress {LOOPBACK}",
            f"HostKey {self.host_key.private_path}",
            f"PidFile {self.pid_path}",
            f"AuthorizedKeysFile {self.authorized_keys_path}",
            # The work dir lives under /tmp with loose permissions.
            "StrictModes no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            f"AllowTcpForwarding {forwarding}",
            "Subsystem sftp internal-sftp",
            # VERBOSE logs each accepted key / closed connection: handy in failure reports.
            "LogLevel VERBOSE",
            # Tests open many connections at once; the default 10:30:100 drops some.
            "MaxStartups 100:30:200",
            "MaxSessions 50",
            # Keep the session environment predictable (no motd / lastlog noise).
            "PrintMotd no",
            "PrintLastLog no",
        ]
        text = "\n".join(lines) + "\n"
        if self.extra_config:
            text += self.extra_config.rstrip("\n") + "\n"
        return text

    def _write_files(self) -> None:
        self.authorized_keys_path.write_text(
            "".join(line.rstrip("\n") + "\n" for line in self.authorized_keys)
        )
        self.config_path.write_text(self._config_text())

    # -- lifecycle -----------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the listener process is alive (sessions are not considered)."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        """Start sshd and return once it greets clients with an ``SSH-2.0`` banner.

        Raises ``RuntimeError`` carrying sshd's log if it exits (bad config,
        port in use, ...) or does not answer within ``timeout`` seconds.
        """
        if self.running:
            return
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._write_files()
        with self.log_path.open("ab") as log:
            # Own session: signals aimed at the test runner's process group
            # (Ctrl-C) do not reach it, and it cannot grab our terminal.
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise RuntimeError(
                    f"sshd on port {self.port} exited with status {code}:\n{self._log_text()}"
                )
            if self._banner_ok():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(
                    f"sshd on port {self.port} sent no SSH banner within {timeout}s:\n"
                    f"{self._log_text()}"
                )
            time.sleep(0.02)

    def _banner_ok(self) -> bool:
        """Whether the port accepts a TCP connection and sends an SSH-2.0 identification line."""
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=1.0) as sock:
                data = b""
                while b"\n" not in data and len(data) < 4096:
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    data += chunk
                # Say goodbye politely so sshd logs no protocol error.
                with contextlib.suppress(OSError):
                    sock.sendall(b"SSH-2.0-probe\r\n")
        except OSError:
            return False
        return data.startswith(b"SSH-2.0")

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no sshd log)"

    def stop(self) -> None:
        """Kill the listener and every session it forked, like a box rebooting. Idempotent.

        sshd forks one child per connection and that child calls ``setsid()``,
        so killing the listener's process group is not enough.  We collect the
        listener's whole process tree (via /proc parent pids) and also any
        process still holding a TCP socket on our port (catches orphans whose
        listener already died), then SIGKILL them all.  The kernel then resets
        the client connections.
        """
        proc = self._proc
        self._proc = None
        victims: set[int] = set()
        if proc is not None and proc.poll() is None:
            # Freeze the listener first so it cannot fork new children mid-scan.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGSTOP)
            victims |= _descendants(proc.pid)
            victims.add(proc.pid)
        victims |= self._orphaned_sessions()
        _kill_all(victims - {os.getpid()})
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # SIGKILL cannot be ignored; this just reaps it
        # A session might have forked while we were killing; one more sweep.
        _kill_all(self._orphaned_sessions() - {os.getpid()})
        self.pid_path.unlink(missing_ok=True)

    def _orphaned_sessions(self) -> set[int]:
        """sshd processes still serving a connection on our port, plus their subtrees.

        Catches sessions whose listener already died (crash, earlier SIGKILL)
        and so are no longer in its process tree.
        """
        found = _sshd_pids_holding(_socket_inodes_on_port(self.port))
        for pid in list(found):
            found |= _descendants(pid)
        return found

    def restart(self) -> None:
        """Stop, then start again on the same port with the same host key (a reboot)."""
        self.stop()
        self.start()

    def known_hosts_line(self) -> str:
        """The ``known_hosts`` entry clients need to trust this server."""
        key_type, key_b64 = self.host_key.public_line.split()[:2]
        return f"[{LOOPBACK}]:{self.port} {key_type} {key_b64}"

    def __enter__(self) -> Sshd:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Sshd {LOOPBACK}:{self.port} {state} {self.workdir}>"
