"""The fleet screen: the strip with the fleet at a glance, every box and run, the filter.

`/` filters the runs by name, health or box; `/NAME` enter, NAME a box's name, goes to
that box (the filter goes, the cursor lands on its first run): how one finds a box among
1,000.

It owns the cursor: `j`/`k` move `selected`, a run key held here (not read
back from focus, which Textual moves only after the key is handled), so keys
that arrive in one burst over a slow link each act on the state the key
before left: `j j Enter` opens the third run, `j p` pushes the second.
`Enter`, `p`, `P`, `s`, `S`, `D` act on the cursor. The screen watches the
app's state (box snapshots, money, action words, pushes) and hands each box's
new picture to the fleet list, which redraws that box only.

To add a key: a Binding with an id (so `[keys]` can remap it) and an action
here that reads `self.cursor()`. To add an item to a box's head line (a
verdict, a badge): return it from `head_items` and call `refresh_box` when it
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import ClassVar, Literal, cast

from rich.text import Text
from textual import events
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.markup import escape
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Footer, Input

from tui.messages import (
    CancelRequested,
    CheckRequested,
    DestroyRequested,
    DoctorRequested,
    FetchRequested,
    LaunchRequested,
    MonitorRequested,
    OpenRunRequested,
    PowerRequested,
    ProfileRequested,
    PushRequested,
    SizeRequested,
    StageRequested,
)
from tui.model.box import BoxState, Connection
from tui.model.cancel import cancel_words
from tui.model.capability import refusal, stop_words
from tui.model.config import ServerlessConfig
from tui.model.cost import usd
from tui.model.instance import PowerAction
from tui.model.meter import BoxCost, FleetCost
from tui.model.preemption import OFFER as PREEMPTED_OFFER
from tui.model.runs import Health, format_age
from tui.model.serverless_doc import pairs, serverless_money
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_view import destroy_words, stop_command, stop_loss
from tui.model.sizing import human_bytes, project_disk
from tui.model.text import clean
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.view import FleetView
from widgets.disk_text import projection_items
from widgets.filter_field import FilterField
from widgets.fleet_head import FleetHead
from widgets.fleet_list import FleetList, RunKey, View
from widgets.fleet_text import BoxView
from widgets.preflight_text import check_item
from widgets.serverless_text import APP_ROW, ServerlessView

HEAD_COALESCE_SECONDS = 0.5
MONEY_SECONDS = 5.0  # other boxes' money lines follow a new cost picture within this
FILTER_KEY = "slash"  # the filter binding's key, unless `[keys] filter` remaps it


def news(old: BoxCost, new: BoxCost) -> bool:
    """Whether a box's new money picture says something new (an alarm, a state, a rate,
    a provider's error), not just a few more cents spent."""
    def gist(cost: BoxCost) -> tuple[object, ...]:
        return (cost.rates.state, cost.rate_now, cost.idle_alarm, cost.budget_level,
                cost.provider_error, cost.doubt, cost.maybe_usd_per_hr, cost.idle_reason)
    return gist(old) != gist(new)


# Where the cursor goes before the user moves it (FleetScreen._urgency): lower first.
URGENCY = {Health.RUNNING: 0, Health.STALLED: 1, Health.DEAD: 1}


# The bindings whose footer and help (?) entries follow the cursor's row: on a serverless
# app's row each says what the key does there, not what it does to a box.
BOX_ROW_WORDS = {"open": "Open run", "stop": "Stop box/app", "start": "Start box",
                 "destroy": "Destroy box"}
APP_ROW_WORDS = {"open": "Open run (a box's only)", "stop": "Stop app",
                 "start": "How this app starts", "destroy": "How to remove this app"}
ROW_BINDINGS = tuple(BOX_ROW_WORDS)


def row_binding(binding: Binding, on_app: bool) -> Binding:
    """`binding` as the footer and the help show it on a serverless app's row, or on a
    box's."""
    if binding.id not in BOX_ROW_WORDS:
        return binding
    words = (APP_ROW_WORDS if on_app else BOX_ROW_WORDS)[binding.id]
    if binding.id == "stop":
        return replace(binding, show=on_app, description=words)
    if binding.id == "open":
        return replace(binding, show=not on_app, description=words)
    return replace(binding, description=words)


class FleetScreen(Screen[None]):
    """Every box in config order, a cursor over the runs, and the `/` filter."""

    DEFAULT_CSS = """
    FleetScreen #filter { dock: top; height: 3; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_run", "Open run", id="open"),
        # Short in the footer (c Costs and ? Keys must fit in 80 columns); the help says
        # the rest.
        Binding(FILTER_KEY, "filter", "Filter", id="filter",
                tooltip="runs, or go to a box by its name"),
        Binding("p", "push", "Push run", id="push"),
        Binding("P", "push_box", "Push box", id="push_box", show=False),
        Binding("s", "stop", "Stop box/app", id="stop", show=False),
        Binding("S", "start", "Start box", id="start", show=False),
        Binding("D", "destroy", "Destroy box", id="destroy", show=False),
        Binding("L", "launch", "Launch run", id="launch", show=False),
        Binding("w", "monitor", "Web monitor", id="monitor", show=False),
        Binding("j,down", "next_run", "Next run", id="next", show=False),
        Binding("k,up", "previous_run", "Previous run", id="previous", show=False),
        Binding("escape", "clear_filter", "Clear filter", id="back", show=False),
        Binding("g", "check", "Check box", id="check", show=False),
        Binding("G", "doctor", "Data doctor", id="doctor", show=False),
        Binding("x", "cancel_action", "Cancel action", id="cancel", show=False),
    ]

    filter: var[str] = var("", init=False)
    selected: var[RunKey | None] = var(None, init=False)

    def __init__(self) -> None:
        super().__init__()
        self._wanted: RunKey | None = None  # the run the user moved to, while it is shown
        self._typing = False  # the filter is being typed: from its key to enter or escape
        self._head_pending = False
        self._footer_on_app = False  # the footer shows an app row's keys

    @property
    def gpurent(self) -> FleetView:
        """The panel's state, read-only: what this screen wants done goes up as messages."""
        return cast("FleetView", self.app)

    def compose(self) -> ComposeResult:
        app = self.gpurent
        field = FilterField(placeholder="filter runs by name, health or box; a box's name + "
                            "enter goes to it; enter keeps the filter, escape clears it",
                            id="filter", disabled=True)
        field.display = False
        yield field
        yield FleetHead(self._boxes(), app.cost, self._apps(), id="fleet-head")
        now = app.clock()
        yield FleetList(self._views(), now, clock=app.clock).data_bind(
            FleetScreen.filter, FleetScreen.selected)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "box_state", self._box_changed, init=False)
        self.watch(self.app, "cost", self._cost_changed, init=False)
        self.watch(self.app, "notes", self._notes_changed, init=False)
        self.watch(self.app, "pushes", self._pushes_changed, init=False)
        self._cost_changed(self.gpurent.cost)  # one folded between compose and these watches
        if self.gpurent.live:
            self.set_interval(1.0, self._tick)
        self._follow_order()
        self.call_after_refresh(self._follow_order)  # laid out: what the top screen shows

    # --- the app's state, drawn --------------------------------------------------------

    @property
    def fleet_list(self) -> FleetList:
        return self.query_one(FleetList)

    def head_items(self, name: str) -> tuple[Text, ...]:
        """Extra items for a box's head line, after its GPUs and disks: where its disk
        ends once the running runs are done (or that it fills first), its last check."""
        app = self.gpurent
        items = projection_items(project_disk(app.states[name]))
        item = check_item(app.checks.get(name))
        items += (item,) if item is not None else ()
        stopped = app.stopped_words(name)
        if stopped is not None:
            items += (Text(f"{stopped}: {PREEMPTED_OFFER}", style="bold red"),)
        return items

    def _boxes(self) -> tuple[BoxState, ...]:
        return tuple(self.gpurent.states.values())

    def _apps(self) -> tuple[tuple[ServerlessState, ...], float | None]:
        """The serverless apps' last polls and their estimated burn, for the strip."""
        app = self.gpurent
        entries = pairs(app.fleet.serverless, list(app.serverless.values()))
        states = tuple(state for _, state in entries)
        return states, serverless_money(entries, app.clock()).usd_per_hr if entries else None

    def _view(self, name: str) -> BoxView:
        app = self.gpurent
        cost = app.cost.boxes.get(name) if app.cost is not None else None
        config = app.fleet.box(name)
        # Every run says what a crash would cost now; a box that pushes nowhere has the
        # most at stake, so it says so too.
        return BoxView(app.states[name], config.provider, cost, app.pushes.get(name, {}),
                       app.notes.get(name), self.head_items(name), at_stake=True)

    def _app_view(self, name: str) -> ServerlessView:
        """A serverless app's view (Modal, Beam): its last poll and its config entry."""
        app = self.gpurent
        entry = next(e for e in app.fleet.serverless if e.name == name)
        return ServerlessView(app.serverless[name], entry, activity=app.notes.get(name))

    def _views(self) -> list[View]:
        """The boxes in config order, then the serverless apps."""
        app = self.gpurent
        views: list[View] = [self._view(b.name) for b in app.fleet.boxes
                             if b.name in app.states]
        views += [self._app_view(e.name) for e in app.fleet.serverless
                  if e.name in app.serverless]
        return views

    def boxes_changed(self) -> None:
        """The reloaded config added or removed boxes: the list follows it."""
        self.fleet_list.set_boxes(self._views(), self.gpurent.clock())
        self._follow_order()
        self._schedule_head()

    def refresh_box(self, name: str) -> None:
        """Redraw one box (or serverless app) from the app's state (only what changed is
        repainted)."""
        if name in self.gpurent.serverless:
            self.refresh_app(name)
            return
        if name not in self.gpurent.states:
            return  # removed from the config since
        self.fleet_list.show(self._view(name), self.gpurent.clock())
        self._follow_order()

    def refresh_app(self, name: str) -> None:
        """Redraw a serverless app from its last poll."""
        if name not in self.gpurent.serverless or \
                name not in {v.state.name for v in self.fleet_list.views()}:
            return
        self.fleet_list.show(self._app_view(name), self.gpurent.clock())
        self._follow_order()
        self._schedule_head()

    def _serverless_entry(self, name: str) -> ServerlessConfig | None:
        return next((e for e in self.gpurent.fleet.serverless if e.name == name), None)

    def _box_only(self, key: RunKey | None, what: str) -> RunKey | None:
        """The key, unless it is a serverless app's row: then why `what` does not apply."""
        if key is not None and self._serverless_entry(key[0]) is not None:
            self.notify(f"{what} is for a box; on a serverless app: s stops it, p copies a "
                        "run's weights from its volume", timeout=5, markup=False)
            return None
        return key

    def _box_changed(self, state: BoxState | None) -> None:
        if state is None or state.name not in self.gpurent.states:
            return
        self.refresh_box(state.name)
        self._schedule_head()

    def _cost_changed(self, cost: FleetCost | None) -> None:
        """The first money picture is drawn at once; after that each box's money lines
        follow within MONEY_SECONDS or at its next answer (their figures move by cents)."""
        fleet_list = self.fleet_list
        now = self.gpurent.clock()
        for view in fleet_list.views():
            name = view.state.name
            new = cost.boxes.get(name) if cost is not None else None
            if new is view.cost:
                continue
            if view.cost is None or new is None or news(view.cost, new):
                fleet_list.show(replace(view, cost=new), now)
            else:
                # A box that just answered was drawn with the figures known then; its
                # money lines follow at the coarse money clock (or its next answer).
                fleet_list.stage(replace(view, cost=new), now + MONEY_SECONDS)
        self._schedule_head()

    def _notes_changed(self, notes: dict[str, Text]) -> None:
        for view in self.fleet_list.views():
            if notes.get(view.state.name) is not view.activity:
                self.refresh_box(view.state.name)

    def _pushes_changed(self, pushes: dict[str, object]) -> None:
        for view in self.fleet_list.views():
            if pushes.get(view.state.name, {}) != view.pushes:
                self.refresh_box(view.state.name)

    def _schedule_head(self) -> None:
        """The strip counts the whole fleet: redrawn at most every quarter second."""
        if not self._head_pending:
            self._head_pending = True
            self.set_timer(HEAD_COALESCE_SECONDS, self._show_head)

    def _show_head(self) -> None:
        self._head_pending = False
        head = self.query_one(FleetHead)
        head.boxes = self._boxes()
        head.cost = self.gpurent.cost
        head.apps = self._apps()

    def _tick(self) -> None:
        self.fleet_list.tick(self.gpurent.clock())

    # --- the cursor --------------------------------------------------------------------

    def cursor(self) -> RunKey | None:
        """The run the keys act on: the highlighted one."""
        return self.selected

    def _follow_order(self) -> None:
        """Keep the cursor on a shown run: the one the user chose while it is shown, else
        the top row, as in k9s, unless the top screenful shows no run as urgent as the
        most urgent one (see `_urgency`): then that run, so at 80x24 a panel whose boxes
        fill the screen still opens on the run that trains. Rows keep config order (they
        never move under the reader); only the cursor is placed, until the user moves it."""
        order = self.fleet_list.order
        if self._wanted in order:
            self.selected = self._wanted
            return
        if self._wanted is not None and self.selected in order:
            return
        if not order:
            self.selected = None
            return
        pick = order[0]
        if self._wanted is None:
            rank = self._urgency
            if rank(pick) > 0:  # (the top row trains: nothing is more urgent; no search)
                best = self._most_urgent(order)
                if rank(best) < rank(pick) and not self.fleet_list.fits_on_top(best):
                    pick = best
                if self.selected in order and rank(self.selected) <= rank(pick) \
                        and rank(self.selected) < rank(order[0]):
                    pick = self.selected  # placed already: it does not jump between equals
        self.selected = pick

    def _most_urgent(self, order: list[RunKey]) -> RunKey:
        """The first of the most urgent runs, in order; the search stops at the first run
        that trains (nothing outranks it): each box's answer asks, 1,000 boxes answer."""
        states = self.gpurent.states
        best, best_rank = order[0], 3
        ranks: dict[str, dict[str, int]] = {}
        for key in order:
            box = ranks.get(key[0])
            if box is None:
                state = states.get(key[0])
                box = ranks[key[0]] = {r.path: URGENCY.get(r.health, 2)
                                       for r in (state.runs if state is not None else ())}
            rank = box.get(key[1], 2)
            if rank < best_rank:
                best, best_rank = key, rank
                if rank == 0:
                    break
        return best

    def _urgency(self, key: RunKey | None) -> int:
        """0: a run training now (what one watches: epochs, ETA, its cost); 1: a run that
        stalled or died (money burns, nothing progresses); 2: the rest (history). The
        training run comes first: it is what the panel is opened for, and a stalled or
        dead run also rings an alarm and is counted in the strip."""
        if key is None:
            return 2
        state = self.gpurent.states.get(key[0]) or self.gpurent.serverless.get(key[0])
        run = next((r for r in state.runs if r.path == key[1]), None) if state else None
        if run is None:
            return 2
        return URGENCY.get(run.health, 2)

    def _move(self, step: int) -> None:
        """The next or previous shown run, stopping at the ends (no wrap-around)."""
        order = self.fleet_list.order
        if not order:
            return
        index = order.index(self.selected) if self.selected in order else -step
        self._wanted = self.selected = order[min(max(index + step, 0), len(order) - 1)]

    def action_next_run(self) -> None:
        self._move(1)

    def action_previous_run(self) -> None:
        self._move(-1)

    def _chosen(self) -> RunKey | None:
        key = self.cursor()
        if key is None:
            self.notify("move to a run first (j/k)", timeout=3)
        return key

    # --- the filter --------------------------------------------------------------------

    def _field(self) -> FilterField:
        return self.query_one("#filter", FilterField)

    def action_filter(self) -> None:
        """Show the filter line; it is disabled (never focused) while hidden."""
        field = self._field()
        field.disabled = False
        field.display = True
        self._typing = True
        self.app.call_later(self._focus_filter)

    def _focus_filter(self) -> None:
        """Focus the field after the keys already queued, unless they closed the filter."""
        if self._typing:
            self.set_focus(self._field())

    def action_clear_filter(self) -> None:
        """Escape: clear the filter, whether it is being typed or was kept with enter."""
        if self._field().display:
            self._close_filter(clear=True)

    def _close_filter(self, clear: bool) -> None:
        """Escape clears the filter; enter keeps it, unless its words are a box's name:
        then the filter goes and the cursor goes to that box (`/NAME` enter, as one finds
        a pod in k9s)."""
        self._typing = False
        field = self._field()
        target = None if clear else self._box_named(field.value)
        if clear or target is not None:
            field.value = ""
        self._apply_filter(field.value)
        if not field.value:
            field.display = False
            field.disabled = True
        self.set_focus(None)
        self._follow_order()
        if target is not None:
            self.jump_to_box(target)

    def _box_named(self, text: str) -> str | None:
        """The box whose name the words are (case aside), if any."""
        wanted = text.strip().lower()
        if not wanted:
            return None
        return next((b.name for b in self.gpurent.fleet.boxes
                     if b.name.lower() == wanted and b.name in self.gpurent.states), None)

    def jump_to_box(self, name: str) -> None:
        """The cursor on the box's first run, with the box's head line in view; a box that
        shows no run is scrolled to and says so."""
        fleet_list = self.fleet_list
        first = next((key for key in fleet_list.order if key[0] == name), None)
        if first is None:
            fleet_list.scroll_to_box(name)
            self.notify(f"{name} shows no run", timeout=3, markup=False)
            return
        self._wanted = self.selected = first
        fleet_list.show_cursor()  # the cursor may have been there already, scrolled away

    def _apply_filter(self, value: str) -> None:
        """The runs shown follow the filter's words at once (the cursor among them)."""
        if value != self.filter:
            self.filter = value
            self._follow_order()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self._apply_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._close_filter(clear=False)

    def _is_filter_key(self, key: str) -> bool:
        keys = self.gpurent.fleet.keys.get("filter", FILTER_KEY)
        return key in {k.strip() for k in keys.split(",")}

    def on_key(self, event: events.Key) -> None:
        """Keys that reach the screen while the filter is typed belong to the filter.

        Textual sends a key to whatever has focus when the app takes it from the terminal's
        queue, and the field takes focus only after the keys before it were handled: over
        a slow link `/abc` + Enter arrive in one burst and are all sent to the screen. So
        the filter opens here, as its key is handled (not when its binding runs, after the
        keys behind it were sent on), and until enter or escape every key the field was
        not sent itself is typed into it here: letters, backspace, enter keeps the filter
        (instead of opening a run), escape clears it.
        """
        field = self._field()
        if not self._typing:
            if self.focused is None and self._is_filter_key(event.key):
                event.stop()
                event.prevent_default()
                self.action_filter()
            return
        if event in field.seen:
            return  # the field had it: what it left (enter, escape...) goes to the bindings
        typed: Callable[[], None] | None = None
        if event.is_printable and event.character:
            typed = partial(field.insert_text_at_cursor, event.character)
        elif event.key in ("enter", "escape"):
            typed = partial(self._close_filter, clear=event.key == "escape")
        elif event.key == "backspace":
            typed = field.action_delete_left
        if typed is not None:
            event.stop()
            event.prevent_default()
            typed()
            if self._typing:  # what the keys behind this one act on: the filtered runs
                self._apply_filter(field.value)

    # --- actions on the cursor ---------------------------------------------------------

    def _on_app(self) -> bool:
        """Whether the cursor is on a serverless app's row (its head or one of its runs)."""
        key = self.selected
        return key is not None and self._serverless_entry(key[0]) is not None

    def watch_selected(self) -> None:
        """The footer follows the cursor: on a serverless app's rows s (stop the app) is
        shown and enter (refused there: no run screen for an app's run) hidden; on a
        box's, as the class binds them. The bindings are swapped in place, whatever key
        `[keys]` gave them, so a remap still holds."""
        on_app = self._on_app()
        if on_app == self._footer_on_app:
            return  # the same kind of row: the footer stays (a refresh is a frame per key)
        self._footer_on_app = on_app
        table = self._bindings.key_to_bindings
        for key, bindings in list(table.items()):
            if any(b.id in ROW_BINDINGS for b in bindings):
                table[key] = [row_binding(b, on_app) for b in bindings]  # a new list: the
                # class's map shares its lists with every instance
        self.refresh_bindings()

    def action_open_run(self) -> None:
        key = self._box_only(self._chosen(), "opening a run")
        if key is not None:
            self.post_message(OpenRunRequested(*key))

    def action_push(self) -> None:
        key = self._chosen()
        if key is not None and self._serverless_entry(key[0]) is not None:
            if key[1] == APP_ROW:
                self.notify("move to a run of the app (j/k): p copies its weights",
                            timeout=4)
            else:
                self.post_message(PushRequested(key[0], [key[1]]))
            return
        if key is not None:
            run = self.gpurent.states[key[0]].run(key[1])
            if run is not None:
                self.post_message(PushRequested(key[0], [run.name]))

    def _box_of_cursor(self) -> str | None:
        """The box the cursor's run is on; a fleet of one box needs no cursor."""
        cursor = self.cursor()
        key = self._box_only(cursor, "this")
        if key is not None:
            return key[0]
        if cursor is not None:
            return None  # a serverless app's row: refused above, nothing else starts
        boxes = self.gpurent.fleet.boxes
        if len(boxes) == 1:
            return boxes[0].name
        self.notify("move to a run of the box (j/k), or pick the box in ctrl+p", timeout=4)
        return None

    def action_check(self) -> None:
        box = self._box_of_cursor()
        if box is not None:
            self.post_message(CheckRequested(box))

    def action_doctor(self) -> None:
        box = self._box_of_cursor()
        if box is not None:
            self.post_message(DoctorRequested(box))

    def action_push_box(self) -> None:
        key = self._box_only(self._chosen(), "P (every run of a box)")
        if key is not None:
            self.post_message(PushRequested(key[0], None))

    def _refused(self, action: PowerAction, box: str) -> bool:
        """Offer only what the box can do: say why not instead of asking to confirm."""
        app = self.gpurent
        cost = app.cost.boxes.get(box) if app.cost else None
        state = app.states.get(box)
        why = refusal(action, app.fleet.box(box), cost.rates if cost else None,
                      state.rest if state is not None else None)
        if why is not None:
            self.notify(why, severity="warning", markup=False)
        return why is not None

    def action_stop(self) -> None:
        key = self._chosen()
        if key is None:
            return
        app, box = self.gpurent, key[0]
        entry = self._serverless_entry(box)
        if entry is not None:
            polled = app.serverless.get(box)
            if polled is not None and polled.app is not None and \
                    polled.app.state == "stopped" and polled.error is None:
                self.notify(f"{entry.provider} app {entry.app} is already stopped",
                            severity="warning", markup=False)
                return
            body = (f"`{stop_command(entry)}`: its running containers end "
                    f"now, {stop_loss(entry)}. The volume {entry.volume} stays. The row "
                    "reads stopped once the CLI says so.")
            self.app.push_screen(ConfirmScreen(f"Stop {entry.provider} app {entry.app}?",
                                               body),
                                 partial(self._power_answer, box, "stop"))
            return
        if self._refused("stop", box):
            return
        cost = app.cost.boxes.get(box) if app.cost else None
        stopped = cost.rates.stopped if cost else None
        body = stop_words(app.fleet.box(box), stopped)
        self.app.push_screen(ConfirmScreen(f"Stop {box}?", body),
                             partial(self._power_answer, box, "stop"))

    def _power_answer(self, box: str, action: Literal["stop", "start"], yes: bool | None
                      ) -> None:
        if yes:
            self.post_message(PowerRequested(box, action))

    def action_start(self) -> None:
        key = self._box_only(self._chosen(), "S (start)")
        if key is not None:
            self.confirm_start(key[0])

    def confirm_start(self, box: str) -> None:
        """Start a box, after its confirmation (S on a run; the palette for any box)."""
        app = self.gpurent
        if self._refused("start", box):
            return
        cost = app.cost.boxes.get(box) if app.cost else None
        running = cost.rates.running if cost else None
        bill = (f"It bills {usd(running.usd_per_hr)}/hr again once running."
                if running else "It bills its running rate again once running.")
        body = f"{bill}\nAfterwards the panel re-reads it and says if the GPU count changed."
        self.app.push_screen(ConfirmScreen(f"Start {box}?", body),
                             partial(self._power_answer, box, "start"))

    def action_destroy(self) -> None:
        key = self._chosen()
        entry = self._serverless_entry(key[0]) if key is not None else None
        if entry is not None:
            self.notify(destroy_words(entry), severity="warning", timeout=8, markup=False)
            return
        if key is not None:
            self.confirm_destroy(key[0])

    def confirm_destroy(self, box: str) -> None:
        """The destroy dialog for a box (D on a run; the palette for any box)."""
        app = self.gpurent
        if self._refused("destroy", box):
            return
        state = app.states[box]
        losses = []
        for run in state.runs:
            size = sum(w.size for w in run.weights)
            losses.append(f"{run.name} ({run.health}, {len(run.weights)} checkpoint files, "
                          f"{human_bytes(size)})")
        if state.connection is not Connection.OK:
            age = state.data_age(app.clock())
            what = state.rest.words() if state.rest is not None else state.connection
            losses.append(f"(the box is {what}; this is what it held "
                          f"{format_age(age) if age is not None else '?'} ago)")
        from tui.actions.flows import destroy_blockers

        # What this look shows as refused; the destroy itself decides on a fresh look.
        unpushed = destroy_blockers(state, app.journal)

        def chosen(answer: str | None) -> None:
            if answer is not None:
                self.post_message(DestroyRequested(box, answer, unpushed))

        self.app.push_screen(DestroyScreen(box, losses, unpushed), chosen)

    def action_launch(self) -> None:
        """The launch form for the cursor's box (the first box when no run is shown)."""
        key = self._box_only(self.cursor(), "L (launch)")
        boxes = self.gpurent.fleet.boxes
        if key is None and (self.cursor() is not None or not boxes):
            return
        self.post_message(LaunchRequested(key[0] if key is not None else boxes[0].name))

    def action_cancel_action(self) -> None:
        """`x`: cancel what runs on the cursor's box (or on the only busy box, when the
        cursor's box runs nothing), after a confirmation when it may be left half-done."""
        app = self.gpurent
        key = self.cursor()
        busy = list(app.busy)
        if key is not None and key[0] in app.busy:
            self.post_message(CancelRequested(key[0]))
        elif key is not None and self._serverless_entry(key[0]) is not None:
            # an app's row cancels the app's own action only, never some box's
            self.notify(f"nothing is running on {key[0]}", timeout=3, markup=False)
        elif len(busy) == 1:
            self.post_message(CancelRequested(busy[0]))
        elif busy:
            self.notify("actions run on " + ", ".join(busy) + ": move to a run of the box "
                        "(j/k), or ctrl+p: Cancel …", timeout=5, markup=False)
        else:
            where = f"on {key[0]}" if key is not None else "on any box"
            self.notify(f"nothing is running {where}", timeout=3, markup=False)

    def action_monitor(self) -> None:
        key = self._box_only(self._chosen(), "w (the web monitor)")
        if key is not None:
            self.post_message(MonitorRequested(*key))

    # --- the palette -------------------------------------------------------------------

    def palette(self, screen: Screen[object]) -> Iterator[SystemCommand]:
        """The panel's actions and every run by name, for the palette (ctrl+p) opened over
        `screen` (this one, or one above it): each asks the app through a message."""
        view, ask = self.gpurent, self.app.post_message
        yield SystemCommand("Refresh now", "Probe every box now",
                            lambda: self.app.run_action("refresh"))
        if screen is self:
            yield SystemCommand("Filter runs", "Show only runs matching a name or health",
                                self.action_filter)
        yield SystemCommand("Costs", "Every box's rates, spend and break-even; the fleet's "
                            "spend over time", lambda: self.app.run_action("costs"))
        resting = {n: s.rest for n, s in view.states.items() if s.rest is not None}
        for name in sorted(view.stopped_unasked() | {n for n, r in resting.items()
                                                     if r.kind == "stopped"}):
            if screen is self:  # a box with no run shown has no cursor
                words = view.stopped_words(name) or resting[name].words()
                yield SystemCommand(escape(f"Start {name}"), f"{words}: start it again (the "
                                    "GPU may be gone)", partial(self.confirm_start, name))
                yield SystemCommand(escape(f"Destroy {name}"), f"{words}: destroy it (the "
                                    "destroy guard decides)", partial(self.confirm_destroy, name))
        yield SystemCommand("Stage a data set on the Hub", "one tar of a folder in a private "
                            "dataset repo, verified by sha256", lambda: ask(StageRequested()))
        yield SystemCommand("Size a disk", "data + checkpoints + 30% headroom: the disk to rent",
                            lambda: ask(SizeRequested()))
        for name in view.states:
            if name in resting:  # nothing to check, doctor, fetch onto or launch on
                continue
            yield SystemCommand(escape(f"Check {name}"), "torch, CUDA, a real matmul per GPU, "
                                "GPU health, LibreYOLO, HF_HOME",
                                lambda b=name: ask(CheckRequested(b)))
            yield SystemCommand(escape(f"Doctor a data set on {name}"), "LibreYOLO's own "
                                "dataset checks, run on the box",
                                lambda b=name: ask(DoctorRequested(b)))
            yield SystemCommand(escape(f"Profile on {name}"), "LibreYOLO's profiler for a "
                                "few steps: what limits training, what a change is worth "
                                "per 1k images", lambda b=name: ask(ProfileRequested(b)))
            yield SystemCommand(escape(f"Fetch a data set onto {name}"), "a tar staged on the "
                                "Hub, downloaded by the box, sha256-checked, unpacked safely",
                                lambda b=name: ask(FetchRequested(b)))
            yield SystemCommand(escape(f"Size a disk for {name}"), "data + checkpoints + 30% "
                                "headroom, priced at this box's stopped rate",
                                lambda b=name: ask(SizeRequested(b)))
            yield SystemCommand(escape(f"Launch on {name}"), "Start a run detached: "
                                "libreyolo train or your script (the launch form)",
                                lambda b=name: ask(LaunchRequested(b)))
        for name, what in list(view.busy.items()):
            yield SystemCommand(escape(f"Cancel {what} on {name}"),
                                escape(cancel_words(what).ask or "nothing is left half-done"),
                                lambda b=name: ask(CancelRequested(b)))
        for box in view.states.values():
            for run in box.runs:
                # The palette reads both as markup: a run named "[/]" would crash it.
                yield SystemCommand(
                    escape(f"Open {box.name}/{clean(run.name)}"),
                    escape(f"{run.health}: {clean(run.reason)}"),
                    lambda b=box.name, p=run.path: ask(OpenRunRequested(b, p)))
