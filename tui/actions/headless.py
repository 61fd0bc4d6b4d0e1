"""`gpurent-tui watch`: the panel's policies without its screen.

The same watchers, meter, journal and Guardian as the panel: each box is
refreshed on its own timer, every new state is folded into the money picture
and judged (alerts, idle and budget alarms, `on_budget = "push-and-stop"`,
milestone pushes), and what happens is one log line on stdout. Actions run as
tasks, one per box at a time, through the same flows as the panel's keys.

Stopping (`stop` set: SIGTERM or SIGINT) waits for actions in flight for up to
STOP_GRACE_SECONDS (a push writes `.part` files and renames each only once
verified, so one cut short leaves nothing half-written, only a `.part` the next
push resumes), then closes every SSH session and HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Awaitable, Callable

from tui.actions.alerts import AlertSender
from tui.actions.flows import Report, push_and_stop, push_runs
from tui.actions.guardian import Guardian
from tui.model.alerts import BOX_IDLE, OVER_BUDGET, PUSH_FAILED, AlertEvent, event
from tui.model.box import BoxState
from tui.model.config import BoxConfig, FleetConfig
from tui.model.milestones import RETRY_BASE_SECONDS, Wish
from tui.model.retry import backoff_delay
from tui.providers.meter import PROVIDER_POLL_SECONDS, CostMeter
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal
from tui.store.secrets import scrub

STOP_GRACE_SECONDS = 30.0

Log = Callable[[str], None]


class Watch:
    """One headless watch over a fleet."""

    def __init__(self, fleet: FleetConfig, *, journal: Journal | None = None,
                 meter: CostMeter | None = None, log: Log = print,
                 clock: Callable[[], float] = time.time,
                 poll_seconds: float = PROVIDER_POLL_SECONDS,
                 retry_seconds: float = RETRY_BASE_SECONDS) -> None:
        self.fleet = fleet
        self.log: Log = lambda line: log(scrub(line))  # box words in every line: redacted
        self.clock = clock
        self.poll_seconds = poll_seconds
        self.journal = journal if journal is not None else Journal()
        self.meter = meter if meter is not None else CostMeter(fleet, clock=clock)
        self.sender = AlertSender(fleet.alerts, log=self.log)
        self.guardian = Guardian(fleet, self.journal, sender=self.sender, clock=clock,
                                 retry_seconds=retry_seconds)
        store = host_key_store(fleet)
        self.watchers = {b.name: BoxWatcher(b, fleet, store=store, clock=clock)
                         for b in fleet.boxes}
        self.states: dict[str, BoxState] = {}
        self.busy: dict[str, asyncio.Task[None]] = {}
        self._updates: asyncio.Queue[BoxState] = asyncio.Queue()

    def _events(self, events: list[AlertEvent]) -> None:
        for item in events:
            self.log(item.log_line())

    async def run(self, stop: asyncio.Event) -> int:
        """Watch until `stop` is set; 0 once everything is closed."""
        boxes = ", ".join(b.name for b in self.fleet.boxes)
        self.log(f"watch: {len(self.fleet.boxes)} box(es) ({boxes}) from {self.fleet.source}"
                 + (f"; alerts to {self.sender.where or ''}"
                    f"{' and a command' if self.fleet.alerts.command else ''}"
                    if self.sender.active else ""))
        tasks = [asyncio.create_task(self._supervise(w), name=f"watch {n}")
                 for n, w in self.watchers.items()]
        tasks.append(asyncio.create_task(self._poll_costs(), name="providers"))
        stopping = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                getting = asyncio.create_task(self._updates.get())
                done, _ = await asyncio.wait({getting, stopping},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getting not in done:
                    getting.cancel()
                    break
                self._updated(getting.result())
        finally:
            self.log("watch: stopping")
            stopping.cancel()
            if self.busy:
                self.log(f"watch: waiting up to {STOP_GRACE_SECONDS:g} s for "
                         f"{', '.join(sorted(self.busy))}")
                _, late = await asyncio.wait(set(self.busy.values()),
                                             timeout=STOP_GRACE_SECONDS)
                for task in late:
                    task.cancel()
                if late:
                    await asyncio.wait(late)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(w.close() for w in self.watchers.values()),
                                 return_exceptions=True)
            await self.meter.aclose()
            await self.sender.aclose()
            self.log("watch: stopped, every connection closed")
        return 0

    async def _supervise(self, watcher: BoxWatcher) -> None:
        """A watcher that raised (a bug, never the box's own trouble) is said and started
        again after a backoff, as the panel does."""
        crashes = 0
        while True:
            try:
                await watcher.run(self._updates.put_nowait)
            except Exception as exc:
                crashes += 1
                delay = backoff_delay(crashes, random.random())
                self.log(f"box {watcher.box.name}: watcher crashed ({type(exc).__name__}: "
                         f"{exc}); restarted in {delay:.0f} s")
                await asyncio.sleep(delay)

    async def _poll_costs(self) -> None:
        while True:
            try:
                await self.meter.poll()
                self._judge(None)
            except Exception as exc:  # a bug must not end the providers' polling for good
                self.log(f"providers: poll failed ({type(exc).__name__}: {exc})")
            await asyncio.sleep(self.poll_seconds)

    def _updated(self, state: BoxState) -> None:
        before = self.states.get(state.name)
        self.states[state.name] = state
        if before is None or before.connection != state.connection:
            words = f"{state.connection}" + (f": {state.error}" if state.error and
                                            state.connection != "ok" else "")
            self.log(f"box {state.name}: {words}")
        self._events(self.guardian.box_updated(before, state))
        self._judge(state.name)
        self._milestone(state)

    def _judge(self, only: str | None) -> None:
        cost = self.meter.update(self.states.values(), only=only)
        decision, events = self.guardian.judge_costs(cost, self.states, self.busy)
        for notice in decision.notices:
            self.log(f"box {notice.box}: {notice.text}")
        self._events([e for e in events if e.kind not in (BOX_IDLE, OVER_BUDGET)])  # said
        for name in decision.push_and_stop:
            self._start(name, "budget: push and stop", functools.partial(
                self._push_and_stop, self.fleet.box(name), self.watchers[name]))

    def _push_and_stop(self, box: BoxConfig, watcher: BoxWatcher) -> Awaitable[Report]:
        """With the box's state as it is when the work starts, not when it was decided."""
        return push_and_stop(self.fleet, box, self.journal, session=watcher.session,
                             state=self.states.get(box.name), ledger=self.meter.ledger)

    def _milestone(self, state: BoxState) -> None:
        wish = self.guardian.milestone(state, busy=state.name in self.busy)
        if wish is None:
            return
        watcher = self.watchers[state.name]

        async def work(wish: Wish = wish) -> Report:
            report = await push_runs(self.fleet, self.fleet.box(wish.box), self.journal,
                                     run_names=[wish.run], include_epochs=list(wish.epochs)
                                     if wish.epochs else False, session=watcher.session,
                                     state=state, why=wish.why)
            self._events(self.guardian.push_ended(wish, report.code == 0, report.lines))
            return report

        self._start(state.name, f"milestone push of {wish.run} ({wish.why})", work)

    def _start(self, box: str, what: str, work: Callable[[], Awaitable[Report]]) -> None:
        if box in self.busy:
            return
        self.log(f"box {box}: {what}: started")

        async def runner() -> None:
            try:
                report = await work()
            except Exception as exc:  # a bug in a flow: said, and the box is free again
                report = Report().fail(f"{type(exc).__name__}: {exc}")
            finally:
                self.busy.pop(box, None)
            ok = report.code == 0
            said = " | ".join(line.replace("\n", " ") for line in report.lines)
            self.log(f"box {box}: {what}: {'done' if ok else 'FAILED'}"
                     + (f": {said}" if said else ""))
            if not ok and not what.startswith("milestone"):
                self._events(self.guardian.alert([event(
                    PUSH_FAILED, box, f"{box}: {what} failed: {'; '.join(report.lines[-2:])}",
                    self.clock())]))
            watcher = self.watchers.get(box)
            if watcher is not None:
                watcher.poke()  # the next look shows the action's effect (and what is due)

        self.busy[box] = asyncio.get_running_loop().create_task(runner())


async def watch(fleet: FleetConfig, stop: asyncio.Event, *, log: Log = print) -> int:
    with contextlib.suppress(asyncio.CancelledError):
        return await Watch(fleet, log=log).run(stop)
    return 0
