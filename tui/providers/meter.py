"""The cost meter's I/O: poll the providers, append billing segments to the ledger.

`CostMeter.update(boxes)` is cheap (a stat of the ledger and an occasional
append) and runs on every box refresh; `poll()` asks each provider about its
instances and runs on its own slower timer, because providers rate-limit.
`record_outcome` is how a stop, start or destroy reaches the ledger: its
effect read back starts the new segment; an effect not read back leaves the
box billing at its running rate, marked "may still be billing".
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from tui.model.bill import (
    BUSY_EVERY_SECONDS,
    RUNNING_STATES,
    Busy,
    Event,
    Seen,
    last_busy_end,
    restored_busy,
    unconfirmed_note,
)
from tui.model.box import BoxState
from tui.model.busy import BusyIntegral
from tui.model.config import BoxConfig, FleetConfig
from tui.model.cost import Rate, box_rates, usd
from tui.model.instance import InstanceInfo, PowerOutcome, gone
from tui.model.meter import (
    FAILED,
    FleetCost,
    MeterCache,
    activity_marks,
    idle_on_record,
    meter,
    observe,
)
from tui.model.rest import Rest, box_rest
from tui.model.rightsize import Measured, measure
from tui.providers import ProviderClient, ProviderError, make_client
from tui.store.ledger import Ledger
from tui.store.throughput import ThroughputStore

PROVIDER_POLL_SECONDS = 60.0
# A billing box the ledger has said nothing of for this long gets a "seen" note: if the
# box leaves the config, its history runs to the last one, not to its last rate change.
SEEN_EVERY_SECONDS = 900.0
# An update told which boxes were refreshed compares only them with the ledger, but every
# box at least this often: well inside the 15-minute seen notes and busy records.
FULL_LOOK_SECONDS = 60.0


def local_midnight(now: float) -> float:
    """Start of today on the local clock: "spent today" counts from here."""
    stamp = datetime.fromtimestamp(now)
    return stamp.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def known_running_rate(ledger: Ledger, box: str) -> Rate | None:
    """The running rate the ledger last billed this box at (a stopped pod reports none)."""
    history = ledger.book.boxes.get(box)
    last = history.last_rate(("running",)) if history is not None else None
    return Rate(last.usd_per_hr, last.source, "the running rate last billed") if last else None


class CostMeter:
    """Keeps the providers' facts, the idle clocks and the ledger; folds FleetCost."""

    def __init__(self, fleet: FleetConfig, *, ledger: Ledger | None = None,
                 clients: Mapping[str, ProviderClient] | None = None,
                 clock: Callable[[], float] = time.time,
                 env: Mapping[str, str] | None = None,
                 throughput: ThroughputStore | None = None) -> None:
        self.fleet = fleet
        self.ledger = ledger or Ledger()
        # Beside the ledger, so a ledger elsewhere (a test's) keeps its measurements there too.
        self.throughput = throughput or ThroughputStore(
            self.ledger.path.with_name("throughput.jsonl"))
        self._clock = clock
        self._env = env
        self.clients: dict[str, ProviderClient] = dict(clients or {})
        self.facts: dict[str, InstanceInfo] = {}
        self.read_at: dict[str, float] = {}      # when each box's facts were read
        self.read_before: dict[str, float] = {}  # the read before that (old state last seen)
        self.running_rate: dict[str, Rate] = {}  # the last running rate an API gave
        self.down_at: dict[str, float] = {}      # when a box was last seen not answering
        self.errors: dict[str, str] = {}
        self.idle: dict[str, float] = {}
        # Boxes whose idle clock may still come from the ledger (until the box first
        # answers in this session): a restart keeps the idle spell it interrupted.
        self._idle_from_ledger: set[str] = {b.name for b in fleet.boxes}
        # Each box's busy integral as last written to the ledger (covered_s, busy_s), and
        # when: the next record carries only what grew since.
        self.busy_written: dict[str, tuple[float, float]] = {}
        self.busy_written_at: dict[str, float] = {}
        # What the once-a-second fold keeps of each box between folds (its runs' unit
        # costs, its rates): a fold works out afresh only the boxes that changed.
        self.fold_cache = MeterCache()
        self._full_look_at = -math.inf  # when every box was last compared with the ledger

    def _client(self, provider: str) -> ProviderClient:
        if provider not in self.clients:
            self.clients[provider] = make_client(provider, self.fleet, env=self._env)
        return self.clients[provider]

    def _seen(self, name: str, facts: InstanceInfo) -> None:
        now = self._clock()
        if name in self.read_at:
            self.read_before[name] = self.read_at[name]
        self.facts[name], self.read_at[name] = facts, now
        if facts.running_usd_per_hr is not None:
            self.running_rate[name] = Rate(facts.running_usd_per_hr, "api")

    async def poll(self) -> None:
        """Ask each provider about each of its boxes, in parallel; errors are kept per box.

        An instance the provider no longer has (404) after it was seen, or
        while the ledger bills it, reads as destroyed: nothing is billed.
        """
        async def one(name: str, provider: str, instance_id: str) -> None:
            try:
                facts = await self._client(provider).get(instance_id)
            except ProviderError as exc:
                self.errors[name] = exc.message
                last = self.ledger.last(name)
                known = name in self.facts or (last is not None and last.state != "destroyed")
                if exc.kind == "not_found" and known:
                    self._seen(name, gone(provider, instance_id))
            else:
                self.errors.pop(name, None)
                self._seen(name, facts)

        jobs = []
        for box in self.fleet.boxes:
            if box.provider == "manual":
                continue
            if box.instance_id is None:
                self.errors[box.name] = (f"box {box.name}: set instance_id to read its rates "
                                         f"from {box.provider}")
                continue
            jobs.append(one(box.name, box.provider, box.instance_id))
        await asyncio.gather(*jobs)

    def update(self, boxes: Iterable[BoxState],
               only: str | Collection[str] | None = None) -> FleetCost:
        """Fold the current picture; start a ledger segment where an observation says the
        state or rate changed, and an activity mark where the runs' activity did.

        `only`: the box (or boxes) whose refresh caused this (nothing else was observed
        since the last update), so only they are compared with the ledger; the fold covers
        all. Every box is compared at least every FULL_LOOK_SECONDS all the same, so what
        the clock alone brings due (a seen note, a busy record) is not held up by a box
        that is not refreshed."""
        now = self._clock()
        self.ledger.refresh()
        states = {b.name: b for b in boxes}
        book = self.ledger.book
        watched = None if only is None else {only} if isinstance(only, str) else set(only)
        if watched is not None and now - self._full_look_at >= FULL_LOOK_SECONDS:
            watched = None
        if watched is None:
            self._full_look_at = now
        for box in self.fleet.boxes:
            state = states.get(box.name)
            if state is not None and state.connection in FAILED:
                self.down_at[box.name] = now
            if watched is not None and box.name not in watched:
                continue
            known = self.running_rate.get(box.name) or known_running_rate(self.ledger, box.name)
            event = observe(box, self.facts.get(box.name), self.read_at.get(box.name, now)
                            if box.name in self.facts else None,
                            self.read_before.get(box.name), state, book.boxes.get(box.name),
                            self.down_at.get(box.name), known)
            if event is not None:
                self.ledger.record(event)
            for mark in activity_marks(box.name, state, book.boxes.get(box.name), now):
                self.ledger.mark(mark)
            if state is not None:
                self._record_busy(state, now)
            history = book.boxes.get(box.name)
            last = history.last if history is not None else None
            if history is not None and last is not None and last.state != "destroyed" \
                    and now - (history.watched_until or now) >= SEEN_EVERY_SECONDS:
                self.ledger.seen(Seen(now, box.name))
        self._restore_idle(states, now)
        cost = meter(self.fleet, states.values(), self.facts, book, self.idle, now,
                     local_midnight(now), self.errors, cache=self.fold_cache)
        self.idle = {n: c.idle_since for n, c in cost.boxes.items() if c.idle_since is not None}
        self.throughput.record(measurements(cost, states, now))
        return cost

    def right_size(self) -> list[Measured]:
        """Every box's newest measurement, this fleet's and those ran before."""
        return self.throughput.latest()

    def _restore_idle(self, states: Mapping[str, BoxState], now: float) -> None:
        """Take each box's idle-since from the ledger until it first answers here (after
        this update's marks, so a spell that ended while no meter looked is not taken)."""
        for name in list(self._idle_from_ledger):
            since = idle_on_record(self.ledger.book.boxes.get(name), now)
            if since is not None:
                self.idle[name] = min(since, self.idle.get(name, since))
            state = states.get(name)
            if state is not None and state.last_ok_at is not None:
                self._idle_from_ledger.discard(name)

    def _record_busy(self, state: BoxState, now: float, *, flush: bool = False) -> None:
        """Append what the box's busy integral grew by since its last record, at most every
        BUSY_EVERY_SECONDS (`flush`: now, as the meter closes). An integral smaller than
        what was written started afresh (a new watcher): it is counted from zero."""
        covered, busy = state.busy.covered_s, state.busy.busy_s
        if state.name not in self.busy_written:
            self._skip_recorded(state)
        base_covered, base_busy = self.busy_written.get(state.name, (0.0, 0.0))
        if covered < base_covered:
            base_covered = base_busy = 0.0
        grown = covered - base_covered
        if grown < 0.001:
            return
        last = self.busy_written_at.get(state.name)
        if not flush and last is not None and now - last < BUSY_EVERY_SECONDS:
            return
        added = min(max(busy - base_busy, 0.0), grown)
        since = last if last is not None and now - last >= grown else None
        self.ledger.busy(Busy(now, state.name, grown, added, since))
        self.busy_written[state.name] = (covered, busy)
        self.busy_written_at[state.name] = now

    def _skip_recorded(self, state: BoxState) -> None:
        """A meter's first record for a box it did not restore (a one-shot `status`)
        leaves out the seconds the ledger's last record already covers: the integral's
        windows folded again from that record's end give what is new (written at once, as
        any meter's first record); the rest is taken as written."""
        end = last_busy_end(self.ledger.book.boxes.get(state.name))
        if end is None:
            return
        fresh = BusyIntegral(last_at=end)
        for window in state.busy.recent:
            fresh = fresh.add(window)
        self.busy_written[state.name] = (max(state.busy.covered_s - fresh.covered_s, 0.0),
                                         max(state.busy.busy_s - fresh.busy_s, 0.0))

    def restore_busy(self, name: str) -> BusyIntegral:
        """The box's busy integral from the ledger, taken as already written: a starting
        runtime carries on from it, and only what grows after it is appended."""
        history = self.ledger.book.boxes.get(name)
        integral = restored_busy(history)
        if integral.covered_s > 0 and history is not None:
            self.busy_written[name] = (integral.covered_s, integral.busy_s)
            self.busy_written_at[name] = history.busy_times[-1]
        return integral

    def flush_busy(self, boxes: Iterable[BoxState]) -> None:
        """Write every box's busy time not yet in the ledger (the panel or `watch` quits)."""
        names = {b.name for b in self.fleet.boxes}
        now = self._clock()
        for state in boxes:
            if state.name in names:
                self._record_busy(state, now, flush=True)

    def fleet_events(self) -> list[Event]:
        """The configured boxes' segments (what the cost screen plots)."""
        names = {b.name for b in self.fleet.boxes}
        return [e for e in self.ledger.events if e.box in names]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.clients.values()))


# --- actions reach the ledger -------------------------------------------------


def measurements(cost: FleetCost, states: Mapping[str, BoxState], now: float) -> list[Measured]:
    """What this fold measured: each run with images/s and $/1k images on its box, at
    the box's billed running rate."""
    found = []
    for name, box_cost in cost.boxes.items():
        state, rate = states.get(name), box_cost.rate_now
        if state is None or rate is None or box_cost.rates.state not in RUNNING_STATES:
            continue
        gpus = [g.name for g in state.gpus]
        for run in state.runs:
            unit = box_cost.units.get(run.path)
            data = run.dataset
            if unit is None or data is None:
                continue
            m = measure(name, gpus, run.status, data.imgsz, data.batch,
                        unit.images_per_second, unit.usd_per_1k_images, rate.usd_per_hr, now)
            if m is not None:
                found.append(m)
    return found


def record_outcome(ledger: Ledger, box: BoxConfig, outcome: PowerOutcome, sent_at: float,
                   ended_at: float) -> Event | None:
    """Start the segment an action's outcome calls for, and return it (None: nothing to bill).

    Read back (done, with the state it reads): a stop or destroy bills the
    stopped (disk) rate or nothing from when it was read; a start bills the
    running rate from when it was sent. Not read back (unknown, or a command
    that ran while its effect could not be seen): the box is billed at its
    running rate ("may still be billing") until something is observed.
    Failed and refused actions changed nothing and add nothing.
    """
    ledger.refresh()
    last = ledger.last(box.name)
    rates = box_rates(box.provider, box.pricing, outcome.info_after)
    running = rates.running or known_running_rate(ledger, box.name)
    if running is None and last is not None and last.state in RUNNING_STATES:
        running = Rate(last.usd_per_hr, last.source)
    observed = outcome.outcome == "done" and outcome.state_after in (
        "stopped", "destroyed", "running")
    if observed:
        state = str(outcome.state_after)
        if state == "destroyed":
            event = Event(ended_at, box.name, "destroyed", 0.0, "computed")
        elif state == "stopped":
            rate = rates.stopped or Rate(0.0, "unknown", "stopped; what its disk bills is "
                                         "unknown")
            event = Event(ended_at, box.name, "stopped", rate.usd_per_hr, rate.source,
                          rate.note if rate.source == "unknown" else "")
        else:
            if running is None:
                return None
            event = Event(sent_at, box.name, "running", running.usd_per_hr, running.source)
    elif outcome.outcome == "unknown" or outcome.outcome == "done":
        if running is None:
            return None
        # From when it was sent: whatever is seen after that (a box that stops
        # answering, a provider read) is news about this action.
        event = Event(sent_at, box.name, "unknown", running.usd_per_hr, running.source,
                      unconfirmed_note(outcome.action, usd(running.usd_per_hr)))
    else:
        return None
    history = ledger.book.boxes.get(box.name)
    before = history.at(event.t) if history is not None else None
    if before is not None and (before.state, before.usd_per_hr, before.note) == (
            event.state, event.usd_per_hr, event.note):
        return None
    return ledger.record(event)


__all__ = ["PROVIDER_POLL_SECONDS", "CostMeter", "local_midnight", "record_outcome"]


def rest_of(fleet: FleetConfig, entries: Iterable[Mapping[str, Any]], meter: CostMeter | None,
            box: str) -> Rest | None:
    """A silent box's rest (tui.model.rest.box_rest), with the provider's last answer on it
    as this meter read it, and when (none for a manual box or one not read yet)."""
    facts = meter.facts.get(box) if meter is not None else None
    if meter is None or facts is None:
        return box_rest(entries, box, None)
    return box_rest(entries, box, facts.state, meter.read_at.get(box))
