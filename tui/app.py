"""The Textual app: one async worker per box feeds immutable snapshots to the fleet view."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Footer, Static

from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.remote.watch import BoxWatcher, host_key_store
from tui.screens.fleet import FleetView, RunRow, fleet_line


class BoxUpdated(Message):
    """A box's new snapshot, posted by its worker."""

    def __init__(self, state: BoxState) -> None:
        super().__init__()
        self.state = state


class GpurentApp(App[None]):
    """The control panel over a fleet of boxes."""

    TITLE = "gpurent-tui"
    CSS = """
    #fleet-head { height: 1; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("r", "refresh", "Refresh now", id="refresh"),
        Binding("j,down", "next_run", "Next run", id="next", show=False),
        Binding("k,up", "previous_run", "Previous run", id="previous", show=False),
        Binding("question_mark", "toggle_help", "Keys", id="help"),
    ]

    def __init__(self, fleet: FleetConfig, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.fleet = fleet
        self._clock = clock
        store = host_key_store(fleet)
        self.watchers = [BoxWatcher(box, fleet, store=store, clock=clock) for box in fleet.boxes]
        self.states = {w.box.name: w.state for w in self.watchers}

    def compose(self) -> ComposeResult:
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
        self.set_interval(1.0, self._tick)

    async def _watch(self, watcher: BoxWatcher) -> None:
        await watcher.run(lambda state: self.post_message(BoxUpdated(state)))

    def on_box_updated(self, message: BoxUpdated) -> None:
        self.states[message.state.name] = message.state
        self.query_one(FleetView).show(message.state)
        self.query_one("#fleet-head", Static).update(fleet_line(list(self.states.values())))
        if self.focused is None:
            first = self.query(RunRow).first() if self.query(RunRow) else None
            if first is not None:
                first.focus()

    def _tick(self) -> None:
        self.query_one(FleetView).tick()

    def action_refresh(self) -> None:
        for watcher in self.watchers:
            watcher.poke()
        self.notify("refreshing every box", timeout=2)

    def _move(self, step: int) -> None:
        """Focus the next or previous run, stopping at the ends (no wrap-around)."""
        rows = list(self.query(RunRow))
        if not rows:
            return
        index = rows.index(self.focused) if self.focused in rows else -step
        rows[min(max(index + step, 0), len(rows) - 1)].focus()

    def action_next_run(self) -> None:
        self._move(1)

    def action_previous_run(self) -> None:
        self._move(-1)

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()
