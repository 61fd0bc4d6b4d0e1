"""Fanning out to many boxes: how many handshakes may be in flight where, when a refused
one is tried again, and how many files the fleet keeps open. Pure.

An sshd drops unauthenticated connections past its `MaxStartups` (OpenSSH's default
`10:30:100`: from 10 in flight, 30% of new ones, rising to all at 100; a strict
server's `3:30:10` drops from 3). Many boxes can share one SSH endpoint (a provider's
proxy serves every pod on one host and port, told apart by user), and a jump host
carries every box behind it: opening them all at once would trip it. So a handshake
waits for a slot at its endpoint (the server, as reached through the hops before it)
and, through a tunnel, at the jump host it goes through.

The endpoint slot is held for the whole handshake: that is what the server counts. The
jump host's slot is held for at most JUMP_HOLD_SECONDS: the jump host counts no
handshake of a box behind it (its sshd forwards bytes), and one that has taken that
long is waiting on the network (a box whose sshd never sends its banner, a slow link),
costing the tunnel nothing; held to its timeout, eight silent boxes would hold every
other box behind that jump host for as long.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_PER_ENDPOINT = 8     # under OpenSSH's default MaxStartups of 10
DEFAULT_PER_JUMP_HOST = 8    # handshakes through one jump host's tunnel at once
DEFAULT_PER_PROVIDER = 4     # provider API requests in flight at once, per provider
# A handshake through a jump host gives that jump host's slot back after this long, and
# goes on (holding its endpoint's): about a handshake over a 100 ms round trip.
JUMP_HOLD_SECONDS = 0.5
# After a login, a handshake keeps its endpoint slot until the server answers on the new
# connection (as sshd counts it), but no longer than this: a server that never answers
# a global request must not hold its slot, or the box, for a whole timeout.
TAKEN_OVER_SECONDS = 2.0
# A handshake dropped before the server's banner (MaxStartups, or nothing behind a
# proxy's port) is tried again this many times, soon and jittered, within the timeout.
REFUSED_RETRIES = 6
REFUSED_FIRST_SECONDS = 0.25
REFUSED_CAP_SECONDS = 2.0
# Open files beyond the fleet's own sockets: the ledger, the journal, pipes, the
# terminal, the event loop's own, a few monitors' listeners.
FD_MARGIN = 64

Endpoint = tuple[str, int]
GateKey = tuple[str, tuple[Endpoint, ...]]  # ("endpoint" | "jump host", the route to it)


@dataclass(frozen=True)
class ConnectLimits:
    """The fleet config's `[connect]` table: how much is opened at once."""

    per_endpoint: int = DEFAULT_PER_ENDPOINT
    per_jump_host: int = DEFAULT_PER_JUMP_HOST
    per_provider: int = DEFAULT_PER_PROVIDER


def handshake_gates(route: Sequence[Endpoint]) -> tuple[GateKey, ...]:
    """The slots a handshake with the last of `route` (jump hosts first) waits for, in
    the order to take them: its endpoint, then the jump host it goes through (when
    tunnelled). Endpoint first: a box waiting for a busy endpoint (one whose sshd holds
    its connections silent) must not sit on a jump-host slot the boxes behind that jump
    host at other endpoints need. An endpoint is keyed by the whole route to it:
    127.0.0.1:22 behind one jump host is another server than 127.0.0.1:22 here. The user
    is not part of the key: boxes told apart by user on one proxy share its
    MaxStartups."""
    if not route:
        raise ValueError("a handshake needs at least one hop")
    path = tuple(route)
    endpoint: GateKey = ("endpoint", path)
    if len(path) == 1:
        return (endpoint,)
    return (endpoint, ("jump host", path[:-1]))


def gate_limit(key: GateKey, limits: ConnectLimits) -> int:
    """The configured number of handshakes in flight at once through `key`."""
    return limits.per_endpoint if key[0] == "endpoint" else limits.per_jump_host


def gate_hold(key: GateKey) -> float | None:
    """The longest a handshake holds its slot at `key`: None (to its end) at an
    endpoint, whose server counts it; JUMP_HOLD_SECONDS at a jump host, which does not."""
    return None if key[0] == "endpoint" else JUMP_HOLD_SECONDS


def narrowed(window: int, in_flight: int) -> int:
    """A gate's new window after the server dropped a handshake: half of what was in
    flight (never under 1), so a server stricter than the config is met where it is."""
    return max(1, min(window, in_flight) // 2)


def refused_delay(tries: int, jitter: float) -> float:
    """Seconds before trying a dropped handshake again (`tries` drops so far, `jitter` a
    draw in [0, 1)): doubling from REFUSED_FIRST_SECONDS to REFUSED_CAP_SECONDS, a
    random half of it, so the dropped ones do not all come back together."""
    delay = min(REFUSED_CAP_SECONDS, REFUSED_FIRST_SECONDS * 2.0 ** max(0, min(tries - 1, 16)))
    return delay / 2 + delay / 2 * min(max(jitter, 0.0), 1.0)


@dataclass(frozen=True)
class BoxRoute:
    """What the open-files estimate needs of one box: its `jump` chain, its provider."""

    jump: str | None
    provider: str


def sockets_needed(boxes: Iterable[BoxRoute], limits: ConnectLimits) -> tuple[int, int, int]:
    """(box sockets, jump host sockets, provider sockets) a fleet holds open: one per box
    reached directly, one per first jump host (the boxes behind it ride its connection,
    and so do the later hops of a chain), and the provider clients' connections."""
    direct = 0
    jumps: set[str] = set()
    providers: set[str] = set()
    for box in boxes:
        if box.jump:
            jumps.add(box.jump.split(",")[0].strip())
        else:
            direct += 1
        if box.provider != "manual":
            providers.add(box.provider)
    return direct, len(jumps), limits.per_provider * len(providers)


def files_needed(boxes: Iterable[BoxRoute], limits: ConnectLimits) -> int:
    """The open files the fleet needs: its sockets plus FD_MARGIN."""
    return sum(sockets_needed(boxes, limits)) + FD_MARGIN


def soft_limit_wanted(soft: int, hard: int | None, needed: int) -> int:
    """The soft RLIMIT_NOFILE to set: the hard limit (None: unlimited, then what the
    fleet needs), never lower than it is."""
    return max(soft, hard if hard is not None else needed)


def files_warning(needed: int, soft: int, hard: int | None, boxes: int) -> str | None:
    """One line when the fleet needs more open files than this process may have (`soft`,
    after raising it to `hard`); None when it fits."""
    if needed <= soft:
        return None
    cap = f"the hard limit is {hard}" if hard is not None and hard <= soft else \
        f"the limit could be raised to {soft} only"
    return (f"open files: {boxes} box(es) need about {needed} open files, but this process "
            f"may open {soft} ({cap}): boxes past it will read unreachable (too many open "
            f"files); raise it (`ulimit -Hn {needed}` as root, LimitNOFILE={needed} in a "
            "systemd unit, or nofile in /etc/security/limits.conf) and start again")
