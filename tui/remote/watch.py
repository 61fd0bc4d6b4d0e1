"""Pollers: one refresh of one box, the endless loop around it, and a fleet snapshot.

These hold the only mutable state of the core (the latest BoxState per box)
and hand out immutable snapshots; the panel's workers and `status --json`
both drive them, so the two always agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial

from tui.model.box import (
    BadAnswer,
    BoxState,
    Connection,
    fold_answer,
    fold_failure,
    needs_more,
    probe_request,
)
from tui.model.box_redact import redact_answer, redact_words
from tui.model.config import BoxConfig, FleetConfig
from tui.model.rest import REST_PROBE_SECONDS, Rest
from tui.model.retry import backoff_delay
from tui.remote.hostkeys import HostKeyStore, host_key_store
from tui.remote.session import BoxError, BoxSession
from tui.store.secrets import recent_held_secrets

MAX_CATCH_UP_ROUNDS = 50
# The panel's watcher: a first look asks for every run's state and no history, so runs
# are on screen after one small round trip; history then streams in answers of about
# STREAM_BUDGET bytes, STREAM_CAP per run and read, each decoded and folded in a few ms
# between keys and frames. (A worker thread would not help: it holds the interpreter
# lock in 5 ms turns, and the event loop, which gives it up at every socket read and
# every decompression, waits a turn each time.) The cap stays below the budget, so one
# run's new epoch never defers the next run's.
STREAM_BUDGET = 128 << 10
STREAM_CAP = 48 << 10


FIRST_LOOKS = 4  # boxes connecting and taking their first look at once
# A box whose first look takes longer than this is waiting on the network (a banner that
# does not come, a slow link), not costing CPU: its turn passes on to the next box.
FIRST_LOOK_HOLD_SECONDS = 0.5
_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
    weakref.WeakKeyDictionary()
_FIRST: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
    weakref.WeakKeyDictionary()


def first_look_slot() -> asyncio.Semaphore:
    """A few boxes connect at a time, in config order: each SSH handshake costs the
    client a few ms of CPU, and twenty interleaved would put every box's first answer
    (and the first run on screen) behind all twenty handshakes."""
    loop = asyncio.get_running_loop()
    slots = _FIRST.get(loop)
    if slots is None:
        slots = _FIRST[loop] = asyncio.Semaphore(FIRST_LOOKS)
    return slots


@contextlib.asynccontextmanager
async def first_look_turn() -> AsyncIterator[None]:
    """A first-look slot held while the box's first look runs, at most
    FIRST_LOOK_HOLD_SECONDS: a box whose sshd takes the TCP connection and never sends a
    banner (or a hundred such boxes) delays the rest of the fleet by that, not by its
    timeout."""
    slots = first_look_slot()
    await slots.acquire()
    held = True

    def give_back() -> None:
        nonlocal held
        if held:
            held = False
            slots.release()

    timer = asyncio.get_running_loop().call_later(FIRST_LOOK_HOLD_SECONDS, give_back)
    try:
        yield
    finally:
        timer.cancel()
        give_back()


def fold_turn() -> asyncio.Lock:
    """One fold per turn of the event loop, fleet-wide: twenty boxes whose answers land
    together fold one after another, with keys and frames between them, not in one go."""
    loop = asyncio.get_running_loop()
    lock = _TURNS.get(loop)
    if lock is None:
        lock = _TURNS[loop] = asyncio.Lock()
    return lock


class BoxWatcher:
    """Keeps one box's state current: refresh on a timer, back off on failure."""

    def __init__(self, box: BoxConfig, fleet: FleetConfig, *, store: HostKeyStore | None = None,
                 clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = random.random) -> None:
        self.box = box
        self.fleet = fleet
        self.session = BoxSession(box, fleet, store or host_key_store(fleet))
        self.state = BoxState(name=box.name, refresh_seconds=fleet.refresh_seconds)
        self._clock = clock
        self._jitter = jitter
        self._wake = asyncio.Event()
        self.behind = False  # the last answer held back metrics history past its cap
        # Whether the box is at rest (stopped or destroyed on purpose: tui.model.rest), asked
        # when it does not answer; the runtime and `status` give the journal's answer.
        self.resting: Callable[[], Rest | None] = lambda: None

    async def refresh(self, *, catch_up: bool = False, budget: int | None = None,
                      cap: int = 1 << 20) -> BoxState:
        """One refresh; never raises for the box's own troubles (they become its state).

        With `catch_up`, keeps probing while some run still has metrics history
        the probe's per-read cap held back (a first look at a long run). `budget`:
        the history bytes one answer may carry (the probe's default when None; 0
        for the runs' states alone); `cap`: the bytes of one run's history per read.
        """
        rounds = MAX_CATCH_UP_ROUNDS if catch_up else 1
        try:
            for _ in range(rounds):
                # A hung nvidia-smi (a GPU fallen off the bus) must cost the GPU rows,
                # not the whole answer: give up on it well within the box's timeout.
                request = probe_request(self.state, self.box.runs_roots,
                                        gpu_timeout=min(10.0, self.session.timeout / 3),
                                        metrics_cap=cap, metrics_budget=budget)
                answer = await self.session.run_probe(request)
                # The box's words become the model's here: the secrets this process holds
                # (the Hub token it may have sent the box) are taken out of them first.
                shown = redact_answer(answer, self.secrets())
                async with fold_turn():
                    self.state = fold_answer(self.state, shown, self._clock(),
                                             self.fleet.refresh_seconds)
                    if self.state.rest is not None:  # it answers: running again
                        self.state = replace(self.state, rest=None)
                    await asyncio.sleep(0)  # the next box's fold waits for the next turn
                self.behind = needs_more(answer)
                if not self.behind:
                    break
        except BoxError as exc:
            self._fail(exc.connection, exc.message)
        except BadAnswer as exc:
            self._fail(Connection.PROBE_FAILED, f"box {self.box.name}: {exc}")
        return self.state

    def secrets(self) -> list[str]:
        """The secret values held now: the environment's, the saved Hub token, and this
        box's `token_env` (read again whenever the environment or the token file changed,
        so a variable set later counts at once)."""
        push = self.box.push
        return recent_held_secrets([push.token_env] if push is not None and push.token_env
                                   else [])

    def _fail(self, connection: Connection, message: str) -> None:
        """A box at rest is looked at again in REST_PROBE_SECONDS, not after a backoff.
        The message may quote the box (a probe's stderr, its fatal words): redacted."""
        message = redact_words(message, self.secrets())
        now = self._clock()
        rest = self.resting()
        delay = REST_PROBE_SECONDS if rest is not None else \
            backoff_delay(self.state.failures + 1, self._jitter())
        self.state = replace(fold_failure(self.state, connection, message, now,
                                          retry_at=now + delay), rest=rest)

    def next_delay(self) -> float:
        """Seconds until the next refresh: the refresh period, or the backoff after a failure."""
        if self.state.retry_at is not None:
            return max(0.0, self.state.retry_at - self._clock())
        return self.fleet.refresh_seconds

    def poke(self) -> None:
        """Refresh now (the `r` key), cutting any wait or backoff short."""
        self._wake.set()

    async def run(self, on_update: Callable[[BoxState], None]) -> None:
        """Refresh forever, reporting every new state; cancel the task to stop."""
        try:
            while True:
                # A first look carries no history (every run on screen after one small
                # answer); the history then streams in bounded answers.
                if self.state.last_ok_at is None and self.state.failures == 0:
                    async with first_look_turn():
                        state = await self.refresh(budget=0)
                else:
                    state = await self.refresh(
                        budget=0 if self.state.last_ok_at is None else STREAM_BUDGET,
                        cap=STREAM_CAP)
                on_update(state)
                if self.behind and state.connection is Connection.OK:
                    # Long histories arrive a capped read at a time: show each part as it
                    # comes and read the next at once, so runs appear before all is loaded.
                    continue
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.next_delay())
        finally:
            await self.session.close()

    async def close(self) -> None:
        await self.session.close()


async def snapshot_fleet(fleet: FleetConfig, *, store: HostKeyStore | None = None,
                         resting: Callable[[str], Rest | None] | None = None
                         ) -> list[BoxState]:
    """Every box once, in parallel, each with its whole history loaded; then disconnect.
    `resting`: whether a box that does not answer is at rest (by its name)."""
    store = store or host_key_store(fleet)
    watchers = [BoxWatcher(box, fleet, store=store) for box in fleet.boxes]
    if resting is not None:
        for watcher in watchers:
            watcher.resting = partial(resting, watcher.box.name)
    try:
        return list(await asyncio.gather(*(w.refresh(catch_up=True) for w in watchers)))
    finally:
        await asyncio.gather(*(w.close() for w in watchers))
