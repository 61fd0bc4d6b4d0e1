"""One SSH session per box: open the hop chain once, reuse it, probe over it.

Every failure becomes a BoxError carrying one of the Connection states and
words a person can act on, naming the hop that failed. Every step has the
box's timeout, so a hung box costs its own pane a timeout and nothing else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import functools
import json
import socket
import zlib
from importlib import resources
from pathlib import Path
from typing import Any

import asyncssh

from tui.model.box import Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.remote.hostkeys import HostKeyStore, changed_message, unknown_message
from tui.remote.route import Hop, RouteError, resolve_route

KEEPALIVE_SECONDS = 15
KEEPALIVE_COUNT = 3
PROBE_COMMAND = "python3 -"


class BoxError(Exception):
    """A refresh that got no answer, with the state it puts the box in."""

    def __init__(self, connection: Connection, message: str) -> None:
        super().__init__(message)
        self.connection = connection
        self.message = message


def probe_source() -> str:
    """The probe script's text, as shipped in the package."""
    return resources.files("tui.onbox").joinpath("probe.py").read_text()


@functools.cache
def _packed_probe() -> str:
    """The probe, compressed once per process: ~5.8 KB on the wire instead of ~13 KB."""
    return base64.b85encode(zlib.compress(probe_source().encode(), 9)).decode("ascii")


def probe_payload(request: dict[str, Any]) -> bytes:
    """What `python3 -` reads: a loader of the packed probe, then the call with the request.

    The request rides along as a string literal, never in argv or on the
    remote command line.
    """
    literal = repr(json.dumps(request, separators=(",", ":")))
    return (f"import base64,zlib\nexec(zlib.decompress(base64.b85decode({_packed_probe()!r})))\n"
            f"REQUEST = {literal}\nsys.exit(main(REQUEST))\n").encode()


def decode_answer(data: bytes) -> dict[str, Any]:
    """The probe answers zlib-compressed JSON (plain JSON is accepted too)."""
    if data[:1] != b"{":
        data = zlib.decompress(data)
    try:
        answer = json.loads(data)
    except RecursionError:  # the probe refuses deep documents; an older probe might not
        raise ValueError("answer is nested too deeply to read") from None
    if not isinstance(answer, dict):
        raise ValueError("answer is not a JSON object")
    return answer


_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused (is sshd running, is the port right?)",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "TCP connect timed out",
    errno.ECONNRESET: "connection reset",
}


def describe_os_error(exc: OSError) -> str:
    """Words for a failed TCP connect; asyncio's own text hides the errno's meaning."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror})"
    if exc.errno in _ERRNO_WORDS:
        return _ERRNO_WORDS[exc.errno]
    return exc.strerror or str(exc) or type(exc).__name__


class _Client(asyncssh.SSHClient):
    """Sees the host key offered by one hop, pins it under accept-new, notes loss."""

    def __init__(self, hop: Hop, store: HostKeyStore) -> None:
        self.hop = hop
        self.store = store
        self.offered: asyncssh.SSHKey | None = None
        self.lost = False

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        self.offered = key
        if self.store.accept_new and not self.store.entries_for(self.hop.host, self.hop.port):
            self.store.pin(self.hop.host, self.hop.port, key)
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class BoxSession:
    """The kept-open connection to one box (through its jump hosts, if any)."""

    def __init__(self, box: BoxConfig, fleet: FleetConfig, store: HostKeyStore) -> None:
        self.box = box
        self.timeout = fleet.timeout_for(box)
        self.store = store
        self._fleet = fleet
        self._conns: list[asyncssh.SSHClientConnection] = []
        self._clients: list[_Client] = []
        self._lock = asyncio.Lock()
        self.bytes_out = 0
        self.bytes_in = 0
        self.last_bytes_out = 0
        self.last_bytes_in = 0
        self.connects = 0

    @property
    def connected(self) -> bool:
        return bool(self._conns) and not any(c.lost for c in self._clients)

    async def close(self) -> None:
        conns, self._conns, self._clients = self._conns, [], []
        for conn in reversed(conns):
            conn.close()
        for conn in reversed(conns):
            with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(conn.wait_closed(), 2)

    async def _connect_hop(self, hop: Hop, tunnel: asyncssh.SSHClientConnection | None,
                           is_target: bool) -> asyncssh.SSHClientConnection:
        who = f"box {self.box.name}" if is_target else f"jump host {hop.label}"
        keys = []
        for key_file in hop.identity_files:
            if not Path(key_file).exists():
                raise BoxError(Connection.AUTH_FAILED,
                               f"{who}: identity file {key_file} does not exist")
            if not Path(key_file).is_file():
                raise BoxError(Connection.AUTH_FAILED,
                               f"{who}: identity file {key_file} is not a file")
            # Loaded here, one by one, so an unreadable or garbled key is named and is
            # auth_failed (asyncssh would report it as a network error or without a name).
            try:
                keys.extend(asyncssh.load_keypairs([key_file]))
            except (asyncssh.KeyImportError, OSError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise BoxError(Connection.AUTH_FAILED,
                               f"{who}: cannot load identity file {key_file}: {reason}") \
                    from None
        client = _Client(hop, self.store)
        try:
            conn = await asyncio.wait_for(asyncssh.connect(
                hop.host, hop.port, tunnel=tunnel if tunnel is not None else (),
                username=hop.user, client_keys=keys or (),
                known_hosts=self.store.trusted(), config=None,
                client_factory=lambda: client,
                connect_timeout=self.timeout, login_timeout=self.timeout,
                keepalive_interval=KEEPALIVE_SECONDS, keepalive_count_max=KEEPALIVE_COUNT,
                agent_forwarding=False, x509_trusted_certs=None,
            ), self.timeout)
        except TimeoutError:
            raise BoxError(Connection.TIMEOUT,
                           f"{who} ({hop.host}:{hop.port}): no SSH login within "
                           f"{self.timeout:g} s") from None
        except asyncssh.HostKeyNotVerifiable:
            entries = self.store.entries_for(hop.host, hop.port)
            if entries:
                raise BoxError(Connection.HOST_KEY_CHANGED, changed_message(
                    who, hop.known_hosts_name, client.offered, entries)) from None
            raise BoxError(Connection.HOST_KEY_UNKNOWN, unknown_message(
                who, hop.known_hosts_name, client.offered, self.store)) from None
        except asyncssh.PermissionDenied:
            keys = ", ".join(hop.identity_files) or "the default keys and agent"
            raise BoxError(Connection.AUTH_FAILED,
                           f"{who}: {hop.user}@{hop.host}:{hop.port} refused the key "
                           f"({keys})") from None
        except asyncssh.ChannelOpenError as exc:
            raise BoxError(Connection.UNREACHABLE,
                           f"{who}: the jump host could not reach {hop.host}:{hop.port} "
                           f"({exc.reason})") from None
        except asyncssh.KeyImportError as exc:  # a default key (no identity_file given)
            raise BoxError(Connection.AUTH_FAILED, f"{who}: cannot load identity file: {exc}") \
                from None
        except asyncssh.DisconnectError as exc:
            raise BoxError(Connection.UNREACHABLE,
                           f"{who} ({hop.host}:{hop.port}) disconnected: {exc.reason}") from None
        except OSError as exc:
            raise BoxError(Connection.UNREACHABLE,
                           f"{who} ({hop.host}:{hop.port}): {describe_os_error(exc)}") from None
        self._clients.append(client)
        return conn

    async def connect(self) -> None:
        """Open every hop in turn (jump hosts first); closes what was opened on failure."""
        try:
            hops = resolve_route(self.box, self._fleet)
        except RouteError as exc:
            raise BoxError(Connection.UNREACHABLE, f"box {self.box.name}: {exc}") from None
        await self.close()
        conns: list[asyncssh.SSHClientConnection] = []
        try:
            for index, hop in enumerate(hops):
                tunnel = conns[-1] if conns else None
                conns.append(await self._connect_hop(hop, tunnel, index == len(hops) - 1))
        except BaseException:
            self._conns = conns
            await self.close()
            raise
        self._conns = conns
        self.connects += 1

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The box's own connection (the last hop), opened first if needed; BoxError if not.

        For commands other than the probe (a manual box's stop_command), so they
        ride the session already held instead of logging in again.
        """
        async with self._lock:
            if not self.connected:
                await self.connect()
            return self._conns[-1]

    async def run_probe(self, request: dict[str, Any]) -> dict[str, Any]:
        """One round trip: (re)connect if needed, run the probe, decode its answer."""
        async with self._lock:
            if not self.connected:
                await self.connect()
            payload = probe_payload(request)
            try:
                result = await asyncio.wait_for(
                    self._conns[-1].run(PROBE_COMMAND, input=payload, encoding=None,
                                        check=False),
                    self.timeout)
            except TimeoutError:
                await self.close()
                raise BoxError(Connection.TIMEOUT,
                               f"box {self.box.name}: probe did not answer within "
                               f"{self.timeout:g} s") from None
            except asyncssh.ChannelOpenError as exc:
                await self.close()
                raise BoxError(Connection.PROBE_FAILED,
                               f"box {self.box.name}: the box refused a session: {exc.reason}") \
                    from None
            except (asyncssh.Error, OSError) as exc:
                await self.close()
                raise BoxError(Connection.UNREACHABLE,
                               f"box {self.box.name}: connection lost during the probe "
                               f"({exc})") from None
            if result.exit_status is None and not result.exit_signal:
                # asyncssh returns (not raises) when the connection drops mid-answer: a
                # truncated answer is the network's fault, not the probe's.
                await self.close()
                raise BoxError(Connection.UNREACHABLE,
                               f"box {self.box.name}: connection lost during the probe (the "
                               f"session ended without an exit status)")
        stdout = result.stdout if isinstance(result.stdout, bytes) else b""
        stderr = result.stderr if isinstance(result.stderr, bytes) else b""
        self.last_bytes_out, self.last_bytes_in = len(payload), len(stdout) + len(stderr)
        self.bytes_out += self.last_bytes_out
        self.bytes_in += self.last_bytes_in
        err_text = stderr.decode("utf-8", "replace").strip()
        if result.exit_status == 127 or (result.exit_status != 0 and "python3" in err_text
                                         and "not found" in err_text):
            raise BoxError(Connection.PROBE_FAILED,
                           f"box {self.box.name}: python3 not found on the box "
                           f"(install it, e.g. apt-get install python3-minimal)")
        if result.exit_status is None and result.exit_signal:
            raise BoxError(Connection.PROBE_FAILED,
                           f"box {self.box.name}: probe killed by signal {result.exit_signal[0]}")
        try:
            answer = decode_answer(stdout)
        except (ValueError, zlib.error) as exc:
            tail = err_text[-300:] or "no error output"
            raise BoxError(Connection.PROBE_FAILED,
                           f"box {self.box.name}: probe exited {result.exit_status} without "
                           f"a readable answer ({exc}): {tail}") from None
        return answer
