"""Throwaway OpenSSH servers on 127.0.0.1 for the test suite.

The panel talks to rented GPU boxes over SSH (directly or through jump hosts),
so the tests run against a real ``/usr/sbin/sshd`` rather than a mock: that is
the only way to exercise real host-key checking, jump-host tunnels and
dropped connections.  This module is plain infrastructure (no pytest
fixtures); ``conftest.py`` wraps it.

Everything listens on 127.0.0.1 only and lives in a per-server work directory.
Sessions log in as the current user (root in CI); pass ``home=`` to give each
server its own ``$HOME`` so sessions skip the user's shell start-up files.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
# sshd (privilege separation) refuses to start unless this directory exists.
PRIVSEP_DIR = Path("/run/sshd")
LOOPBACK = "127.0.0.1"
_TCP_LISTEN = "0A"  # socket state column of /proc/net/tcp


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


def bin_dir_without(directory: Path, excluded: Iterable[str]) -> Path:
    """Make a directory of symlinks to the system's commands, minus ``excluded`` (globs).

    For "this box has no python3" tests: use the result as the session's PATH
    (``Sshd(..., env={"PATH": str(bin_dir)})``) and the shell still finds
    ``cat``, ``mkdir`` and friends, but not e.g. ``python3*``.
    """
    patterns = list(excluded)
    directory.mkdir(parents=True, exist_ok=True)
    # Same order as sshd's default PATH, so the first hit wins as in a real lookup.
    for source in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        try:
            entries = list(os.scandir(source))
        except OSError:
            continue
        for entry in entries:
            link = directory / entry.name
            if any(fnmatch.fnmatch(entry.name, p) for p in patterns) or link.is_symlink():
                continue
            if os.access(entry.path, os.X_OK) and not entry.is_dir():
                link.symlink_to(entry.path)
    return directory


# -- /proc helpers: sshd's per-connection children call setsid(), so they
#    leave our process group and must be found another way. --------------


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


def _descendants(root: int, parents: Mapping[int, int] | None = None) -> set[int]:
    """All processes below ``root`` in the process tree (not ``root`` itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in (parents if parents is not None else _ppid_map()).items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _socket_inodes(port: int, *, listening: bool) -> set[str]:
    """Inodes of TCP sockets whose local port is ``port``, either LISTEN or connected ones."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) != port:
                continue
            if (fields[3] == _TCP_LISTEN) == listening:
                inodes.add(fields[9])
    inodes.discard("0")  # TIME_WAIT entries have no owning socket
    return inodes


def _socket_inodes_of(pid: int) -> set[str]:
    """Socket inodes among the open file descriptors of ``pid``."""
    inodes: set[str] = set()
    try:
        fds = os.scandir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    with fds:
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(fd.path)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def _pids_from_ssh_port(port: int) -> set[int]:
    """Processes whose environment says an SSH session on ``port`` started them.

    sshd puts ``SSH_CONNECTION="<client ip> <client port> <server ip> <port>"``
    into each session and commands pass it on, so this finds commands that
    outlived their connection (sshd does not kill a non-pty command when the
    client goes away) and were reparented to init.
    """
    suffix = f" {LOOPBACK} {port}".encode()
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(b"SSH_CONNECTION=") and item.endswith(suffix):
                found.add(int(entry.name))
                break
    return found


def _is_sshd(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/exe") == SSHD
    except OSError:
        return False


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _setenv_line(env: Mapping[str, str]) -> str:
    """Render one ``SetEnv`` line (sshd honours only the first such line)."""
    parts = []
    for name, value in env.items():
        if '"' in value or "\n" in value or not name.isidentifier():
            raise ValueError(f"cannot pass {name}={value!r} through sshd_config SetEnv")
        item = f"{name}={value}"
        parts.append(f'"{item}"' if any(c.isspace() for c in item) else item)
    return "SetEnv " + " ".join(parts)


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
        home: Path | None = None,
        env: Mapping[str, str] | None = None,
        sftp: bool = True,
        max_startups: str = "100:30:200",
    ) -> None:
        """Prepare (but do not start) a server.

        ``home`` sets the sessions' ``$HOME`` (created if missing). Useful
        because bash sources ``$HOME/.bashrc`` even for ``ssh host cmd``, and
        a developer's or CI image's dotfiles (pyenv init, PATH edits) then
        slow down and change every remote command.  The working directory
        stays the user's passwd home.  ``env`` adds more session variables
        (e.g. ``PATH``); both become one ``SetEnv`` line, so ``extra_config``
        must not contain its own ``SetEnv`` when either is used.  ``sftp=False``
        leaves out the ``Subsystem sftp`` line, as on boxes that offer none.
        ``max_startups`` is sshd's ``MaxStartups`` (``start:rate:full``): the tests'
        default lets many connections log in at once; ``"3:30:10"`` is a strict
        server (OpenSSH's own default is ``10:30:100``). sshd takes the first value
        of a keyword, so ``extra_config`` cannot override it.
        """
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.authorized_keys = list(authorized_keys)
        self.allow_tcp_forwarding = allow_tcp_forwarding
        self.extra_config = extra_config
        self.sftp = sftp
        self.max_startups = max_startups
        self.port: int = port if port is not None else free_port()
        self.home = Path(home) if home is not None else None
        self.env: dict[str, str] = dict(env or {})
        if self.home is not None:
            self.env = {"HOME": str(self.home), **self.env}
        if self.env and any(
            line.strip().lower().startswith("setenv") for line in extra_config.splitlines()
        ):
            raise ValueError("use env= or extra_config SetEnv, not both: sshd reads only one")
        # Reused across restart() so clients' known_hosts entries stay valid.
        self.host_key: KeyPair = host_key or make_keypair(self.workdir, "ssh_host_ed25519_key")
        self.config_path = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self.pid_path = self.workdir / "sshd.pid"
        self.authorized_keys_path = self.workdir / "authorized_keys"
        self._proc: subprocess.Popen[bytes] | None = None

    # -- configuration -------------------------------------------------

    def config_text(self) -> str:
        """The sshd_config this server runs with."""
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
            *(["Subsystem sftp internal-sftp"] if self.sftp else []),
            # VERBOSE logs accepted keys and connection open/close: handy in failure reports.
            "LogLevel VERBOSE",
            # Tests open many connections at once; the default 10:30:100 drops some.
            f"MaxStartups {self.max_startups}",
            "MaxSessions 50",
            # Keep session output free of login banners.
            "PrintMotd no",
            "PrintLastLog no",
        ]
        if self.env:
            lines.append(_setenv_line(self.env))
        text = "\n".join(lines) + "\n"
        if self.extra_config:
            text += self.extra_config.rstrip("\n") + "\n"
        return text

    def _write_files(self) -> None:
        self.authorized_keys_path.write_text(
            "".join(line.rstrip("\n") + "\n" for line in self.authorized_keys)
        )
        self.config_path.write_text(self.config_text())
        if self.home is not None:
            self.home.mkdir(parents=True, exist_ok=True)

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
            # Own session: Ctrl-C aimed at the test runner does not reach it,
            # and it cannot grab our terminal.
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
                    f"sshd on port {self.port} exited with status {code}:\n{self.log_text()}"
                )
            # Check the listening socket is *ours*: with the port taken, the banner
            # would come from the other server while ours is about to fail.
            if self._owns_listener() and self._banner_ok():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(
                    f"sshd on port {self.port} sent no SSH banner within {timeout}s:\n"
                    f"{self.log_text()}"
                )
            time.sleep(0.01)

    def _owns_listener(self) -> bool:
        assert self._proc is not None
        listening = _socket_inodes(self.port, listening=True)
        return bool(listening & _socket_inodes_of(self._proc.pid))

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
        except OSError:
            return False
        return data.startswith(b"SSH-2.0")

    def log_text(self) -> str:
        """sshd's stderr log so far (all starts of this server), for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no sshd log)"

    def stop(self) -> None:
        """Kill the listener and every session it forked, like a box rebooting. Idempotent.

        OpenSSH forks one child per connection and that child calls
        ``setsid()``; its session commands do the same.  So neither the
        listener's process group nor its session covers them, and their
        cmdlines are rewritten ("sshd: root@notty").  We therefore freeze the
        listener, collect its whole process tree from /proc parent pids, and
        SIGKILL it all; the kernel then resets the clients' connections.
        Stragglers reparented to init are found too (see
        ``_orphaned_sessions``): a reboot would not spare them either.
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
        """Processes of ours that left the listener's tree, plus their subtrees.

        Two kinds: sshd sessions whose listener already died (reparented to
        init, still holding a connection on our port), and commands started
        over SSH on our port that outlived their connection.  Only sshd
        processes whose parent is not sshd count in the first group, so
        another live server's sessions are left alone.
        """
        parents = _ppid_map()
        found = _pids_from_ssh_port(self.port) - {os.getpid()}
        connected = _socket_inodes(self.port, listening=False)
        if connected:
            for pid, ppid in parents.items():
                if pid == os.getpid() or _is_sshd(ppid) or not _is_sshd(pid):
                    continue
                if _socket_inodes_of(pid) & connected:
                    found.add(pid)
        for pid in list(found):
            found |= _descendants(pid, parents)
        return found

    def cut_connections(self) -> int:
        """Drop every client connection the way a network does, and nothing else.

        Kills the per-connection sshd processes only: the listener keeps
        accepting, and the commands those sessions started live on, orphaned,
        as they would on a box whose SSH link died. Returns how many were cut.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return 0
        sessions = {pid for pid in _descendants(proc.pid) if _is_sshd(pid)}
        _kill_all(sessions)
        return len(sessions)

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
