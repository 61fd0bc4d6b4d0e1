"""Opening one SSH hop, and sharing jump hosts between boxes.

Every hop gets the panel's host-key policy (tui.remote.hostkeys), the keys
OpenSSH would offer (tui.remote.keys) and the box's timeout; every failure
becomes a BoxError naming the hop.

Boxes behind the same jump host share one connection to it: one login on the
jump host however many boxes sit behind it. The shared connection lives as
long as some box uses it; when it drops, the first box to need it logs in
again and the others wait for that one attempt (and share its success, or
its failure) instead of each logging in on its own.

Every handshake first takes a slot at its endpoint and at the jump host it goes
through (tui.remote.gates), so a fleet of many boxes on one endpoint, or behind
one jump host, never has more unauthenticated connections in flight there
than the fleet's [connect] allows (the endpoint's slot is kept until the
server has taken the login over, as sshd counts it); one the server drops
before its banner anyway is tried again soon rather than read as the box
being down.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import asyncssh

from tui.model.box import Connection
from tui.model.fanout import (
    REFUSED_RETRIES,
    TAKEN_OVER_SECONDS,
    ConnectLimits,
    refused_delay,
)
from tui.remote.errors import BoxError, describe_os_error
from tui.remote.gates import loop_gates
from tui.remote.hostkeys import (
    HostKeyStore,
    changed_message,
    revoked_message,
    unknown_message,
)
from tui.remote.keys import Identities, load_identities
from tui.remote.route import Hop


class HopClient(asyncssh.SSHClient):
    """Judges the host key one hop offers (at that moment, under the pin lock), and
    notes when the connection is lost."""

    def __init__(self, hop: Hop, store: HostKeyStore) -> None:
        self.hop = hop
        self.store = store
        self.offered: asyncssh.SSHKey | None = None
        self.verdict: str | None = None
        self.lost = False
        self.conn: asyncssh.SSHClientConnection | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        self.offered = key
        self.verdict = self.store.decide(self.hop.host, self.hop.port, key)
        return self.verdict == "ok"

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    @property
    def dropped_before_banner(self) -> bool:
        """The server took the connection, then closed it before saying SSH-2.0 (what
        sshd does past its MaxStartups): worth another try soon, not a box down."""
        return self.conn is not None and self.conn.get_extra_info("server_version") is None


async def open_hop(hop: Hop, tunnel: asyncssh.SSHClientConnection | None, *,
                   store: HostKeyStore, timeout: float, who: str, via: str | None,
                   route: Sequence[Hop] = (), limits: ConnectLimits | None = None,
                   on_refused: Callable[[], None] | None = None,
                   jitter: Callable[[], float] = random.random,
                   ) -> tuple[asyncssh.SSHClientConnection, HopClient]:
    """Log in to one hop (through `tunnel`, the hop before it); BoxError if not.

    The handshake waits for its slots (tui.remote.gates: `route` is every hop up to
    this one, jump hosts first; `limits` the fleet's [connect]); the box's timeout
    counts from when it holds them. A handshake the server drops before its banner
    (sshd's MaxStartups) is tried again soon, jittered, up to REFUSED_RETRIES times
    (`on_refused` hears of each), and is said as such only if every try is dropped."""
    endpoints = [(h.host, h.port) for h in route] or [(hop.host, hop.port)]
    gates = loop_gates()
    tries = 0
    ids: Identities | None = None
    try:
        while True:
            client = HopClient(hop, store)
            async with gates.slots(endpoints, limits or ConnectLimits()) as outcome:
                if ids is None:  # in the slot: a thousand boxes waiting hold no agent socket
                    ids = await load_identities(hop, who, timeout)
                try:
                    conn = await _login(hop, tunnel, client, ids.keys, store, timeout)
                except (asyncssh.ConnectionLost, ConnectionResetError, ConnectionAbortedError,
                        BrokenPipeError) as exc:
                    if not client.dropped_before_banner:
                        raise
                    outcome.refused = True
                    error: BaseException = exc
                else:
                    try:
                        await taken_over(conn, min(timeout, TAKEN_OVER_SECONDS))
                    except BaseException:  # cancelled: the login is nobody's to close
                        conn.close()
                        raise
                    outcome.logged_in = True
                    return conn, client
            tries += 1
            if tries > REFUSED_RETRIES:
                raise BoxError(Connection.UNREACHABLE, refused_message(who, hop, tries, error))
            if on_refused is not None:
                on_refused()
            await asyncio.sleep(refused_delay(tries, jitter()))
    except TimeoutError:
        raise BoxError(Connection.TIMEOUT,
                       f"{who} ({hop.host}:{hop.port}): no SSH login within {timeout:g} s") \
            from None
    except asyncssh.HostKeyNotVerifiable:
        entries = store.entries_for(hop.host, hop.port)
        if client.verdict == "revoked":
            raise BoxError(Connection.HOST_KEY_REVOKED, revoked_message(
                who, hop.host, hop.port, client.offered, entries)) from None
        if any(e.marker is None for e in entries):
            raise BoxError(Connection.HOST_KEY_CHANGED, changed_message(
                who, hop.host, hop.port, client.offered, entries, store, via)) from None
        raise BoxError(Connection.HOST_KEY_UNKNOWN, unknown_message(
            who, hop.host, hop.port, client.offered, store, via)) from None
    except asyncssh.PermissionDenied:
        raise BoxError(Connection.AUTH_FAILED,
                       f"{who}: {hop.user}@{hop.host}:{hop.port} refused the key "
                       f"({ids.describe() if ids is not None else 'no key loaded'})") from None
    except asyncssh.ChannelOpenError as exc:
        raise BoxError(Connection.UNREACHABLE,
                       f"{who}: the jump host could not reach {hop.host}:{hop.port} "
                       f"({exc.reason})") from None
    except asyncssh.KeyImportError as exc:
        raise BoxError(Connection.AUTH_FAILED, f"{who}: cannot load identity file: {exc}") \
            from None
    except asyncssh.DisconnectError as exc:
        if "authentication failures" in exc.reason:  # sshd's MaxAuthTries ran out
            raise BoxError(Connection.AUTH_FAILED,
                           f"{who}: {hop.user}@{hop.host}:{hop.port} refused the key "
                           f"({ids.describe() if ids is not None else 'no key loaded'}): "
                           f"{exc.reason}") from None
        raise BoxError(Connection.UNREACHABLE,
                       f"{who} ({hop.host}:{hop.port}) disconnected: {exc.reason}") from None
    except OSError as exc:
        raise BoxError(Connection.UNREACHABLE,
                       f"{who} ({hop.host}:{hop.port}): {describe_os_error(exc)}") from None
    finally:
        if ids is not None:
            ids.close()


async def _login(hop: Hop, tunnel: asyncssh.SSHClientConnection | None, client: HopClient,
                 keys: Sequence[asyncssh.SSHKeyPair] | None, store: HostKeyStore,
                 timeout: float) -> asyncssh.SSHClientConnection:
    """One handshake and login, within `timeout`."""
    return await asyncio.wait_for(asyncssh.connect(
        hop.host, hop.port, tunnel=tunnel if tunnel is not None else (),
        username=hop.user, client_keys=keys or None, agent_path=None,
        known_hosts=store.known_hosts_for(hop.host, hop.port), config=None,
        client_factory=lambda: client,
        connect_timeout=timeout, login_timeout=timeout,
        keepalive_interval=hop.keepalive_interval, keepalive_count_max=hop.keepalive_count,
        agent_forwarding=False, x509_trusted_certs=None,
    ), timeout)


async def taken_over(conn: asyncssh.SSHClientConnection, timeout: float) -> None:
    """Return once the server has taken the new login over. sshd counts a connection
    against its MaxStartups until the process that serves the logged-in session takes
    over, a moment after the client is told it logged in: a slot given back at that word
    lets the next handshake in while the server still counts this one, and a server at
    its MaxStartups start drops it. Only that process answers a global request, so one
    is asked: `keepalive@openssh.com`, what OpenSSH's ServerAliveInterval sends and
    every server answers (a refusal is an answer), with no effect on the box, where a
    channel would run its shell. asyncssh asks it so for its own keepalives but offers
    no public call (it is pinned below 2.25); without the call, or with no answer
    within `timeout`, the slot is given back at once."""
    ask = getattr(conn, "_make_global_request", None)
    if ask is None:
        return
    with contextlib.suppress(asyncssh.Error, OSError):  # TimeoutError among them
        async with asyncio.timeout(timeout):
            await ask(b"keepalive@openssh.com")


def refused_message(who: str, hop: Hop, tries: int, error: BaseException) -> str:
    """Words for a hop that dropped every try before its SSH banner."""
    times = "once" if tries == 1 else f"{tries} times"
    return (f"{who} ({hop.host}:{hop.port}) closed the connection before its SSH banner, "
            f"{times} ({error or type(error).__name__}): it is turning new connections "
            "away (sshd's MaxStartups: set [connect] per_endpoint to its start) or "
            "nothing answers behind that port")


Opener = Callable[[], Awaitable[tuple[asyncssh.SSHClientConnection, HopClient]]]


@dataclass(eq=False)
class _Link:
    """One shared jump-host connection and who uses it."""

    conn: asyncssh.SSHClientConnection | None = None
    client: HopClient | None = None
    users: int = 0
    attempts: int = 0
    logins: int = 0
    error: BoxError | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def usable(self) -> bool:
        return (self.conn is not None and self.client is not None and not self.client.lost
                and not self.conn.is_closed())


class JumpPool:
    """The shared jump-host connections of one event loop, keyed by the whole route to
    the jump host (and the host-key policy it was checked with)."""

    def __init__(self) -> None:
        self._links: dict[object, _Link] = {}

    def logins(self, key: object) -> int:
        link = self._links.get(key)
        return link.logins if link else 0

    async def acquire(self, key: object, opener: Opener) -> asyncssh.SSHClientConnection:
        """The live shared connection for `key`, logging in if there is none; every
        successful acquire must be paired with one `release(key)`."""
        link = self._links.setdefault(key, _Link())
        seen = link.attempts
        async with link.lock:
            if link.usable():
                assert link.conn is not None
                link.users += 1
                return link.conn
            if link.attempts != seen and link.error is not None:
                # Someone tried while this box waited, and failed: one attempt per outage.
                raise BoxError(link.error.connection, link.error.message)
            link.attempts += 1
            if link.conn is not None:
                link.conn.close()
                link.conn = link.client = None
            try:
                conn, client = await opener()
            except BoxError as exc:
                link.error = exc
                raise
            link.conn, link.client, link.error = conn, client, None
            link.logins += 1
            link.users += 1
            return conn

    def release(self, key: object) -> asyncssh.SSHClientConnection | None:
        """One user fewer; the last one out closes the connection (returned, to be
        waited for)."""
        link = self._links.get(key)
        if link is None or link.users <= 0:
            return None
        link.users -= 1
        if link.users == 0 and link.conn is not None:
            conn, link.conn, link.client = link.conn, None, None
            conn.close()
            return conn
        return None


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, JumpPool] = \
    weakref.WeakKeyDictionary()


def jump_pool() -> JumpPool:
    """The pool of the running event loop: every session in one loop shares it."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = JumpPool()
    return pool


async def close_quietly(conn: asyncssh.SSHClientConnection) -> None:
    conn.close()
    with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
        await asyncio.wait_for(conn.wait_closed(), 2)
