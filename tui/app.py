"""The Textual app: one async worker per box feeds immutable snapshots to the screens.

`GpurentApp(fleet)` watches live boxes; `GpurentApp(fleet, states=..., live=False)`
shows fixed snapshots (snapshot tests, screenshots) through the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from tui.model.box import BoxState, Connection
from tui.model.capability import refusal
from tui.model.config import FleetConfig
from tui.model.cost import usd
from tui.model.guard import PushRecord, Unpushed, last_verified_pushes
from tui.model.meter import FleetCost
from tui.model.runs import format_age
from tui.providers.meter import PROVIDER_POLL_SECONDS, CostMeter
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetView, RunRow, fleet_line, put
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail
from tui.store.journal import Journal
from tui.store.ledger import Ledger


class BoxUpdated(Message):
    """A box's new snapshot, posted by its worker."""

    def __init__(self, state: BoxState) -> None:
        super().__init__()
        self.state = state


class CostsPolled(Message):
    """The providers were asked again: rates and states may have changed."""


class ActionProgress(Message):
    """Words about an action in flight on a box (None when it ended)."""

    def __init__(self, box: str, text: str | None) -> None:
        super().__init__()
        self.box = box
        self.text = text


class GpurentApp(App[None]):
    """The control panel over a fleet of boxes."""

    TITLE = "gpurent-tui"
    CSS = """
    #fleet-head { height: auto; background: $panel; }
    #filter { dock: top; height: 3; }
    """
    AUTO_FOCUS = None
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,ctrl+c", "quit", "Quit", id="quit"),
        Binding("r", "refresh", "Refresh now", id="refresh"),
        Binding("enter", "open_run", "Open run", id="open"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("c", "costs", "Costs", id="cost"),
        Binding("p", "push", "Push run", id="push"),
        Binding("P", "push_box", "Push box", id="push_box", show=False),
        Binding("s", "stop", "Stop box", id="stop", show=False),
        Binding("S", "start", "Start box", id="start", show=False),
        Binding("D", "destroy", "Destroy box", id="destroy", show=False),
        Binding("J", "journal", "Journal", id="journal", show=False),
        Binding("j,down", "next_run", "Next run", id="next", show=False),
        Binding("k,up", "previous_run", "Previous run", id="previous", show=False),
        Binding("question_mark", "toggle_help", "Keys", id="help"),
    ]

    def __init__(self, fleet: FleetConfig, *, clock: Callable[[], float] = time.time,
                 states: Iterable[BoxState] | None = None, live: bool = True,
                 meter: CostMeter | None = None, journal: Journal | None = None) -> None:
        super().__init__()
        self.fleet = fleet
        self._clock = clock
        self.live = live
        self._filter_pending = False  # "/" pressed, the field not focused yet
        self.watchers: list[BoxWatcher] = []
        if live:
            store = host_key_store(fleet)
            self.watchers = [BoxWatcher(box, fleet, store=store, clock=clock)
                             for box in fleet.boxes]
        given = {s.name: s for s in states or ()}
        self.states = {b.name: given.get(b.name, BoxState(name=b.name)) for b in fleet.boxes}
        self.meter = meter if meter is not None else (CostMeter(fleet, clock=clock) if live
                                                      else None)
        self.cost: FleetCost | None = None
        self._idle_alarmed: set[str] = set()
        self.journal = journal if journal is not None else Journal()
        self.busy: dict[str, str] = {}  # box -> the action in flight (one at a time per box)
        self._over_budget: set[str] = set()
        self._budget_acted: set[str] = set()
        self._said: set[str] = set()  # storage problems already notified
        self._journal_seen = -1  # the journal's version the push notes were drawn from

    def compose(self) -> ComposeResult:
        field = Input(placeholder="filter runs by name or health (enter keeps it, escape "
                      "clears it)", id="filter", disabled=True)
        field.display = False
        yield field
        yield Static(fleet_line(list(self.states.values())), id="fleet-head")
        yield FleetView(list(self.states.values()),
                        {b.name: b.provider for b in self.fleet.boxes}, self._clock)
        yield Footer()

    def on_mount(self) -> None:
        if self.fleet.keys:
            self.set_keymap(dict(self.fleet.keys))
        for watcher in self.watchers:
            self.run_worker(self._watch(watcher), group=f"box:{watcher.box.name}",
                            name=f"watch {watcher.box.name}", exit_on_error=False)
        if self.live:
            self.set_interval(1.0, self._tick)
        self._show_pushes()
        self._storage_notices()  # before the first cost update replaces a read problem
        if self.meter is not None:
            self._update_cost()
            if self.live:
                self.run_worker(self._poll_costs(), group="costs", name="poll providers",
                                exit_on_error=False)
        self.call_after_refresh(self._focus_first)

    async def _poll_costs(self) -> None:
        assert self.meter is not None
        try:
            while True:
                await self.meter.poll()
                self.post_message(CostsPolled())
                await asyncio.sleep(PROVIDER_POLL_SECONDS)
        finally:
            await self.meter.aclose()

    def on_costs_polled(self, _: CostsPolled) -> None:
        self._update_cost()

    def _show_head(self) -> None:
        put(self.screen_stack[0].query_one("#fleet-head", Static),
            fleet_line(list(self.states.values()), self.cost))

    def _update_cost(self, only: str | None = None) -> None:
        """Fold the money picture; ring the bell once when a box starts burning idle.

        `only`: the box whose refresh caused this; the other boxes' money lines
        move at the next tick, so a refresh costs one box's redraw, not the fleet's.
        """
        if self.meter is None or not self.screen_stack:
            return
        cost = self.meter.update(self.states.values(), only=only)
        self.cost = cost
        self._fleet_view().show_cost(cost, only=only)
        self._show_head()
        alarmed = {name for name, box in cost.boxes.items() if box.idle_alarm}
        for name in sorted(alarmed - self._idle_alarmed):
            self.bell()
            self.notify(f"{name} is billed as running but idle", severity="error", timeout=10)
        self._idle_alarmed = alarmed
        over = {name for name, box in cost.boxes.items() if box.budget_level == "alarm"}
        for name in sorted(over - self._over_budget):
            self.bell()
            self.notify(f"{name} is over its budget", severity="error", timeout=15)
        self._over_budget = over
        if self.fleet.on_budget == "push-and-stop":
            # Act once per box, and only on a box we can see (its runs are needed to push).
            for name in sorted(over - self._budget_acted):
                if self.states[name].connection is Connection.OK and name not in self.busy:
                    self._budget_acted.add(name)
                    self.notify(f"{name}: on_budget = push-and-stop: pushing its runs, then "
                                "stopping it", severity="warning", timeout=15)
                    self._push_and_stop(name)
        self._storage_notices()
        for screen in self.screen_stack:
            if isinstance(screen, CostScreen):
                screen.show(cost, self.meter.fleet_events())

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

    async def _watch(self, watcher: BoxWatcher) -> None:
        await watcher.run(lambda state: self.post_message(BoxUpdated(state)))

    def _fleet_view(self) -> FleetView:
        return self.screen_stack[0].query_one(FleetView)

    def pushes(self, box: str) -> dict[str, PushRecord]:
        return last_verified_pushes(self.journal.entries, box)

    def _show_pushes(self) -> None:
        self._journal_seen = self.journal.version
        self._fleet_view().show_pushes({b.name: self.pushes(b.name) for b in self.fleet.boxes})

    def on_box_updated(self, message: BoxUpdated) -> None:
        state = message.state
        self.states[state.name] = state
        if not self.screen_stack:
            return  # quitting: no screen to show it on
        self._fleet_view().show(state)
        self._show_head()
        self._update_cost(only=state.name)
        for screen in self.screen_stack:
            if isinstance(screen, RunDetail) and screen.box_name == state.name:
                run = state.run(screen.run.path)
                if run is not None:
                    screen.show(run)
        self._focus_first()

    def _focus_first(self) -> None:
        if self.focused is None and self.screen is self.screen_stack[0]:
            rows = [r for r in self.query(RunRow) if r.display]
            if rows:
                rows[0].focus()

    def _tick(self) -> None:
        if self.screen_stack:
            if self.journal.version != self._journal_seen:  # a push by the CLI, another panel
                self._show_pushes()
            self._fleet_view().tick()

    # --- actions -------------------------------------------------------------

    def action_refresh(self) -> None:
        for watcher in self.watchers:
            watcher.poke()
        self.notify("refreshing every box", timeout=2)

    def _move(self, step: int) -> None:
        """Focus the next or previous visible run, stopping at the ends (no wrap-around)."""
        rows = [r for r in self.query(RunRow) if r.display]
        if not rows:
            return
        index = rows.index(self.focused) if self.focused in rows else -step
        rows[min(max(index + step, 0), len(rows) - 1)].focus()

    def action_next_run(self) -> None:
        self._move(1)

    def action_previous_run(self) -> None:
        self._move(-1)

    def action_open_run(self) -> None:
        row = self.focused
        if isinstance(row, RunRow):
            self.open_run(row.box_name, row.run.path)

    def open_run(self, box_name: str, path: str) -> None:
        run = self.states[box_name].run(path)
        if run is not None:
            self.push_screen(RunDetail(box_name, run))

    def _filter_field(self) -> Input:
        return self.screen_stack[0].query_one("#filter", Input)

    # --- actions on runs and boxes -------------------------------------------

    def _focused_row(self) -> RunRow | None:
        row = self.focused
        if isinstance(row, RunRow):
            return row
        self.notify("move to a run first (j/k)", timeout=3)
        return None

    def _watcher(self, box: str) -> BoxWatcher | None:
        return next((w for w in self.watchers if w.box.name == box), None)

    def _start_action(self, box: str, what: str) -> bool:
        """One action per box at a time: a second key press is refused, never sent twice."""
        if box in self.busy:
            self.notify(f"{self.busy[box]} on {box} is still running", severity="warning")
            return False
        self.busy[box] = what
        self.post_message(ActionProgress(box, f"{what}…"))
        return True

    def _end_action(self, box: str, lines: list[str], code: int) -> None:
        self.busy.pop(box, None)
        self.post_message(ActionProgress(box, None))
        self._show_pushes()
        self._storage_notices()
        self.notify("\n".join(lines) or "done", severity="information" if code == 0 else "error",
                    timeout=12, markup=False)
        for watcher in self.watchers:
            if watcher.box.name == box:
                watcher.poke()

    def on_action_progress(self, message: ActionProgress) -> None:
        self._fleet_view().set_activity(message.box, message.text)

    def action_push(self) -> None:
        row = self._focused_row()
        if row is not None:
            self._push(row.box_name, [row.run.name])

    def action_push_box(self) -> None:
        row = self._focused_row()
        if row is not None:
            self._push(row.box_name, None)

    def _ledger(self) -> Ledger | None:
        """The meter's own ledger, so an action's outcome is billed at the next refresh."""
        return self.meter.ledger if self.meter is not None else None

    def _push(self, box: str, runs: list[str] | None, confirmed: bool = False) -> None:
        from tui.actions.flows import push_runs
        from tui.actions.push import token_notice

        notice = token_notice(self.fleet.box(box), self.journal.entries)
        if notice is not None and not confirmed:  # the first push that sends a token to a box
            self.push_screen(ConfirmScreen(f"Send your Hub token to {box}?", notice),
                             lambda yes: self._push(box, runs, True) if yes else None)
            return
        if not self._start_action(box, "push"):
            return
        watcher = self._watcher(box)

        def progress(name: str, done: int, total: int) -> None:
            self.post_message(ActionProgress(
                box, f"pushing {name}: {done / 1e6:.1f}/{total / 1e6:.1f} MB"))

        async def work() -> None:
            report = await push_runs(
                self.fleet, self.fleet.box(box), self.journal, run_names=runs,
                progress=progress, session=watcher.session if watcher else None,
                state=self.states.get(box) if watcher else None)
            self._end_action(box, report.lines, report.code)

        self.run_worker(work(), group=f"action:{box}", exit_on_error=False)

    def _power(self, box: str, action: str) -> None:
        from tui.actions.flows import power

        if not self._start_action(box, action):
            return
        watcher = self._watcher(box)

        async def work() -> None:
            report = await power(self.fleet, self.fleet.box(box), action, self.journal,
                                 session=watcher.session if watcher else None,
                                 ledger=self._ledger())
            self._end_action(box, report.lines, report.code)

        self.run_worker(work(), group=f"action:{box}", exit_on_error=False)

    def _push_and_stop(self, box: str) -> None:
        """on_budget = "push-and-stop": never lose weights, then stop paying for the GPU."""
        from tui.actions.flows import power, push_runs

        if not self._start_action(box, "budget: push and stop"):
            return
        watcher = self._watcher(box)

        async def work() -> None:
            config = self.fleet.box(box)
            lines: list[str] = []
            code = 0
            if config.push is not None and (config.push.hf_repo or config.push.local_dir):
                pushed = await push_runs(self.fleet, config, self.journal,
                                         session=watcher.session if watcher else None,
                                         state=self.states.get(box) if watcher else None)
                lines += pushed.lines
                code = pushed.code
            if code == 0:
                stopped = await power(self.fleet, config, "stop", self.journal,
                                      session=watcher.session if watcher else None,
                                      ledger=self._ledger())
                lines += stopped.lines
                code = stopped.code
            else:
                lines.append(f"{box} not stopped: the push did not verify, and stopping "
                             "might strand the weights")
            self._end_action(box, lines, code)

        self.run_worker(work(), group=f"action:{box}", exit_on_error=False)

    def _refused(self, action: str, box: str) -> bool:
        """Offer only what the box can do: say why not instead of asking to confirm."""
        cost = self.cost.boxes.get(box) if self.cost else None
        why = refusal(action, self.fleet.box(box), cost.rates if cost else None)
        if why is not None:
            self.notify(why, severity="warning", markup=False)
        return why is not None

    def action_stop(self) -> None:
        row = self._focused_row()
        if row is None or self._refused("stop", row.box_name):
            return
        box = row.box_name
        cost = self.cost.boxes.get(box) if self.cost else None
        stopped = cost.rates.stopped if cost else None
        bill = (f"While stopped it still bills {usd(stopped.usd_per_hr)}/hr for its disk."
                if stopped else "While stopped its disk is still billed (rate unknown).")
        body = (f"{bill}\nThe GPU may be gone when you start it again (the provider gives "
                "it to someone else): runs on it stop now.")
        self.push_screen(ConfirmScreen(f"Stop {box}?", body),
                         lambda yes: self._power(box, "stop") if yes else None)

    def action_start(self) -> None:
        row = self._focused_row()
        if row is None or self._refused("start", row.box_name):
            return
        box = row.box_name
        cost = self.cost.boxes.get(box) if self.cost else None
        running = cost.rates.running if cost else None
        bill = (f"It bills {usd(running.usd_per_hr)}/hr again once running."
                if running else "It bills its running rate again once running.")
        body = f"{bill}\nAfterwards the panel re-reads it and says if the GPU count changed."
        self.push_screen(ConfirmScreen(f"Start {box}?", body),
                         lambda yes: self._power(box, "start") if yes else None)

    def action_destroy(self) -> None:
        row = self._focused_row()
        if row is None or self._refused("destroy", row.box_name):
            return
        box = row.box_name
        state = self.states[box]
        losses = []
        for run in state.runs:
            size = sum(w.size for w in run.weights)
            losses.append(f"{run.name} ({run.health}, {len(run.weights)} checkpoint files, "
                          f"{size / 1e6:.0f} MB)")
        if state.connection is not Connection.OK:
            age = state.data_age(self._clock())
            losses.append(f"(the box is {state.connection}; this is what it held "
                          f"{format_age(age) if age is not None else '?'} ago)")
        from tui.actions.flows import destroy_blockers

        # What this look shows as refused; the destroy itself decides on a fresh look.
        unpushed = destroy_blockers(state, self.journal)

        def chosen(answer: str | None) -> None:
            if answer is not None:
                self._destroy(box, answer, unpushed)

        self.push_screen(DestroyScreen(box, losses, unpushed), chosen)

    def _destroy(self, box: str, answer: str, shown: list[Unpushed]) -> None:
        from tui.actions.flows import destroy_from_dialog

        if not self._start_action(box, "destroy"):
            return

        async def work() -> None:
            report = await destroy_from_dialog(self.fleet, self.fleet.box(box), self.journal,
                                               answer, shown, ledger=self._ledger())
            self._end_action(box, report.lines, report.code)

        self.run_worker(work(), group=f"action:{box}", exit_on_error=False)

    def action_journal(self) -> None:
        if not isinstance(self.screen, JournalScreen):
            self.push_screen(JournalScreen(self.journal.entries))

    def action_costs(self) -> None:
        if self.meter is None or self.cost is None:
            self.notify("no cost figures in this view", timeout=3)
            return
        if not isinstance(self.screen, CostScreen):
            self.push_screen(CostScreen(self.cost, self.meter.fleet_events(), self._clock))

    def action_filter(self) -> None:
        """Show the filter line; it is disabled (never focused) while hidden."""
        if self.screen is not self.screen_stack[0]:
            return
        field = self._filter_field()
        field.disabled = False
        field.display = True
        self._filter_pending = True
        field.focus()

    def _close_filter(self, clear: bool) -> None:
        self._filter_pending = False
        field = self._filter_field()
        if clear:
            field.value = ""
            self._fleet_view().set_filter("")
        if not field.value:
            field.display = False
            field.disabled = True
        self.set_focus(None)
        self.call_after_refresh(self._focus_first)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            if self.focused is event.input:
                self._filter_pending = False
            self._fleet_view().set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._close_filter(clear=False)

    def on_key(self, event: events.Key) -> None:
        field = self._filter_field()
        if event.key == "escape" and self.focused is field:
            event.stop()
            self._close_filter(clear=True)
        elif self._filter_pending and self.focused is not field and event.is_printable \
                and event.character:
            # Over a slow link "/abc" arrives as one burst, before the field has
            # focus: the letters still belong to the filter.
            event.stop()
            event.prevent_default()
            field.insert_text_at_cursor(event.character)
            field.focus()

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p) offers the panel's actions and every run by name."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Refresh now", "Probe every box now", self.action_refresh)
        yield SystemCommand("Filter runs", "Show only runs matching a name or health",
                            self.action_filter)
        yield SystemCommand("Costs", "Every box's rates, spend and break-even; the fleet's "
                            "spend over time", self.action_costs)
        for box in self.states.values():
            for run in box.runs:
                # The palette reads both as markup: a run named "[/]" would crash it.
                yield SystemCommand(
                    escape(f"Open {box.name}/{run.name}"), escape(f"{run.health}: {run.reason}"),
                    lambda b=box.name, p=run.path: self.open_run(b, p))
