"""One fleet's life: watchers, the provider poller, the money, the policies, the actions.

The panel and `gpurent-tui watch` each build one `Runtime` and give it a sink;
everything they decide is decided here, once. Its tasks are plain asyncio tasks
started by `start()` and ended by `aclose()` (or `stop()` when the loop is
going away).

What it keeps: each box's latest snapshot (`states`), the action running on
each box (`busy`: one at a time, whatever asked for it: a key, a milestone,
the budget), the open monitors, the guardian's alarms. With `live=False` it
watches nothing and only folds the money of the fixed snapshots it was given
(snapshot tests and screenshots draw through the same code).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from tui.actions.alerts import AlertSender
from tui.actions.board import Board, Work
from tui.actions.flows import Report
from tui.actions.guardian import Guardian
from tui.actions.serverless import stop_app as stop_serverless_app
from tui.actions.serverless_push import push_run as push_serverless_run
from tui.model.alerts import BOX_IDLE, OVER_BUDGET, PUSH_FAILED, AlertEvent, event
from tui.model.bill import Book
from tui.model.box import BoxState, Connection, fold_failure
from tui.model.cancel import CANCELLED
from tui.model.config import FleetConfig
from tui.model.config_diff import config_changes, needs_restart, rewatch
from tui.model.guard import PushRecord, last_verified_pushes
from tui.model.meter import down_on_record
from tui.model.milestones import RETRY_BASE_SECONDS
from tui.model.rest import Rest
from tui.model.retry import backoff_delay
from tui.model.serverless_runs import ServerlessState
from tui.providers.meter import PROVIDER_POLL_SECONDS, CostMeter, rest_of
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.runtime.config_file import CONFIG_POLL_SECONDS, ConfigFile, Refused, Reloaded
from tui.runtime.events import (
    ActionCancelling,
    ActionEnded,
    ActionProgress,
    ActionRefused,
    ActionStarted,
    Alarm,
    BoxBusy,
    BoxChanged,
    ConfigReloaded,
    CostChanged,
    Crashed,
    MonitorNote,
    Notice,
    PushesChanged,
    ServerlessChanged,
    Severity,
    Sink,
)
from tui.runtime.open_files import raise_open_files
from tui.runtime.serverless import SERVERLESS_POLL_SECONDS, poll_entry
from tui.store.journal import Journal

COST_COALESCE_SECONDS = 1.0  # alarms within a second; the cents move slower than that
JOURNAL_SECONDS = 1.0  # a push by the CLI or another panel shows within this
MONITOR_CLOSE_SECONDS = 15.0  # how long closing waits for the monitors to close on boxes
T = TypeVar("T")
GIVEN_UP = "given up"  # an action whose screen was left (not the user's cancel: no journal)
_WEIGHT: dict[Severity, int] = {"information": 0, "warning": 1, "error": 2}
# The actions whose failure is alerted as PUSH_FAILED (a milestone push alerts through the
# guardian's own backoff; a stop whose effect was not seen is "unknown", not failed).
ALERTED = ("push", "budget: push and stop")


def push_failed(what: str, code: int, outcome: str | None) -> bool:
    """The one PUSH_FAILED rule: a push or a budget push-and-stop that failed; never one
    whose outcome is unknown (not seen, perhaps done) or cancelled by the user."""
    return code != 0 and outcome not in ("unknown", CANCELLED, GIVEN_UP) and what in ALERTED


class Runtime:
    """One fleet, watched and kept; every event goes to `sink`."""

    def __init__(self, fleet: FleetConfig, sink: Sink, *, journal: Journal | None = None,
                 meter: CostMeter | None = None, sender: AlertSender | None = None,
                 clock: Callable[[], float] = time.time, live: bool = True,
                 states: Iterable[BoxState] | None = None,
                 retry_seconds: float = RETRY_BASE_SECONDS,
                 poll_seconds: float = PROVIDER_POLL_SECONDS,
                 coalesce_seconds: float = COST_COALESCE_SECONDS,
                 config_path: Path | None = None,
                 config_seconds: float = CONFIG_POLL_SECONDS,
                 serverless_seconds: float = SERVERLESS_POLL_SECONDS) -> None:
        self.fleet = fleet
        # The config file, looked at again while live (its source when that is a file).
        if config_path is None and live and Path(fleet.source).is_file():
            config_path = Path(fleet.source)
        self.config_file = ConfigFile(config_path) if config_path is not None and live \
            else None
        self.config_seconds = config_seconds
        self.sink = sink
        self.clock = clock
        self.live = live
        self.poll_seconds = poll_seconds
        self.coalesce_seconds = coalesce_seconds
        self.watchers: dict[str, BoxWatcher] = {}
        if live:
            store = host_key_store(fleet)
            self.watchers = {box.name: BoxWatcher(box, fleet, store=store, clock=clock)
                             for box in fleet.boxes}
        given = {s.name: s for s in states or ()}
        self.states = {b.name: given.get(b.name, BoxState(name=b.name)) for b in fleet.boxes}
        self.meter = meter if meter is not None else (CostMeter(fleet, clock=clock) if live
                                                      else None)
        if self.meter is not None:
            self._restore_outages(self.meter.ledger.book)
        if live and self.meter is not None:
            self._restore_busy(self.meter)
        self.journal = journal if journal is not None else Journal()
        self.guardian = Guardian(fleet, self.journal, clock=clock, sender=sender,
                                 retry_seconds=retry_seconds)
        self.board = Board(fleet, self.journal, self.guardian, watchers=self.watchers,
                           states=self.states, clock=clock,
                           ledger=self.meter.ledger if self.meter is not None else None,
                           progress=self._progress)
        for name, watcher in self.watchers.items():
            watcher.resting = partial(self.rest_of, name)
        self.pushes = self._all_pushes()
        self._journal_seen = self.journal.version
        self._said: set[str] = set()  # storage problems already said
        self._crashes: dict[str, int] = {}  # box -> watcher crashes in a row
        self._poll_crashes = 0  # provider poller crashes in a row
        self._actions: dict[str, asyncio.Task[None]] = {}  # box -> its action's task
        self._cancelling: set[str] = set()  # boxes whose action the user cancelled
        self._monitors: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._cost_timer: asyncio.TimerHandle | None = None
        self._seen: set[str] = set()  # boxes refreshed since the last money picture
        self._running = False
        # Serverless entries (Modal, Beam): each polled through its provider's CLI.
        self.serverless_seconds = serverless_seconds
        self.serverless: dict[str, ServerlessState] = {
            e.name: ServerlessState(name=e.name, provider=e.provider) for e in fleet.serverless}
        self._serverless_wake: dict[str, asyncio.Event] = {}

    def _restore_outages(self, book: Book) -> None:
        """A box down since before a (re)start keeps its outage's start (the ledger's
        "unseen" mark): its first failure here continues it; its first answer ends it."""
        for name, watcher in self.watchers.items():
            since = down_on_record(book.boxes.get(name))
            if since is not None and watcher.state.last_ok_at is None:
                watcher.state = replace(watcher.state, failed_since=since)

    def _restore_busy(self, meter: CostMeter) -> None:
        """Each box's GPU-busy integral carried on from the ledger (the watcher folds on from
        its state), so a restart of the panel or `watch` does not reset the busy figure."""
        for name, watcher in self.watchers.items():
            integral = meter.restore_busy(name)
            if integral.covered_s > 0:
                watcher.state = replace(watcher.state, busy=integral)
                self.states[name] = replace(self.states[name], busy=integral)

    @property
    def sender(self) -> AlertSender | None:
        return self.guardian.sender

    @property
    def busy(self) -> dict[str, str]:
        """box -> the action in flight (one at a time per box)."""
        return self.board.busy

    def rest_of(self, box: str) -> Rest | None:
        """Whether a box that does not answer is at rest (stopped or destroyed on purpose),
        from the journal and the provider's last answer: decided here once for the panel
        and `watch`, and by the same rule for `status` (tui.model.rest)."""
        return rest_of(self.fleet, self.journal.entries, self.meter, box)

    def watching(self, box: str) -> bool:
        """Whether the box's watcher task is alive (a crash restarts it, never ends it)."""
        return any(t.get_name() == f"watch {box}" and not t.done() and not t.cancelling()
                   for t in self._tasks)

    def action_task(self, box: str) -> asyncio.Task[None] | None:
        """The task of the box's running action (a cancel asked about names this one)."""
        return self._actions.get(box)

    # --- life --------------------------------------------------------------------------

    def start(self) -> None:
        """Say the storage problems, fold the first money picture and, live, raise the
        open-files limit (saying so when the fleet needs more than it allows), start
        watching every box, polling the providers and reading the journal again."""
        self._running = True
        self._storage_notices()  # before the first cost update replaces a read problem
        if self.meter is not None:
            self._update_cost()
        if not self.live:
            return
        files = raise_open_files(self.fleet)  # before the first socket opens
        if files is not None:
            self.sink(Notice(files, "warning"))
        for watcher in self.watchers.values():
            self._spawn(self._supervise(watcher), f"watch {watcher.box.name}")
        if self.meter is not None:
            self._spawn(self._poller(), "poll providers")
        self._spawn(self._reread_journal(), "journal")
        for entry in self.fleet.serverless:
            self._spawn(self._poll_serverless(entry.name), f"serverless {entry.name}")
        if self.config_file is not None:
            self._spawn(self._watch_config(), "config")

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        self._tasks.append(asyncio.ensure_future(work))
        self._tasks[-1].set_name(name)

    def stop(self) -> None:
        """End every task now (the loop is going away): nothing waits, nothing is sent."""
        self._running = False
        if self._cost_timer is not None:
            self._cost_timer.cancel()
        self.board.close_monitors()
        for task in [*self._tasks, *self._actions.values(), *self._monitors]:
            task.cancel()

    async def close_monitors(self, timeout: float = MONITOR_CLOSE_SECONDS) -> None:
        """Close every monitor this runtime opened: none may outlive it on a box."""
        self.board.close_monitors()
        if self._monitors:
            await asyncio.wait(set(self._monitors), timeout=timeout)

    async def aclose(self, *, grace: float = 0.0, alerts_grace: float = 5.0) -> None:
        """Close monitors, give running actions `grace` seconds (a push cut short leaves
        only a `.part` the next one resumes), then end every task and close every session
        and client; alerts on their way get `alerts_grace` seconds."""
        await self.close_monitors()
        running = set(self._actions.values())
        if running and grace > 0:
            await asyncio.wait(running, timeout=grace)
        self.stop()
        late = [*self._tasks, *self._actions.values()]
        await asyncio.gather(*late, return_exceptions=True)
        await asyncio.gather(*(w.close() for w in self.watchers.values()),
                             return_exceptions=True)
        if self.meter is not None:
            self.meter.flush_busy(self.states.values())
            await self.meter.aclose()
        if self.sender is not None:
            await self.sender.aclose(grace=alerts_grace)

    # --- watchers ----------------------------------------------------------------------

    async def _supervise(self, watcher: BoxWatcher) -> None:
        """A watcher that raised (a bug, never a box's own trouble) marks its box "watcher
        crashed" with why, and is started again after a backoff."""
        name = watcher.box.name

        def report(state: BoxState) -> None:
            self._crashes.pop(name, None)
            self.box_updated(state)

        while True:
            try:
                await watcher.run(report)
                return
            except Exception as error:
                crashes = self._crashes[name] = self._crashes.get(name, 0) + 1
                delay = backoff_delay(crashes, random.random())
                now = self.clock()
                why = (f"watcher crashed: {type(error).__name__}: {error}; restarted in "
                       f"{delay:.0f} s")
                self.sink(Crashed(name, f"{type(error).__name__}: {error}", delay))
                self.box_updated(fold_failure(self.states[name], Connection.WATCHER_CRASHED,
                                              why, now, retry_at=now + delay))
                await asyncio.sleep(delay)

    def box_updated(self, state: BoxState) -> None:
        """A box's new snapshot: kept, shown, judged (alerts, milestone pushes), and its
        money folded at the next coalesced update."""
        if state.name not in self.states or not self._running:
            return
        before = self.states[state.name]
        self.states[state.name] = state
        self._seen.add(state.name)
        self.sink(BoxChanged(state))
        self._schedule_cost()
        if self.live:
            self._ring(self.guardian.box_updated(before, state))
            self._milestone(state)

    def poke(self) -> None:
        """Look at every box (and every serverless entry) now."""
        for watcher in self.watchers.values():
            watcher.poke()
        self.poke_serverless()

    # --- serverless entries ------------------------------------------------------------

    async def _poll_serverless(self, name: str) -> None:
        """One entry polled every `serverless_seconds` (sooner when poked: after a stop);
        a failing CLI is asked again after a growing backoff, never in a tight loop."""
        wake = self._serverless_wake.setdefault(name, asyncio.Event())
        failures = 0
        while True:
            entry = next((e for e in self.fleet.serverless if e.name == name), None)
            if entry is None:  # removed from the config
                return
            wake.clear()
            try:
                await self.poll_serverless(name)
                failures = failures + 1 if self.serverless[name].error else 0
            except Exception as error:  # a bug, never the CLI's answer: said, retried
                failures += 1
                self.sink(Crashed(name, f"{type(error).__name__}: {error}",
                                  backoff_delay(failures, random.random())))
            delay = self.serverless_seconds if failures == 0 else \
                max(self.serverless_seconds, backoff_delay(failures, random.random()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)

    async def poll_serverless(self, name: str) -> ServerlessState:
        """Look at one entry now; its new state is kept and sent to the front end."""
        entry = next(e for e in self.fleet.serverless if e.name == name)
        state = await poll_entry(entry, self.serverless.get(name), self.clock)
        if self._running and name in self.serverless:
            self.serverless[name] = state
            self.sink(ServerlessChanged(state))
        return state

    def stop_serverless(self, name: str) -> bool:
        """Stop a serverless app (its provider's CLI), read back until it says stopped."""
        entry = next(e for e in self.fleet.serverless if e.name == name)

        async def work() -> Report:
            return await stop_serverless_app(entry, self.journal,
                                             partial(self.poll_serverless, name), self.clock)

        return self.run(name, "stop", work)

    def push_serverless(self, name: str, run_path: str) -> bool:
        """Copy a serverless run's weights from its volume to the entry's local_dir."""
        entry = next(e for e in self.fleet.serverless if e.name == name)
        run = next((r for r in self.serverless[name].runs if r.path == run_path), None)
        if run is None:
            self.sink(Notice(f"{name}: no run {run_path} read on its volume", "warning"))
            return False

        async def work() -> Report:
            return await push_serverless_run(
                entry, run, self.journal, self.clock,
                volume_path=self.serverless[name].volume_path(run_path))

        return self.run(name, "push", work, title=f"push of {run.name} from {entry.volume}")

    def poke_serverless(self, name: str | None = None) -> None:
        """Poll one entry (or all) now rather than at its next turn."""
        for key, wake in self._serverless_wake.items():
            if name is None or key == name:
                wake.set()

    # --- money -------------------------------------------------------------------------

    async def _poller(self) -> None:
        """The providers asked every PROVIDER_POLL_SECONDS. A poll that raises (a bug,
        never a provider's answer) says so on each provider box's money line until a poll
        reads it again, and the poller starts again after a backoff: the money never
        freezes silently."""
        assert self.meter is not None
        try:
            while True:
                try:
                    while True:
                        await self.meter.poll()
                        self._poll_crashes = 0
                        self._update_cost()
                        await asyncio.sleep(self.poll_seconds)
                except Exception as error:
                    self._poll_crashes += 1
                    delay = backoff_delay(self._poll_crashes, random.random())
                    why = (f"provider poller crashed: {type(error).__name__}: {error}; "
                           f"restarted in {delay:.0f} s")
                    for box in self.fleet.boxes:
                        if box.provider != "manual":
                            self.meter.errors[box.name] = why
                    self.sink(Crashed("providers", f"{type(error).__name__}: {error}",
                                      delay))
                    self._update_cost()
                    await asyncio.sleep(delay)
        except asyncio.CancelledError:  # closing: the clients go with it
            await self.meter.aclose()
            raise

    def _schedule_cost(self) -> None:
        """Fold the money picture at most every COST_COALESCE_SECONDS: a round of 100 box
        updates costs a few meter folds, not 100 (each is over the whole fleet)."""
        if self.meter is not None and self._cost_timer is None:
            self._cost_timer = asyncio.get_running_loop().call_later(
                self.coalesce_seconds, self._update_cost, False)

    def _update_cost(self, everything: bool = True) -> None:
        """Fold the money picture; ring once when a box starts burning idle or goes over
        budget, and apply `on_budget`.

        `everything`: compare every box with the ledger (a provider poll, the start, a
        config reload: news of any box); the coalesced fold after box refreshes compares
        only the boxes refreshed since the last one (the meter still looks at all of them
        every minute)."""
        if self._cost_timer is not None:
            self._cost_timer.cancel()
            self._cost_timer = None
        if self.meter is None or not self._running:
            return
        seen, self._seen = self._seen, set()
        cost = self.meter.update(self.states.values(),
                                 only=None if everything or not seen else seen)
        decision, events = self.guardian.judge_costs(cost, self.states, self.busy)
        self.sink(CostChanged(cost))  # after the judgement: a header names its preemption
        self._rejudge_rest()  # the provider may read a box at rest running again
        rung = tuple(e for e in events if e.kind not in (BOX_IDLE, OVER_BUDGET))  # noticed
        severities: list[Severity] = [n.severity for n in decision.notices]
        if rung:
            severities.append("error")
        if decision.notices or rung:
            self.sink(Alarm(decision.notices, rung,
                            max(severities, key=_WEIGHT.__getitem__, default="error"),
                            any(n.bell for n in decision.notices) or bool(rung)))
        for box in decision.push_and_stop:
            self.run(box, "budget: push and stop", self.board.push_and_stop(box))
        self._storage_notices()

    def _ring(self, events: list[AlertEvent]) -> None:
        if events:
            self.sink(Alarm((), tuple(events), "error", True))

    # --- the config file -------------------------------------------------------------

    async def _watch_config(self) -> None:
        """The config file, looked at every `config_seconds`: an edit applies live."""
        while True:
            await asyncio.sleep(self.config_seconds)
            self.check_config()

    def check_config(self) -> list[str] | None:
        """Look at the config file now: a new valid content is applied (its changes
        returned, in words), an invalid one said once and the config in force kept."""
        if self.config_file is None:
            return None
        verdict = self.config_file.check()
        if isinstance(verdict, Refused):
            self.sink(Notice(f"config not reloaded, the one in force is kept: {verdict.error}",
                             "error"))
            return None
        if isinstance(verdict, Reloaded):
            return self.apply_config(verdict.fleet)
        return None

    def apply_config(self, new: FleetConfig) -> list[str]:
        """Put `new` in force: rates, budgets, thresholds, milestones and push targets at
        once; an added box watched, a removed one no longer, a box whose way in changed
        watched anew. Journaled as one line of what changed."""
        old = self.fleet
        changes = config_changes(old, new)
        self._rewatch_serverless(new)
        if not changes:
            self.fleet = new
            return []
        added, removed, reconnect = rewatch(old, new)
        self.fleet = new
        self.guardian.fleet = new
        self.guardian._power_version = None
        self.board.fleet = new
        if self.meter is not None:
            self.meter.fleet = new
        if self.sender is not None:
            self.sender.config = new.alerts
        for name in removed:
            self.states.pop(name, None)
            self._stop_watching(name)
        for box in new.boxes:
            if box.name not in self.states:
                self.states[box.name] = BoxState(name=box.name)
        if self.live:
            store = host_key_store(new)
            for box in new.boxes:
                watcher = self.watchers.get(box.name)
                if box.name in added or box.name in reconnect or watcher is None:
                    self._stop_watching(box.name)
                    watcher = self.watchers[box.name] = BoxWatcher(box, new, store=store,
                                                                   clock=self.clock)
                    watcher.resting = partial(self.rest_of, box.name)  # as at the start
                    if self.meter is not None:  # its busy figure carries on, as at start
                        integral = self.meter.restore_busy(box.name)
                        if integral.covered_s > 0:
                            watcher.state = replace(watcher.state, busy=integral)
                    if self._running:
                        self._spawn(self._supervise(watcher), f"watch {box.name}")
                else:
                    watcher.box = watcher.session.box = box
                    watcher.fleet = watcher.session._fleet = new
        words = "config reloaded: " + "; ".join(changes)
        later = needs_restart(old, new)
        if later:
            words += f" ({' and '.join(f'[{k}]' for k in later)}: on the next start)"
        self.journal.record(box="", action="config", outcome="reloaded", message=words,
                            at=self.clock())
        self.sink(ConfigReloaded(new, tuple(changes)))
        self.sink(Notice(words, "information"))
        self._update_cost()
        return changes

    def _rewatch_serverless(self, new: FleetConfig) -> None:
        """Serverless entries added by an edit are polled from now; removed ones no longer
        (their poller ends at its next turn); a changed one is read as it now says."""
        names = {e.name for e in new.serverless}
        for name in list(self.serverless):
            if name not in names:
                self.serverless.pop(name)
                self.poke_serverless(name)
        for entry in new.serverless:
            if entry.name not in self.serverless:
                self.serverless[entry.name] = ServerlessState(name=entry.name,
                                                              provider=entry.provider)
                if self._running and self.live:
                    self._spawn(self._poll_serverless(entry.name), f"serverless {entry.name}")

    def _stop_watching(self, name: str) -> None:
        """End a box's watcher task and close its session (in the background)."""
        for task in self._tasks:
            if task.get_name() == f"watch {name}" and not task.done():
                task.cancel()
        watcher = self.watchers.pop(name, None)
        if watcher is not None and self._running:
            closing = asyncio.ensure_future(watcher.close())
            closing.set_name(f"close {name}")
            self._tasks.append(closing)
        self._tasks = [t for t in self._tasks if not t.done()]

    # --- the journal and the stores ----------------------------------------------------

    def _all_pushes(self) -> dict[str, dict[str, PushRecord]]:
        return {b.name: last_verified_pushes(self.journal.entries, b.name)
                for b in self.fleet.boxes}

    def _pushes_read(self) -> None:
        self._journal_seen = self.journal.version
        self.pushes = self._all_pushes()
        self.sink(PushesChanged(self.pushes))
        self._rejudge_rest()

    def _rejudge_rest(self) -> None:
        """A silent box whose rest changed (our stop was journalled, here or by the CLI;
        the provider reads it running again) is looked at now, so that its watcher says so
        at once rather than after its backoff or its minute at rest."""
        for name, watcher in self.watchers.items():
            state = self.states[name]
            if state.connection is not Connection.OK and \
                    state.connection is not Connection.CONNECTING and \
                    self.rest_of(name) != state.rest:
                watcher.poke()

    async def _reread_journal(self) -> None:
        """A push by the CLI or another panel shows on the runs within a second."""
        while True:
            await asyncio.sleep(JOURNAL_SECONDS)
            if self.journal.version != self._journal_seen:
                self._pushes_read()

    def _storage_notices(self) -> None:
        """Say once, per distinct message, that the cost ledger or the action journal cannot
        be used or had unreadable lines: the runtime keeps going, in memory, and says so."""
        stores: list[tuple[str, Path, str | None, int]] = [
            ("action journal", self.journal.path, self.journal.problem, self.journal.skipped)]
        if self.meter is not None:
            ledger = self.meter.ledger
            stores.append(("cost ledger", ledger.path, ledger.problem, ledger.skipped))
        for what, path, problem, skipped in stores:
            lines = [problem] if problem else []
            if skipped:
                lines.append(f"{what} {path}: {skipped} unreadable line(s) skipped (a torn "
                             "write?); the rest is read")
            for line in lines:
                if line not in self._said:
                    self._said.add(line)
                    self.sink(Notice(line, "warning"))

    # --- actions -----------------------------------------------------------------------

    def _progress(self, box: str, text: str) -> None:
        if box in self.busy:
            self.sink(ActionProgress(box, text))

    def run(self, box: str, what: str, work: Work, *, title: str | None = None,
            quiet: bool = False) -> bool:
        """Run one action on a box; a second while one runs is refused, never sent twice.
        Whatever the action raises is said, and the box is free again. `quiet`: a screen
        of its own shows it (no words on the box's line)."""
        if box in self.busy:
            self.sink(ActionRefused(box, what, self.busy[box]))
            return False
        title = title or what
        self.busy[box] = what
        self.sink(ActionStarted(box, what, title, quiet))

        async def runner() -> None:
            lines: list[str] = []
            code = 1
            outcome = None
            try:
                report = await work()
                lines, code, outcome = report.lines, report.code, report.outcome
            except Exception as exc:  # a bug in a flow: say so, never leave the box locked
                lines = [f"{what} on {box} crashed: {type(exc).__name__}: {exc}"]
            except asyncio.CancelledError:
                if box in self._cancelling:  # the user's cancel, not the runtime closing
                    words = self.board.cancelled(box, what)
                    self._unlock(box)
                    self._ended(box, what, title, [words.after], 1, CANCELLED, quiet)
                elif self._running:  # given up by its screen: the box is free again
                    self._unlock(box)
                    self._ended(box, what, title, [f"{what} given up"], 1, GIVEN_UP,
                                quiet)
                raise
            finally:
                self._unlock(box)
            self._ended(box, what, title, lines, code, outcome, quiet)

        self._actions[box] = asyncio.get_running_loop().create_task(
            runner(), name=f"{what} {box}")
        return True

    def _unlock(self, box: str) -> None:
        self.busy.pop(box, None)
        self._actions.pop(box, None)
        self._cancelling.discard(box)

    def _ended(self, box: str, what: str, title: str, lines: list[str], code: int,
               outcome: str | None, quiet: bool = False) -> None:
        rung = self.guardian.alert([event(
            PUSH_FAILED, box, f"{box}: {what} failed: {'; '.join(lines[-2:])}",
            self.clock())]) if self.live and push_failed(what, code, outcome) else []
        # The alarm's toast says the failure and why: the panel shows no second one.
        self.sink(ActionEnded(box, what, title, tuple(lines), code, outcome, quiet,
                              bool(rung)))
        self._ring(rung)
        self._pushes_read()
        self._storage_notices()
        watcher = self.watchers.get(box)
        if watcher is not None:
            watcher.poke()  # the next look shows the action's effect (and what is due)

    def cancel(self, box: str, task: asyncio.Task[None] | None = None) -> bool:
        """End the box's running action (`task`: only if it is still that one); it is
        journaled as cancelled. False when nothing (or another action) runs."""
        running = self._actions.get(box)
        if running is None or (task is not None and task is not running):
            return False
        self._cancelling.add(box)
        self.sink(ActionCancelling(box, self.busy[box]))
        running.cancel()
        return True

    def _milestone(self, state: BoxState) -> None:
        """Push what a milestone calls for, unasked, one push per box at a time."""
        push = self.board.milestone(state, ring=self._ring)
        if push is not None:
            wish, work = push
            self.run(state.name, f"milestone push ({wish.why})", work,
                     title=f"milestone push of {wish.run} ({wish.why})")

    # What a front end asks for: the board prepares the work, the runtime runs it.

    def push(self, box: str, runs: list[str] | None) -> bool:
        return self.run(box, "push", self.board.push(box, runs))

    def power(self, box: str, action: Literal["stop", "start"]) -> bool:
        return self.run(box, action, self.board.power(box, action))

    def push_and_stop(self, box: str) -> bool:
        """on_budget = "push-and-stop": never lose weights, then stop paying for the GPU."""
        return self.run(box, "budget: push and stop", self.board.push_and_stop(box))

    def check(self, box: str) -> bool:
        return self.run(box, "check", self.board.check(box))

    async def locked(self, box: str, what: str, job: Callable[[], Awaitable[T]]) -> T:
        """Run `job` (a screen's doctor or fetch) under the box's lock, quietly (its screen
        shows it), and return what it returns or raise what it raises. BoxBusy when another
        action holds the box; giving up the wait (the screen left) ends the job too."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def work() -> Report:
            try:
                result = await job()
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                return Report(1, [f"{type(exc).__name__}: {exc}"])
            if not future.done():
                future.set_result(result)
            return Report(0, [])

        if not self.run(box, what, work, quiet=True):
            raise BoxBusy(self.busy[box])
        task = self._actions[box]
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not task.done():
                task.cancel()
            raise

    # --- monitors ----------------------------------------------------------------------

    def toggle_monitor(self, box: str, path: str) -> bool:
        """LibreYOLO's monitor of a run, forwarded to 127.0.0.1 here, until asked again
        (then it closes). False when there is no live box and run to open one on."""
        if self.board.close_monitor(box, path):
            return True
        hold = self.board.monitor(box, path, note=lambda name, words, style: self.sink(
            MonitorNote(name, words, style)))
        if hold is None:
            return False
        task = asyncio.ensure_future(hold())
        task.set_name(f"monitor {box} {path}")
        self._monitors.add(task)
        task.add_done_callback(self._monitors.discard)
        return True

    @property
    def monitors(self) -> dict[tuple[str, str], asyncio.Event]:
        """(box, run path) -> what closes its monitor, for each monitor open."""
        return self.board.monitors

    @property
    def monitor_tasks(self) -> frozenset[asyncio.Task[None]]:
        """The tasks holding monitors open (each ends once its monitor is closed)."""
        return frozenset(self._monitors)

