"""The Textual app: one sink of the fleet's runtime, its toasts and its screens.

The runtime (tui/runtime/: watchers, the provider poller, the money, the
policies, one action per box) is the same as `gpurent-tui watch`'s; the app
turns its events into reactives (`box_state`, `cost`, `notes`, `pushes`) that
the screens watch, and into toasts. The screens read the app through a
read-only view (tui/screens/view.py) and send what they want done up as
messages (tui/messages.py); the app runs it through the runtime or opens the
screen it names.

`GpurentApp(fleet)` watches live boxes; `GpurentApp(fleet, states=..., live=False)`
shows fixed snapshots (snapshot tests, screenshots) through the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import ClassVar, Literal

from rich.text import Text
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding, BindingType
from textual.events import Key
from textual.message import Message
from textual.notifications import Notification, Notify, SeverityLevel
from textual.reactive import var
from textual.screen import Screen

from tui.actions.alerts import AlertSender
from tui.actions.board import Board, StageProgress
from tui.actions.flows import DIALOG_PUSH_FIRST, Report
from tui.actions.guardian import Guardian
from tui.memory import HistorySettler, settle_history, thaw
from tui.messages import (
    ActionEnded,
    ActionProgress,
    BoxUpdated,
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
from tui.model.alerts import AlertEvent
from tui.model.box import BoxState, came_back
from tui.model.cancel import CANCELLED, cancel_words
from tui.model.config import FleetConfig
from tui.model.guard import PushRecord, Unpushed
from tui.model.launch import LaunchForm, LaunchRequest
from tui.model.meter import FleetCost
from tui.model.preflight import CheckVerdict, DoctorReport
from tui.model.rest import rest_refusal
from tui.model.serverless_runs import ServerlessState
from tui.model.staging import FetchReport
from tui.providers.meter import CostMeter
from tui.remote.watch import BoxWatcher
from tui.runtime import events as ev
from tui.runtime.fleet import Runtime
from tui.screens.confirm import ConfirmScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.run_detail import RunDetail, run_stake
from tui.store.journal import Journal
from widgets.action_text import ended_text, ended_toast
from widgets.fleet_text import clock_time
from widgets.keys_panel import KeysPanel

TOAST_SECONDS = 4


def escape_then_key(key: Key, bound: Iterable[str]) -> list[Key] | None:
    """Escape and the key, for an Alt+key that is really Escape typed just before it.

    A terminal sends Escape as ESC, and Alt+key as ESC and the key: an Escape followed
    within Textual's escape delay by a letter or digit (typing ahead, a laggy link) reads
    as `alt+<k>`. Where no binding gives that Alt+key a meaning, it is the two keys the
    user typed; None where it means itself (a key remapped to it) or is not that case.
    """
    char = key.character
    if (not key.key.startswith("alt+") or char is None or len(char) != 1
            or not char.isalnum() or key.key in set(bound)):
        return None
    return [Key("escape", "\x1b"), Key(char, char)]
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
        # k9s's key for the commands beside ctrl+p, on every screen as ctrl+p (dialogs too:
        # priority); a field that types ':' still gets it (Textual leaves a key a focused
        # Input takes out of every binding). The words are Textual's: `^p palette`.
        Binding("colon,ctrl+p", "command_palette", "palette", id="palette", show=False,
                priority=True),
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
        # Alarms, alerts, milestone pushes, preemption, the actions: the same runtime as
        # `watch`'s; the panel is one sink of its events.
        self.runtime = Runtime(fleet, self._event, journal=journal, meter=meter, clock=clock,
                               live=live, states=states, sender=AlertSender(
                                   fleet.alerts, failed=self._alert_failed) if live else None)
        self._alarm_toast: Notification | None = None  # the alarms' toast shown last
        self._alarm_items: list[tuple[str, str]] = []  # (title, words) it says
        self._drawn: dict[str, BoxState] = dict(self.runtime.states)  # as last drawn
        self._results: dict[str, str] = {}  # box -> the action whose result its line shows
        self._settler = HistorySettler()
        self.set_reactive(GpurentApp.pushes, self.runtime.pushes)

    def post_message(self, message: Message) -> bool:
        """Keys from the terminal come in here: an unbound Alt+key is split into the Escape
        and the key it was typed as, queued in order, so typeahead after Escape acts on
        the screen the Escape left (`c Escape J`: the costs close, the journal opens)."""
        if isinstance(message, Key) and not message.is_forwarded and self.is_running:
            split = escape_then_key(message, self._bound_keys())
            if split is not None:
                posted = [App.post_message(self, key) for key in split]
                return all(posted)
        return super().post_message(message)

    def _bound_keys(self) -> set[str]:
        """Every key a binding gives a meaning now: the focused widget's up to the app's."""
        try:
            chain = self.screen._binding_chain
        except ScreenStackError:  # no screen yet (starting) or any more (closing)
            return set()
        return {key for _, bindings in chain for key in bindings.key_to_bindings}

    # What the runtime holds, read here (the screens and the tests read it through the app).

    @property
    def states(self) -> dict[str, BoxState]:
        return self.runtime.states

    @property
    def serverless(self) -> dict[str, ServerlessState]:
        """Each serverless entry's last poll (Modal, Beam apps beside the boxes)."""
        return self.runtime.serverless

    @property
    def watchers(self) -> dict[str, BoxWatcher]:
        return self.runtime.watchers

    @property
    def meter(self) -> CostMeter | None:
        return self.runtime.meter

    @property
    def journal(self) -> Journal:
        return self.runtime.journal

    @property
    def guardian(self) -> Guardian:
        return self.runtime.guardian

    @property
    def board(self) -> Board:
        return self.runtime.board

    @property
    def busy(self) -> dict[str, str]:
        """box -> the action in flight (one at a time per box)."""
        return self.runtime.busy

    @property
    def monitors(self) -> dict[tuple[str, str], asyncio.Event]:
        return self.runtime.monitors

    @property
    def checks(self) -> dict[str, CheckVerdict]:
        """box -> its last check's verdict (the box's header shows it)."""
        return self.runtime.board.checks

    def get_default_screen(self) -> Screen[None]:
        return FleetScreen()

    def on_mount(self) -> None:
        if self.fleet.keys:
            self.set_keymap(dict(self.fleet.keys))
        if self.live:
            self.call_after_refresh(settle_history)  # Textual's own start-up objects
        self.runtime.start()

    def on_unmount(self) -> None:
        self.runtime.stop()  # its tasks end with the panel
        thaw()  # a closed panel's objects are collectable (the tests run many in one process)

    # --- the runtime's events, drawn ---------------------------------------------------

    def _event(self, item: ev.Event) -> None:
        """One event of the runtime: into the reactives the screens watch, or a toast.
        Snapshots, progress and ends go through Textual's queue, where a newer snapshot or
        progress replaces one not yet drawn (tui/messages.py)."""
        if not self.is_running:
            return
        if isinstance(item, ev.BoxChanged):
            self.post_message(BoxUpdated(item.state))
        elif isinstance(item, ev.ActionProgress):
            self.post_message(ActionProgress(item.box, item.text))
        elif isinstance(item, ev.ActionEnded):
            # Its own screen (doctor, fetch) shows it, unless `x` cancelled it from here.
            if not item.quiet or item.outcome == CANCELLED:
                self.post_message(ActionEnded(item.box, item.what, list(item.lines),
                                              item.code, item.outcome, item.alarmed))
        elif isinstance(item, ev.CostChanged):
            self.cost = item.cost
        elif isinstance(item, ev.ConfigReloaded):
            self.fleet = item.fleet  # the screens read rates, limits and targets from here
            fleet = self.screen_stack[0] if self.screen_stack else None
            if isinstance(fleet, FleetScreen):
                fleet.boxes_changed()
        elif isinstance(item, ev.Alarm):
            self.alarm([("", n.text) for n in item.notices] + [_titled(e) for e in item.alerts],
                       item.severity, bell=item.bell)
        elif isinstance(item, ev.ActionStarted):
            if not item.quiet:
                self._note(item.box, Text(f"{item.what}…"))
        elif isinstance(item, ev.ActionRefused):
            self.notify(f"{item.running} on {item.box} is still running", severity="warning",
                        timeout=TOAST_SECONDS)
        elif isinstance(item, ev.ActionCancelling):
            self._note(item.box, Text(f"cancelling {item.what}…"))
        elif isinstance(item, ev.PushesChanged):
            self.pushes = item.pushes
        elif isinstance(item, ev.Notice):
            self.notify(item.text, severity=item.severity, timeout=15, markup=False)
        elif isinstance(item, ev.MonitorNote):
            self._note(item.box, Text(item.words, style=item.style))
        elif isinstance(item, ev.ServerlessChanged):
            fleet = self.screen_stack[0] if self.screen_stack else None
            if isinstance(fleet, FleetScreen):
                fleet.refresh_app(item.state.name)

    async def on_box_updated(self, message: BoxUpdated) -> None:
        state = message.state
        before = self._drawn.get(state.name)
        self._settler.updated(before if before is not None else state, state)
        self._drawn[state.name] = state
        if came_back(before, state) and self._results.get(state.name) not in (None, "start"):
            self._drop_result(state.name)
        self.box_state = state
        # Textual handles the messages already queued in one step of the event loop: when a
        # round of answers lands together, a hundred box redraws would hold it (and every
        # key and frame) for a quarter second. One box per step instead.
        await asyncio.sleep(0)

    def on_action_progress(self, message: ActionProgress) -> None:
        if message.text is not None and message.box in self.busy:
            self._note(message.box, Text(message.text))

    def on_action_ended(self, message: ActionEnded) -> None:
        """The outcome stays on the box's line (and in the journal); the toast is short. A
        stop or destroy not read back reads "unknown: may still be billing", not failed."""
        box = message.box
        stamp = clock_time(self.clock()) or ""
        self._note(box, ended_text(message.what, message.code, message.outcome, message.lines,
                                   stamp))
        self._results[box] = message.what
        if message.alarmed:  # the alarm's toast says it, with why: one toast, not two
            return
        toast, severity = ended_toast(box, message.what, message.code, message.outcome)
        self.notify(toast, severity=severity, timeout=TOAST_SECONDS)

    def action_refresh(self) -> None:
        self.runtime.poke()
        self.notify("refreshing every box", timeout=2)

    def alarm(self, items: list[tuple[str, str]], severity: SeverityLevel, *,
              bell: bool = True) -> None:
        """Alarms of one moment ((title, words) each) in one short toast: the alarms' toast
        still shown is replaced by one that says both, never stacked over the runs."""
        if not items:
            return
        if bell:
            self.bell()
        live = self._alarm_toast
        if live is not None and not live.has_expired:
            items = [*self._alarm_items, *items]
            severity = max(severity, live.severity, key=_WEIGHT.__getitem__)
            live.timeout = 0  # expired: the toast rack drops it as the new one comes
        self._alarm_items = items
        if len(items) == 1:
            title, message = items[0]
        else:
            title = f"{len(items)} alarms"
            message = "\n".join(words for _, words in items[:ALARM_LINES])
            if len(items) > ALARM_LINES:
                message += f"\n… {len(items) - ALARM_LINES} more: each box's line says it"
        # Kept here: an alarm a moment later finds it, before the toast is drawn.
        toast = self._alarm_toast = Notification(message, title, severity,
                                                 ALARM_TOAST_SECONDS, markup=False)
        self.post_message(Notify(toast))

    def _alert_failed(self, line: str) -> None:
        """An alert that did not go out (the webhook's URL is never in these words)."""
        self.notify(line, severity="warning", timeout=10, markup=False)

    # --- actions -----------------------------------------------------------------------

    def start_action(self, box: str, what: str, work: Callable[[], Awaitable[Report]]) -> bool:
        """Run one action on a box (the runtime holds the box's lock); a second while one
        runs is refused, never sent twice."""
        return self.runtime.run(box, what, work)

    def cancel_action(self, box: str, task: asyncio.Task[None] | None = None) -> None:
        """`x` (or the palette): end the box's running action. One that may be left
        half-done asks first, saying what is still safe; the answer cancels that same
        action only (one that ended meanwhile, or its successor, is left alone)."""
        what, running = self.busy.get(box), self.runtime.action_task(box)
        if what is None or running is None:
            self.notify(f"nothing is running on {box}", timeout=TOAST_SECONDS, markup=False)
            return
        words = cancel_words(what)
        if task is None and words.ask is not None:
            self.push_screen(ConfirmScreen(f"Cancel {what} on {box}?", words.ask),
                             lambda yes: self.cancel_action(box, running) if yes else None)
            return
        if not self.runtime.cancel(box, task):
            self.notify(f"{what} on {box} had already ended", timeout=TOAST_SECONDS,
                        markup=False)

    def _note(self, box: str, text: Text) -> None:
        self.notes = {**self.notes, box: text}
        self._results.pop(box, None)  # an action's result until on_action_ended says so

    def _drop_result(self, box: str) -> None:
        """The box's power state changed since its line's action result (a start's own
        result stays): the line drops it; the journal (J) still has it."""
        self._results.pop(box, None)
        self.notes = {name: text for name, text in self.notes.items() if name != box}

    # What the screens' keys ask for: the board prepares the work, the app runs it.

    def at_rest_refused(self, action: str, box: str) -> bool:
        """A box at rest (stopped or destroyed on purpose) cannot be pushed from, checked,
        doctored, fetched onto or launched on: say why in one line instead."""
        state = self.runtime.states.get(box)
        why = rest_refusal(action, box, state.rest if state is not None else None)
        if why is not None:
            self.notify(why, severity="warning", markup=False)
        return why is not None

    def push(self, box: str, runs: list[str] | None, confirmed: bool = False) -> None:
        """Push the named runs (or every run) of a box, with progress on its line. On a
        serverless app: the run's weights copied from its volume (`runs`: its path)."""
        if box in self.runtime.serverless:
            for path in runs or ():
                self.runtime.push_serverless(box, path)
            return
        if self.at_rest_refused("push", box):
            return
        notice = self.board.token_notice(box)
        if notice is not None and not confirmed:  # the first push that sends a token to a box
            self.push_screen(ConfirmScreen(f"Send your Hub token to {box}?", notice),
                             lambda yes: self.push(box, runs, True) if yes else None)
            return
        self.runtime.push(box, runs)

    def power(self, box: str, action: Literal["stop", "start"]) -> None:
        if box in self.runtime.serverless and action == "stop":
            self.runtime.stop_serverless(box)
            return
        self.runtime.power(box, action)

    def push_and_stop(self, box: str) -> None:
        """on_budget = "push-and-stop": never lose weights, then stop paying for the GPU."""
        self.runtime.push_and_stop(box)

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
        self.runtime.run(box, "destroy", self.board.destroy(box, answer, shown))

    def launch_form(self, box: str) -> LaunchForm:
        return self.board.launch_form(box)

    def open_launch(self, box: str) -> None:
        """`L`, or "Launch on <box>" in the palette (a box with no run has no cursor):
        the launch form for that box, prefilled from its last launch."""
        if self.at_rest_refused("launch", box):
            return
        from tui.screens.launch import LaunchScreen

        self.push_screen(LaunchScreen([b.name for b in self.fleet.boxes], box,
                                      self.launch_form),
                         lambda request: self.launch(request) if request else None)

    def launch(self, request: LaunchRequest) -> None:
        self.runtime.run(request.box, "launch", self.board.launch(request))

    def check(self, box: str) -> None:
        """`g`: the box's torch, CUDA, GPUs, LibreYOLO and HF_HOME; the verdict in its header."""
        if self.at_rest_refused("check", box):
            return
        self.runtime.check(box)

    def open_doctor(self, box: str) -> None:
        """`G`: LibreYOLO's doctor on a data set on the box, in its own screen."""
        if self.at_rest_refused("doctor", box):
            return
        from tui.screens.doctor import DoctorScreen

        doctor = self.board.doctor(box)

        async def locked(data: str) -> DoctorReport:  # under the box's lock, as every action
            return await self.runtime.locked(box, "doctor", lambda: doctor(data))

        self.push_screen(DoctorScreen(box, locked, self.board.doctor_paths.get(box, "")))

    def open_profile(self, box: str, run: str | None = None) -> None:
        """LibreYOLO's profiler on the box (a run's settings), in its own screen, under the
        box's lock: `x` cancels it as any action."""
        from tui.model.profile import ProfileReport, ProfileRequest
        from tui.screens.profile import ProfileScreen

        profile = self.board.profile(box)

        async def locked(request: ProfileRequest, say: Callable[[str], None]
                         ) -> ProfileReport:
            return await self.runtime.locked(box, "profile", lambda: profile(request, say))

        self.push_screen(ProfileScreen(box, run, locked))

    def open_fetch(self, box: str) -> None:
        """ctrl+p: a staged data set onto the box (the fetch command), in its own screen."""
        if self.at_rest_refused("fetch", box):
            return
        from tui.actions.stage import default_dest
        from tui.screens.fetch import FetchScreen

        fetch = self.board.fetch(box)

        async def locked(repo: str, dest: str, progress: StageProgress,
                         confirmed: bool = False) -> FetchReport:  # under the box's lock
            return await self.runtime.locked(box, "fetch", lambda: fetch(
                repo, dest, progress, confirmed))

        self.push_screen(FetchScreen(box, locked, default_dest(self.fleet.box(box))))

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
        if not self.runtime.toggle_monitor(box, path):
            self.notify("no live box to open a monitor on", timeout=TOAST_SECONDS)

    async def action_quit(self) -> None:
        """Close every monitor first: one this panel started must not outlive it on a box."""
        await self.runtime.close_monitors()
        if self.runtime.sender is not None:
            await self.runtime.sender.aclose(grace=2.0)  # alerts on their way get 2 s
        self.exit()

    # --- screens -----------------------------------------------------------------------

    def open_run(self, box_name: str, path: str) -> None:
        run = self.states[box_name].run(path)
        if run is not None:
            self.push_screen(RunDetail(box_name, run, stake=lambda run: run_stake(
                run, self.states.get(box_name), self.pushes.get(box_name, {}),
                self.cost.boxes.get(box_name) if self.cost is not None else None),
                unit=lambda run: self.cost.boxes[box_name].units.get(run.path)
                if self.cost is not None and box_name in self.cost.boxes else None))

    def action_journal(self) -> None:
        if not isinstance(self.screen, JournalScreen):
            self.push_screen(JournalScreen(self.journal.entries))

    def action_costs(self) -> None:
        if self.meter is None or self.cost is None:
            self.notify("no cost figures in this view", timeout=3)
            return
        if not isinstance(self.screen, CostScreen):
            self.push_screen(CostScreen(self.cost, self.meter.fleet_events, self.clock,
                                        right_size=self.meter.right_size,
                                        apps=self._app_costs if self.fleet.serverless
                                        else None))

    def _app_costs(self) -> list[str]:
        """The serverless apps' estimates for the costs screen, from their last polls."""
        from tui.model.serverless_doc import app_cost_lines, pairs

        return app_cost_lines(pairs(self.fleet.serverless, list(self.serverless.values())),
                              self.clock())

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_show_help_panel(self) -> None:
        """`?` (or "Keys" in the palette): every key of this screen, in a panel that takes
        the focus so the arrows, j/k and the page keys scroll it (Textual's own cannot
        be scrolled without a mouse: at 80x24 its list was cut)."""
        screen = self.screen
        if not screen.query("HelpPanel"):
            screen.mount(KeysPanel(screen.active_bindings.values(), screen.focused))

    def action_hide_help_panel(self) -> None:
        """`?` again, Escape in the panel, or the palette: the focus goes back."""
        for panel in self.screen.query(KeysPanel):
            panel.close()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p): Textual's own commands, then the fleet screen's (the
        panel's actions and every run by name), whichever screen it opens over."""
        yield from super().get_system_commands(screen)
        fleet = self.screen_stack[0] if self.screen_stack else None
        if isinstance(fleet, FleetScreen):
            yield from fleet.palette(screen)

    # --- what the screens ask for (messages up) ----------------------------------------

    def on_open_run_requested(self, request: OpenRunRequested) -> None:
        self.open_run(request.box, request.path)

    def on_push_requested(self, request: PushRequested) -> None:
        self.push(request.box, request.runs)

    def on_power_requested(self, request: PowerRequested) -> None:
        self.power(request.box, request.action)

    def on_destroy_requested(self, request: DestroyRequested) -> None:
        self.destroy(request.box, request.answer, request.shown)

    def on_check_requested(self, request: CheckRequested) -> None:
        self.check(request.box)

    def on_doctor_requested(self, request: DoctorRequested) -> None:
        self.open_doctor(request.box)

    def on_profile_requested(self, request: ProfileRequested) -> None:
        self.open_profile(request.box, request.run)

    def on_fetch_requested(self, request: FetchRequested) -> None:
        self.open_fetch(request.box)

    def on_stage_requested(self, _: StageRequested) -> None:
        self.open_stage()

    def on_size_requested(self, request: SizeRequested) -> None:
        self.open_size(request.box)

    def on_launch_requested(self, request: LaunchRequested) -> None:
        self.open_launch(request.box)

    def on_monitor_requested(self, request: MonitorRequested) -> None:
        self.toggle_monitor(request.box, request.path)

    def on_cancel_requested(self, request: CancelRequested) -> None:
        self.cancel_action(request.box)

    # --- the read-only view the screens get (tui/screens/view.py) -----------------------

    def stopped_words(self, box: str) -> str | None:
        return self.guardian.stopped_words(box)

    def stopped_unasked(self) -> frozenset[str]:
        return self.guardian.preempted | self.guardian.unsure
