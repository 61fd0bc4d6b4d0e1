"""Opening one SSH hop, and sharing jump hosts between boxes.

Every hop gets the panel's host-key policy (tui.remote.hostkeys), the keys
OpenSSH would offer (tui.remote.keys) and the box's timeout; every failure
becomes a BoxError naming the hop.

Boxes behind the same jump host share one connection to it: one login on the
jump host however many boxes sit behind it. The shared connection lives as
long as some box uses it; when it drops, the first box to need it logs in
again and the others wait for that one attempt (and share its success, or
its failure) instead of each logging in on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncssh

from tui.model.box import Connection
from tui.remote.errors import BoxError, describe_os_error
from tui.remote.hostkeys import (
    HostKeyStore,
    changed_message,
    revoked_message,
    unknown_message,
)
from tui.remote.keys import load_identities
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

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        self.offered = key
        self.verdict = self.store.decide(self.hop.host, self.hop.port, key)
        return self.verdict == "ok"

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


async def open_hop(hop: Hop, tunnel: asyncssh.SSHClientConnection | None, *,
                   store: HostKeyStore, timeout: float, who: str, via: str | None
                   ) -> tuple[asyncssh.SSHClientConnection, HopClient]:
    """Log in to one hop (through `tunnel`, the hop before it); BoxError if not."""
    ids = await load_identities(hop, who, timeout)
    client = HopClient(hop, store)
    try:
        conn = await asyncio.wait_for(asyncssh.connect(
            hop.host, hop.port, tunnel=tunnel if tunnel is not None else (),
            username=hop.user, client_keys=ids.keys or None, agent_path=None,
            known_hosts=store.known_hosts_for(hop.host, hop.port), config=None,
            client_factory=lambda: client,
            connect_timeout=timeout, login_timeout=timeout,
            keepalive_interval=hop.keepalive_interval, keepalive_count_max=hop.keepalive_count,
            agent_forwarding=False, x509_trusted_certs=None,
        ), timeout)
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
                       f"({ids.describe()})") from None
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
                           f"({ids.describe()}): {exc.reason}") from None
        raise BoxError(Connection.UNREACHABLE,
                       f"{who} ({hop.host}:{hop.port}) disconnected: {exc.reason}") from None
    except OSError as exc:
        raise BoxError(Connection.UNREACHABLE,
                       f"{who} ({hop.host}:{hop.port}): {describe_os_error(exc)}") from None
    finally:
        ids.close()
    return conn, client


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
