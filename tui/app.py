"""The Textual app: the fleet's state, the workers that feed it, and the actions it runs.

One worker per box (its BoxWatcher) and one for the providers post immutable
snapshots as messages (tui/messages.py); the app folds them into its state
and publishes it through reactives (`box_state`, `cost`, `notes`, `pushes`)
that the screens watch. The screens own what is drawn and the keys: the
fleet screen (`get_default_screen`) holds the cursor, the filter and the
confirmations; the app runs what they ask for, one action per box at a time, as
work that tui/actions/board.py prepares (no Textual there).

`GpurentApp(fleet)` watches live boxes; `GpurentApp(fleet, states=..., live=False)`
shows fixed snapshots (snapshot tests, screenshots) through the same code.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import ClassVar, Literal

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.markup import escape
from textual.notifications import Notification, SeverityLevel
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tui.actions.alerts import AlertSender
from tui.actions.board import Board
from tui.actions.flows import DIALOG_PUSH_FIRST, Report
from tui.actions.guardian import Guardian
from tui.memory import HistorySettler, settle_history, thaw
from tui.messages import ActionEnded, ActionProgress, BoxUpdated, CostsPolled
from tui.model.alerts import BOX_IDLE, OVER_BUDGET, PUSH_FAILED, AlertEvent, event
from tui.model.box import BoxState, Connection, fold_failure
from tui.model.cancel import cancel_words
from tui.model.config import FleetConfig
from tui.model.guard import PushRecord, Unpushed, last_verified_pushes
from tui.model.launch import LaunchForm, LaunchRequest
from tui.model.meter import FleetCost
from tui.model.preflight import CheckVerdict
from tui.model.retry import backoff_delay
from tui.model.text import clean
from tui.providers.meter import PROVIDER_POLL_SECONDS, CostMeter
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.screens.confirm import ConfirmScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail, run_stake
from tui.store.journal import Journal
from widgets.action_text import ended_text, ended_toast
from widgets.fleet_text import clock_time

COST_COALESCE_SECONDS = 1.0  # alarms within a second; the cents move slower than that
TOAST_SECONDS = 4
ALARM_TOAST_SECONDS = 5  # the bell rang; each box's own line keeps saying it
ALARM_LINES = 4  # alarms one toast lists; the rest are counted
_WEIGHT: dict[SeverityLevel, int] = {"information": 0, "warning": 1, "error": 2}


def _titled(event: AlertEvent) -> tuple[str, str]:
    return event.title.removeprefix("gpurent-tui: "), event.text


class GpurentApp(App[None]):
    """The control panel over a fleet of boxes."""

    TITLE = "gpurent-tui"
    AUTO_FOCUS = None
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,ctrl+c", "quit", "Quit", id="quit"),
        Binding("r", "refresh", "Refresh now", id="refresh"),
        Binding("c", "costs", "Costs", id="cost"),
        Binding("J", "journal", "Journal", id="journal", show=False),
        Binding("question_mark", "toggle_help", "Keys", id="help"),
        # Focus moves as the key is read, before the keys after it are sent on: Textual
        # sends a key to the widget focused when the app reads it, so Tab and the next
        # field's text in one write (a laggy link, a paste) typed into the field left.
        Binding("tab", "focus_next", "Next field", id="focus_next", show=False, priority=True,
                system=True),
        Binding("shift+tab", "focus_previous", "Previous field", id="focus_previous",
                show=False, priority=True, system=True),
    ]

    # The state the screens watch (each assignment is a new immutable value).
    box_state: var[BoxState | None] = var(None, always_update=True, init=False)
    cost: var[FleetCost | None] = var(None, always_update=True, init=False)
    notes: var[Mapping[str, Text]] = var(dict, init=False)  # box -> action words
    pushes: var[Mapping[str, Mapping[str, PushRecord]]] = var(dict, init=False)

    def __init__(self, fleet: FleetConfig, *, clock: Callable[[], float] = time.time,
                 states: Iterable[BoxState] | None = None, live: bool = True,
                 meter: CostMeter | None = None, journal: Journal | None = None) -> None:
        super().__init__()
        self.fleet = fleet
        self.clock = clock
        self.live = live
        self.watchers: dict[str, BoxWatcher] = {}
        if live:
            store = host_key_store(fleet)
            self.watchers = {box.name: BoxWatcher(box, fleet, store=store, clock=clock)
                             for box in fleet.boxes}
        given = {s.name: s for s in states or ()}
        self.states = {b.name: given.get(b.name, BoxState(name=b.name)) for b in fleet.boxes}
        self.meter = meter if meter is not None else (CostMeter(fleet, clock=clock) if live
                                                      else None)
        self.journal = journal if journal is not None else Journal()
        # Alarms, alerts, milestone pushes, preemption: the same policies as `watch`.
        self.guardian = Guardian(fleet, self.journal, clock=clock, sender=AlertSender(
            fleet.alerts, failed=self._alert_failed) if live else None)
        self.board = Board(fleet, self.journal, self.guardian, watchers=self.watchers,
                           states=self.states, clock=clock,
                           ledger=self.meter.ledger if self.meter is not None else None,
                           progress=lambda box, text: self.post_message(
                               ActionProgress(box, text)))
        self._said: set[str] = set()  # storage problems already notified
        self._alarm_toast: Notification | None = None  # the alarms' toast shown last
        self._alarm_items: list[tuple[str, str]] = []  # (title, words) it says
        self._journal_seen = self.journal.version  # the version the push notes came from
        self._crashes: dict[str, int] = {}  # box -> watcher crashes in a row
        self._actions: dict[str, Worker[None]] = {}  # box -> the worker of its action
        self._cancelling: set[str] = set()  # boxes whose action the user cancelled
        self._poll_crashes = 0  # provider poller crashes in a row
        self._cost_pending = False
        self._seen: set[str] = set()  # boxes refreshed since the last money picture
        self._settler = HistorySettler()
        self.set_reactive(GpurentApp.pushes, self._all_pushes())

    @property
    def busy(self) -> dict[str, str]:
        """box -> the action in flight (one at a time per box)."""
        return self.board.busy

    @property
    def monitors(self) -> dict[tuple[str, str], asyncio.Event]:
        return self.board.monitors

    @property
    def checks(self) -> dict[str, CheckVerdict]:
        """box -> its last check's verdict (the box's header shows it)."""
        return self.board.checks

    def get_default_screen(self) -> Screen[None]:
        return FleetScreen()

    def on_mount(self) -> None:
        if self.fleet.keys:
            self.set_keymap(dict(self.fleet.keys))
        for watcher in self.watchers.values():
            self._start_watch(watcher)
        if self.live:
            self.set_interval(1.0, self._check_journal)
            self.call_after_refresh(settle_history)  # Textual's own start-up objects
        self._storage_notices()  # before the first cost update replaces a read problem
        if self.meter is not None:
            self._update_cost()
            if self.live:
                self._start_poller()

    def on_unmount(self) -> None:
        thaw()  # a closed panel's objects are collectable (the tests run many in one process)

    # --- watchers ----------------------------------------------------------------------

    def _start_watch(self, watcher: BoxWatcher) -> None:
        name = watcher.box.name

        def report(state: BoxState) -> None:
            self._crashes.pop(name, None)
            self.post_message(BoxUpdated(state))

        self.run_worker(watcher.run(report), group=f"box:{name}", name=f"watch {name}",
                        exit_on_error=False)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A watcher that raised (a bug, never a box's own trouble) marks its box "watcher
        crashed" with why, and is started again after a backoff; so is the poller."""
        worker = event.worker
        if event.state is WorkerState.ERROR and worker.group == "costs" and self.is_running:
            self._poller_crashed(worker.error)
        if event.state is not WorkerState.ERROR or not worker.group.startswith("box:"):
            return
        name = worker.group.removeprefix("box:")
        watcher = self.watchers.get(name)
        if watcher is None or not self.is_running:
            return
        crashes = self._crashes[name] = self._crashes.get(name, 0) + 1
        delay = backoff_delay(crashes, random.random())
        error = worker.error
        now = self.clock()
        why = f"watcher crashed: {type(error).__name__}: {error}; restarted in {delay:.0f} s"
        self._box_updated(fold_failure(self.states[name], Connection.WATCHER_CRASHED, why,
                                       now, retry_at=now + delay))
        self.set_timer(delay, lambda: self._start_watch(watcher))

    async def on_box_updated(self, message: BoxUpdated) -> None:
        self._box_updated(message.state)
        # Textual handles the messages already queued in one step of the event loop: when a
        # round of answers lands together, a hundred box redraws would hold it (and every
        # key and frame) for a quarter second. One box per step instead.
        await asyncio.sleep(0)

    def _box_updated(self, state: BoxState) -> None:
        if state.name not in self.states:
            return
        before = self.states[state.name]
        self.states[state.name] = state
        self._settler.updated(before, state)
        self._seen.add(state.name)
        self.box_state = state
        self._schedule_cost()
        if self.live:
            self._ring(self.guardian.box_updated(before, state))
            self._milestone(state)

    def action_refresh(self) -> None:
        for watcher in self.watchers.values():
            watcher.poke()
        self.notify("refreshing every box", timeout=2)

    # --- money -------------------------------------------------------------------------

    def _start_poller(self) -> None:
        self.run_worker(self._poll_costs(), group="costs", name="poll providers",
                        exit_on_error=False)

    async def _poll_costs(self) -> None:
        assert self.meter is not None
        try:
            while True:
                await self.meter.poll()
                self.post_message(CostsPolled())
                await asyncio.sleep(PROVIDER_POLL_SECONDS)
        except asyncio.CancelledError:  # the panel closes: its clients go with it
            await self.meter.aclose()  # (a crash keeps them for the restarted poller)
            raise

    def _poller_crashed(self, error: BaseException | None) -> None:
        """The poller raised (a bug, never a provider's answer): each provider box's line
        says so and why until a poll reads it again, and the poller restarts after a
        backoff, so the money never freezes silently."""
        assert self.meter is not None
        self._poll_crashes += 1
        delay = backoff_delay(self._poll_crashes, random.random())
        why = (f"provider poller crashed: {type(error).__name__}: {error}; restarted in "
               f"{delay:.0f} s")
        for box in self.fleet.boxes:
            if box.provider != "manual":
                self.meter.errors[box.name] = why
        self._update_cost()
        self.set_timer(delay, self._start_poller)

    def on_costs_polled(self, _: CostsPolled) -> None:
        self._poll_crashes = 0
        self._update_cost()

    def _schedule_cost(self) -> None:
        """Fold the money picture at most every quarter second: a round of 100 box
        updates costs a few meter folds, not 100 (each is over the whole fleet)."""
        if self.meter is not None and not self._cost_pending:
            self._cost_pending = True
            self.set_timer(COST_COALESCE_SECONDS, self._update_cost)

    def _update_cost(self) -> None:
        """Fold the money picture; ring once when a box starts burning idle or goes over
        budget, and apply `on_budget`."""
        self._cost_pending = False
        if self.meter is None or not self.is_running:
            return
        seen, self._seen = self._seen, set()
        if len(seen) == 1:  # only what was observed is compared with the ledger
            cost = self.meter.update(self.states.values(), only=next(iter(seen)))
        else:
            cost = self.meter.update(self.states.values())
        decision, events = self.guardian.judge_costs(cost, self.states, self.busy)
        self.cost = cost  # after the judgement: a box's header names its preemption
        rung = [e for e in events if e.kind not in (BOX_IDLE, OVER_BUDGET)]  # noticed
        severities: list[SeverityLevel] = [n.severity for n in decision.notices]
        if rung:
            severities.append("error")
        self.alarm([("", n.text) for n in decision.notices] + [_titled(e) for e in rung],
                   max(severities, key=_WEIGHT.__getitem__, default="error"),
                   bell=any(n.bell for n in decision.notices) or bool(rung))
        for box in decision.push_and_stop:
            self.push_and_stop(box)
        self._storage_notices()

    def _ring(self, events: list[AlertEvent]) -> None:
        """Alerts that passed the cool-down (already on their way to the webhook and the
        command): the bell and a notice here."""
        self.alarm([_titled(e) for e in events], "error")

    def alarm(self, items: list[tuple[str, str]], severity: SeverityLevel, *,
              bell: bool = True) -> None:
        """Alarms of one moment ((title, words) each) in one short toast: the alarms' toast
        still shown is replaced by one that says both, never stacked over the runs."""
        if not items:
            return
        if bell:
            self.bell()
        live = self._alarm_toast
        if live is not None and not live.has_expired and live in self._notifications:
            items = [*self._alarm_items, *items]
            severity = max(severity, live.severity, key=_WEIGHT.__getitem__)
            self._unnotify(live, refresh=False)
        self._alarm_items = items
        if len(items) == 1:
            title, message = items[0]
        else:
            title = f"{len(items)} alarms"
            message = "\n".join(words for _, words in items[:ALARM_LINES])
            if len(items) > ALARM_LINES:
                message += f"\n… {len(items) - ALARM_LINES} more: each box's line says it"
        toast = self._alarm_toast = Notification(message, title, severity,
                                                 ALARM_TOAST_SECONDS, markup=False)
        self._notifications.add(toast)  # at once: an alarm a moment later must find it
        self._refresh_notifications()

    def _alert_failed(self, line: str) -> None:
        """An alert that did not go out (the webhook's URL is never in these words)."""
        self.notify(line, severity="warning", timeout=10, markup=False)

    def _milestone(self, state: BoxState) -> None:
        """Push what a milestone calls for, unasked, one push per box at a time."""
        push = self.board.milestone(state, ring=lambda events: self.call_later(self._ring,
                                                                              events))
        if push is not None:
            wish, work = push
            self.start_action(state.name, f"milestone push ({wish.why})", work)

    def _storage_notices(self) -> None:
        """Say once, per distinct message, that the cost ledger or the action journal cannot
        be used or had unreadable lines: the panel keeps going, in memory, and says so."""
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
                    self.notify(line, severity="warning", timeout=15, markup=False)

    # --- actions -----------------------------------------------------------------------

    def _all_pushes(self) -> dict[str, dict[str, PushRecord]]:
        return {b.name: last_verified_pushes(self.journal.entries, b.name)
                for b in self.fleet.boxes}

    def _check_journal(self) -> None:
        """A push by the CLI or another panel shows on the runs within a second."""
        if self.journal.version != self._journal_seen:
            self._journal_seen = self.journal.version
            self.pushes = self._all_pushes()

    def start_action(self, box: str, what: str, work: Callable[[], Awaitable[Report]]) -> bool:
        """Run one action on a box as a worker; a second while one runs is refused, never
        sent twice. Whatever the action raises is shown, and the box is free again."""
        if box in self.busy:
            self.notify(f"{self.busy[box]} on {box} is still running", severity="warning",
                        timeout=TOAST_SECONDS)
            return False
        self.busy[box] = what
        self._note(box, Text(f"{what}…"))

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
                if box in self._cancelling:  # the user's cancel, not the panel quitting
                    words = self.board.cancelled(box, what)
                    self.post_message(ActionEnded(box, what, [words.after], 1, "cancelled"))
                raise
            finally:
                self.busy.pop(box, None)
                self._actions.pop(box, None)
                self._cancelling.discard(box)
            self.post_message(ActionEnded(box, what, lines, code, outcome))

        self._actions[box] = self.run_worker(runner(), group=f"action:{box}",
                                             name=f"{what} {box}", exit_on_error=False)
        return True

    def cancel_action(self, box: str, worker: Worker[None] | None = None) -> None:
        """`x` (or the palette): end the box's running action. One that may be left
        half-done asks first, saying what is still safe; the answer cancels that same
        action only (one that ended meanwhile, or its successor, is left alone)."""
        what, running = self.busy.get(box), self._actions.get(box)
        if what is None or running is None:
            self.notify(f"nothing is running on {box}", timeout=TOAST_SECONDS, markup=False)
            return
        words = cancel_words(what)
        if worker is None and words.ask is not None:
            self.push_screen(ConfirmScreen(f"Cancel {what} on {box}?", words.ask),
                             lambda yes: self.cancel_action(box, running) if yes else None)
            return
        if worker is not None and worker is not running:
            self.notify(f"{what} on {box} had already ended", timeout=TOAST_SECONDS,
                        markup=False)
            return
        self._cancelling.add(box)
        self._note(box, Text(f"cancelling {what}…"))
        running.cancel()

    def on_action_progress(self, message: ActionProgress) -> None:
        if message.text is not None and message.box in self.busy:
            self._note(message.box, Text(message.text))

    def on_action_ended(self, message: ActionEnded) -> None:
        """The outcome stays on the box's line (and in the journal); the toast is short. A
        stop or destroy not read back reads "unknown: may still be billing", not failed."""
        box, ok = message.box, message.code == 0
        stamp = clock_time(self.clock()) or ""
        self._note(box, ended_text(message.what, message.code, message.outcome, message.lines,
                                   stamp))
        if not ok and message.outcome not in ("unknown", "cancelled") \
                and message.what in ("push", "budget: push and stop") and self.live:
            self._ring(self.guardian.alert([event(
                PUSH_FAILED, box, f"{box}: {message.what} failed: "
                f"{'; '.join(message.lines[-2:])}", self.clock())]))
        self._journal_seen = self.journal.version
        self.pushes = self._all_pushes()
        self._storage_notices()
        toast, severity = ended_toast(box, message.what, message.code, message.outcome)
        self.notify(toast, severity=severity, timeout=TOAST_SECONDS)
        watcher = self.watchers.get(box)
        if watcher is not None:
            watcher.poke()

    def _note(self, box: str, text: Text) -> None:
        self.notes = {**self.notes, box: text}

    # What the screens' keys ask for: the board prepares the work, the app runs it.

    def push(self, box: str, runs: list[str] | None, confirmed: bool = False) -> None:
        """Push the named runs (or every run) of a box, with progress on its line."""
        notice = self.board.token_notice(box)
        if notice is not None and not confirmed:  # the first push that sends a token to a box
            self.push_screen(ConfirmScreen(f"Send your Hub token to {box}?", notice),
                             lambda yes: self.push(box, runs, True) if yes else None)
            return
        self.start_action(box, "push", self.board.push(box, runs))

    def power(self, box: str, action: Literal["stop", "start"]) -> None:
        self.start_action(box, action, self.board.power(box, action))

    def push_and_stop(self, box: str) -> None:
        """on_budget = "push-and-stop": never lose weights, then stop paying for the GPU."""
        self.start_action(box, "budget: push and stop", self.board.push_and_stop(box))

    def destroy(self, box: str, answer: str, shown: list[Unpushed],
                confirmed: bool = False) -> None:
        """The destroy dialog's answer (the guard decides on a fresh look of the box).
        "Push, verify, then destroy" asks first when its push is the first that sends a
        Hub token to the box, as a push does."""
        notice = self.board.token_notice(box) if answer == DIALOG_PUSH_FIRST else None
        if notice is not None and not confirmed:
            self.push_screen(ConfirmScreen(f"Send your Hub token to {box}?", notice),
                             lambda yes: self.destroy(box, answer, shown, True) if yes
                             else None)
            return
        self.start_action(box, "destroy", self.board.destroy(box, answer, shown))

    def launch_form(self, box: str) -> LaunchForm:
        return self.board.launch_form(box)

    def open_launch(self, box: str) -> None:
        """`L`, or "Launch on <box>" in the palette (a box with no run has no cursor):
        the launch form for that box, prefilled from its last launch."""
        from tui.screens.launch import LaunchScreen

        self.push_screen(LaunchScreen([b.name for b in self.fleet.boxes], box,
                                      self.launch_form),
                         lambda request: self.launch(request) if request else None)

    def launch(self, request: LaunchRequest) -> None:
        self.start_action(request.box, "launch", self.board.launch(request))

    def check(self, box: str) -> None:
        """`g`: the box's torch, CUDA, GPUs, LibreYOLO and HF_HOME; the verdict in its header."""
        self.start_action(box, "check", self.board.check(box))

    def open_doctor(self, box: str) -> None:
        """`G`: LibreYOLO's doctor on a data set on the box, in its own screen."""
        from tui.screens.doctor import DoctorScreen

        self.push_screen(DoctorScreen(box, self.board.doctor(box),
                                      self.board.doctor_paths.get(box, "")))

    def open_fetch(self, box: str) -> None:
        """ctrl+p: a staged data set onto the box (the fetch command), in its own screen."""
        from tui.actions.stage import default_dest
        from tui.screens.fetch import FetchScreen

        self.push_screen(FetchScreen(box, self.board.fetch(box),
                                     default_dest(self.fleet.box(box))))

    def open_stage(self) -> None:
        """ctrl+p: a data set folder staged on the Hub (the stage command), in its screen."""
        from tui.screens.stage import StageScreen

        self.push_screen(StageScreen())

    def open_size(self, box: str | None = None) -> None:
        """ctrl+p: the size form; for a box, its stopped disk priced at that box's rate."""
        from tui.screens.size import SizeScreen

        config = self.fleet.box(box) if box is not None else None
        self.push_screen(SizeScreen(box, config.provider if config else None,
                                    config.pricing if config else None))

    def toggle_monitor(self, box: str, path: str) -> None:
        """`w`: LibreYOLO's monitor of the run, forwarded to 127.0.0.1 here, until `w` again."""
        if self.board.close_monitor(box, path):
            return
        hold = self.board.monitor(box, path, note=lambda name, words, style: self._note(
            name, Text(words, style=style)))
        if hold is None:
            self.notify("no live box to open a monitor on", timeout=TOAST_SECONDS)
            return
        self.run_worker(hold(), group=f"monitor:{box}", name=f"monitor {box} {path}",
                        exit_on_error=False)

    async def action_quit(self) -> None:
        """Close every monitor first: one this panel started must not outlive it on a box."""
        self.board.close_monitors()
        workers = [w for w in self.workers if w.group.startswith("monitor:")]
        if workers:
            await asyncio.wait([asyncio.ensure_future(w.wait()) for w in workers], timeout=15)
        if self.guardian.sender is not None:
            await self.guardian.sender.aclose(grace=2.0)  # alerts on their way get 2 s
        self.exit()

    # --- screens -----------------------------------------------------------------------

    def open_run(self, box_name: str, path: str) -> None:
        run = self.states[box_name].run(path)
        if run is not None:
            self.push_screen(RunDetail(box_name, run, stake=lambda run: run_stake(
                run, self.states.get(box_name), self.pushes.get(box_name, {}),
                self.cost.boxes.get(box_name) if self.cost is not None else None)))

    def action_journal(self) -> None:
        if not isinstance(self.screen, JournalScreen):
            self.push_screen(JournalScreen(self.journal.entries))

    def action_costs(self) -> None:
        if self.meter is None or self.cost is None:
            self.notify("no cost figures in this view", timeout=3)
            return
        if not isinstance(self.screen, CostScreen):
            self.push_screen(CostScreen(self.cost, self.meter.fleet_events, self.clock))

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p) offers the panel's actions and every run by name."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Refresh now", "Probe every box now", self.action_refresh)
        if isinstance(screen, FleetScreen):
            yield SystemCommand("Filter runs", "Show only runs matching a name or health",
                                screen.action_filter)
        yield SystemCommand("Costs", "Every box's rates, spend and break-even; the fleet's "
                            "spend over time", self.action_costs)
        fleet = screen
        for name in sorted(self.guardian.preempted | self.guardian.unsure):
            if isinstance(fleet, FleetScreen):  # a box with no run shown has no cursor
                words = self.guardian.stopped_words(name)
                yield SystemCommand(escape(f"Start {name}"), f"{words}: start it again (the "
                                    "GPU may be gone)",
                                    lambda b=name: fleet.confirm_start(b))
                yield SystemCommand(escape(f"Destroy {name}"), f"{words}: destroy it (the "
                                    "destroy guard decides)",
                                    lambda b=name: fleet.confirm_destroy(b))
        yield SystemCommand("Stage a data set on the Hub", "one tar of a folder in a private "
                            "dataset repo, verified by sha256", self.open_stage)
        yield SystemCommand("Size a disk", "data + checkpoints + 30% headroom: the disk to rent",
                            self.open_size)
        for name in self.states:
            yield SystemCommand(escape(f"Check {name}"), "torch, CUDA, a real matmul per GPU, "
                                "GPU health, LibreYOLO, HF_HOME", lambda b=name: self.check(b))
            yield SystemCommand(escape(f"Doctor a data set on {name}"), "LibreYOLO's own "
                                "dataset checks, run on the box", lambda b=name:
                                self.open_doctor(b))
            yield SystemCommand(escape(f"Fetch a data set onto {name}"), "a tar staged on the "
                                "Hub, downloaded by the box, sha256-checked, unpacked safely",
                                lambda b=name: self.open_fetch(b))
            yield SystemCommand(escape(f"Size a disk for {name}"), "data + checkpoints + 30% "
                                "headroom, priced at this box's stopped rate",
                                lambda b=name: self.open_size(b))
            yield SystemCommand(escape(f"Launch on {name}"), "Start a run detached: "
                                "libreyolo train or your script (the launch form)",
                                lambda b=name: self.open_launch(b))
        for name, what in list(self.busy.items()):
            yield SystemCommand(escape(f"Cancel {what} on {name}"),
                                escape(cancel_words(what).ask or "nothing is left half-done"),
                                lambda b=name: self.cancel_action(b))
        for box in self.states.values():
            for run in box.runs:
                # The palette reads both as markup: a run named "[/]" would crash it.
                yield SystemCommand(
                    escape(f"Open {box.name}/{clean(run.name)}"),
                    escape(f"{run.health}: {clean(run.reason)}"),
                    lambda b=box.name, p=run.path: self.open_run(b, p))
