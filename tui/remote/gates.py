"""Slots for SSH handshakes: at most so many in flight per endpoint and per jump host.

An endpoint's gate is held from the TCP connect until the server has taken the
login over (hops.taken_over: as long as sshd counts a connection against its
MaxStartups) and nothing longer: a box's kept connection holds no slot. A jump
host's gate is held at most JUMP_HOLD_SECONDS, then given back while the
handshake goes on, so boxes that never answer do not hold up the others behind
that jump host. Which gates a
handshake takes, for how long, and the configured sizes are tui.model.fanout's;
here they are waited for.

A gate's window starts at its configured size and narrows to half of what was
in flight when the server drops a handshake before its banner (a server
stricter than the config), then widens again by one for every window's worth
of logins. A change of the configured size (the config reloaded) applies to
the next handshake. Every gate of one event loop lives in one registry, as the
jump hosts' shared connections do.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import weakref
from collections.abc import AsyncIterator, Sequence

from tui.model.fanout import (
    ConnectLimits,
    Endpoint,
    GateKey,
    gate_hold,
    gate_limit,
    handshake_gates,
    narrowed,
)


class Gate:
    """At most `window` holders at once (`window` <= the configured `limit`), first come
    first served."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.window = limit
        self.in_flight = 0
        self.most = 0          # the most ever in flight at once
        self.refused = 0       # handshakes the server dropped before its banner
        self._grown = 0        # logins since the window last widened
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def configure(self, limit: int) -> None:
        """The configured size, as the config in force says (it may have been reloaded)."""
        if limit != self.limit:
            self.limit = limit
            self.window = min(self.window, limit) if self.refused else limit
            self._wake()

    async def acquire(self) -> None:
        if self.in_flight >= self.window or self._waiters:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release_slot()  # handed a slot as it was cancelled: pass it on
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
                raise
        else:
            self.in_flight += 1
        self.most = max(self.most, self.in_flight)

    def release(self, *, refused: bool = False, logged_in: bool = False) -> None:
        """Give the slot back; `refused`: the server dropped this handshake before its
        banner (narrow the window); `logged_in`: it succeeded (widen it, slowly)."""
        if refused:
            self.refused += 1
            self.window = narrowed(self.window, self.in_flight)
            self._grown = 0
        elif logged_in and self.window < self.limit:
            self._grown += 1
            if self._grown >= self.window:
                self.window += 1
                self._grown = 0
        self._release_slot()

    def _release_slot(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.window:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


class Gates:
    """Every handshake gate of one event loop, by key."""

    def __init__(self) -> None:
        self.gates: dict[GateKey, Gate] = {}

    def gate(self, key: GateKey, limits: ConnectLimits) -> Gate:
        limit = gate_limit(key, limits)
        gate = self.gates.get(key)
        if gate is None:
            gate = self.gates[key] = Gate(limit)
        else:
            gate.configure(limit)
        return gate

    @property
    def refused(self) -> int:
        """Handshakes dropped before the banner, every gate together (diagnostics)."""
        return sum(g.refused for k, g in self.gates.items() if k[0] == "endpoint")

    @contextlib.asynccontextmanager
    async def slots(self, route: Sequence[Endpoint], limits: ConnectLimits
                    ) -> AsyncIterator[Outcome]:
        """Hold a slot at every gate of a handshake with the last of `route` while the
        body runs (a jump host's for at most its hold: fanout.gate_hold); the body says
        how it went through the Outcome it is given."""
        taken: list[_Held] = []
        outcome = Outcome()
        loop = asyncio.get_running_loop()
        try:
            for key in handshake_gates(route):
                gate = self.gate(key, limits)
                await gate.acquire()
                held = _Held(key, gate)
                taken.append(held)
                hold = gate_hold(key)
                if hold is not None:
                    held.timer = loop.call_later(hold, held.give_back)
            yield outcome
        finally:
            for held in reversed(taken):
                held.give_back(refused=outcome.refused and held.key[0] == "endpoint",
                               logged_in=outcome.logged_in)


class _Held:
    """One slot a handshake holds: given back once, at its hold's end or the
    handshake's, whichever comes first."""

    def __init__(self, key: GateKey, gate: Gate) -> None:
        self.key = key
        self.gate = gate
        self.timer: asyncio.TimerHandle | None = None
        self.held = True

    def give_back(self, *, refused: bool = False, logged_in: bool = False) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.held:
            self.held = False
            self.gate.release(refused=refused, logged_in=logged_in)


class Outcome:
    """How a handshake ended, as the gates want to know it."""

    def __init__(self) -> None:
        self.refused = False
        self.logged_in = False


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Gates] = \
    weakref.WeakKeyDictionary()


def loop_gates() -> Gates:
    """The gates of the running event loop: every session in one loop shares them."""
    loop = asyncio.get_running_loop()
    gates = _GATES.get(loop)
    if gates is None:
        gates = _GATES[loop] = Gates()
    return gates
