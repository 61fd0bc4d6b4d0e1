"""The actions on a fleet's boxes, as work for the runtime to run: no Textual here.

The panel's keys (and the runtime's policies) ask for a push, a stop, a destroy, a
check...; each method here returns the work (`Work`, an async callable that ends
in a `Report`) and the runtime (tui/runtime/fleet.py) runs it as a task, one
action per box at a time (`busy`), and says what it says (`progress`). Work on a
box the runtime watches reuses its watcher's session (already logged in); a box
it does not watch gets a session of its own (`session`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal

from tui.actions.flows import Report
from tui.actions.guardian import Guardian
from tui.model.alerts import AlertEvent
from tui.model.box import BoxState
from tui.model.cancel import CANCELLED, CancelWords, cancel_words
from tui.model.config import FleetConfig
from tui.model.guard import Unpushed
from tui.model.launch import LaunchForm, LaunchRequest
from tui.model.milestones import Wish
from tui.model.preflight import CheckVerdict, DoctorReport, last_check_verdicts
from tui.model.profile import ProfileReport, ProfileRequest
from tui.model.sizing import human_bytes
from tui.model.text import clean
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal
from tui.store.ledger import Ledger

if TYPE_CHECKING:  # imported where used: the panel starts faster
    from tui.model.staging import FetchReport
    from tui.remote.session import BoxSession

Work = Callable[[], Awaitable[Report]]
Progress = Callable[[str, str], object]  # (box, words for its line while the work runs)
Note = Callable[[str, str, str], None]  # (box, words, style): a line that stays
StageProgress = Callable[[str, int, int], None]  # (step, bytes done, bytes total)


class Board:
    """What the panel's keys do to boxes; the panel decides when, and draws the outcome."""

    def __init__(self, fleet: FleetConfig, journal: Journal, guardian: Guardian, *,
                 watchers: Mapping[str, BoxWatcher], states: Mapping[str, BoxState],
                 ledger: Ledger | None, clock: Callable[[], float],
                 progress: Progress) -> None:
        self.fleet = fleet
        self.journal = journal
        self.guardian = guardian
        self.watchers = watchers  # the panel's own: empty when it shows fixed snapshots
        self.states = states  # the panel's, kept current by it
        self.ledger = ledger  # the meter's, so an outcome is billed at the next refresh
        self.clock = clock
        self.progress = progress
        self.busy: dict[str, str] = {}  # box -> the action in flight (one at a time per box)
        self.monitors: dict[tuple[str, str], asyncio.Event] = {}  # (box, run path) -> stop
        self.checks: dict[str, CheckVerdict] = last_check_verdicts(journal.entries)
        self.doctor_paths: dict[str, str] = {}  # box -> the data set last doctored
        # How long a stop or start watches for its effect, looking every poll_interval.
        self.observe_timeout = 180.0
        self.poll_interval = 3.0

    def _watched(self, box: str) -> BoxSession | None:
        watcher = self.watchers.get(box)
        return watcher.session if watcher is not None else None

    # --- pushes and power ----------------------------------------------------------------

    def token_notice(self, box: str) -> str | None:
        """What to confirm before the first push that sends a Hub token to this box."""
        from tui.actions.push import token_notice

        return token_notice(self.fleet.box(box), self.journal.entries)

    def push(self, box: str, runs: list[str] | None) -> Work:
        """Push the named runs (or every run) of a box, with progress on its line."""
        from tui.actions.flows import push_runs

        watched = box in self.watchers

        def progress(name: str, done: int, total: int) -> None:
            self.progress(box, f"pushing {clean(name)}: {human_bytes(done)} of "
                          f"{human_bytes(total)}")

        return lambda: push_runs(
            self.fleet, self.fleet.box(box), self.journal, run_names=runs, progress=progress,
            session=self._watched(box), state=self.states.get(box) if watched else None)

    def power(self, box: str, action: Literal["stop", "start"]) -> Work:
        from tui.actions.flows import power

        return lambda: power(self.fleet, self.fleet.box(box), action, self.journal,
                             session=self._watched(box), ledger=self.ledger,
                             observe_timeout=self.observe_timeout,
                             poll_interval=self.poll_interval)

    def push_and_stop(self, box: str) -> Work:
        """on_budget = "push-and-stop": never lose weights, then stop paying for the GPU."""
        from tui.actions.flows import push_and_stop

        watched = box in self.watchers
        return lambda: push_and_stop(
            self.fleet, self.fleet.box(box), self.journal, session=self._watched(box),
            state=self.states.get(box) if watched else None, ledger=self.ledger,
            observe_timeout=self.observe_timeout, poll_interval=self.poll_interval)

    def destroy(self, box: str, answer: str, shown: list[Unpushed]) -> Work:
        """The destroy dialog's answer: the guard decides on a fresh look of the box, and a
        typed override accepts exactly the refusals the dialog showed."""
        from tui.actions.flows import destroy_from_dialog

        return lambda: destroy_from_dialog(self.fleet, self.fleet.box(box), self.journal,
                                           answer, shown, ledger=self.ledger)

    def cancelled(self, box: str, what: str) -> CancelWords:
        """Journal that the user cancelled `what` on `box` while it ran; the words for
        what is still safe come back for the box's line."""
        words = cancel_words(what)
        self.journal.record(box=box, action=words.action, outcome=CANCELLED,
                            message=f"{what} cancelled by you: {words.after}",
                            at=self.clock(), details={"cancelled": what})
        return words

    def milestone(self, state: BoxState, ring: Callable[[list[AlertEvent]], object]
                  ) -> tuple[Wish, Work] | None:
        """The push a milestone calls for (`[box.push] every_epochs`, `on_best`,
        `on_complete`), unasked, through the push flow; `ring` gets the alerts its end
        raises. None when no milestone asks for one (or the box is busy)."""
        wish = self.guardian.milestone(state, busy=state.name in self.busy)
        if wish is None:
            return None
        from tui.actions.flows import push_runs

        session = self._watched(state.name)

        async def work(wish: Wish = wish) -> Report:
            try:
                report = await push_runs(
                    self.fleet, self.fleet.box(wish.box), self.journal,
                    run_names=[wish.run],
                    include_epochs=list(wish.epochs) if wish.epochs else False,
                    session=session, state=state, why=wish.why)
            except asyncio.CancelledError:
                self.guardian.push_cancelled(wish)  # tried again after its backoff only
                raise
            events = self.guardian.push_ended(wish, report.code == 0, report.lines)
            if events:
                ring(events)
            return report

        return wish, work

    # --- launch and monitor --------------------------------------------------------------

    def launch_form(self, box: str) -> LaunchForm:
        """The launch form as the box's last launch left it (its journal line); a first
        launch on a `gpu = false` box trains on its CPU, so its device starts as `cpu`."""
        from tui.model.launch import LaunchForm, form_from_entry, last_entry

        base = LaunchForm() if self.fleet.box(box).gpu else LaunchForm(device="cpu")
        return form_from_entry(last_entry(self.journal.entries, box, "launch"), base)

    def launch(self, request: LaunchRequest) -> Work:
        """Start a run detached on a box; it shows in its section once it writes status.json
        (the box is looked at again as soon as the launch ends)."""
        from tui.actions.launch import launch_from_form

        box = request.box
        return lambda: launch_from_form(
            self.fleet, self.fleet.box(box), request, self.journal, now=self.clock(),
            session=self._watched(box), on_event=lambda text: self.progress(box, text))

    def close_monitor(self, box: str, path: str) -> bool:
        """Ask the run's open monitor to close; False when none is open."""
        stop = self.monitors.get((box, path))
        if stop is not None:
            stop.set()
        return stop is not None

    def monitor(self, box: str, path: str, note: Note) -> Callable[[], Awaitable[None]] | None:
        """`w`: LibreYOLO's monitor of the run, forwarded to 127.0.0.1 here, held until
        `close_monitor`; what happens goes to `note`. None without a live box and run."""
        from tui.actions.monitor import MonitorError, close_monitor, hold_monitor, open_monitor

        watcher, state = self.watchers.get(box), self.states.get(box)
        run = state.run(path) if state is not None else None
        if watcher is None or run is None:
            return None
        session, name = watcher.session, run.name
        stop = self.monitors[(box, path)] = asyncio.Event()
        note(box, f"monitor of {name}: starting…", "")

        async def hold() -> None:
            handle = None
            try:
                handle = await open_monitor(session, self.fleet.box(box), path)
                note(box, f"monitor of {name}: {handle.run_url}  (w closes it)", "bold")
                await hold_monitor(session, handle, stop,
                                   say=lambda line: note(box, line, ""))
            except MonitorError as exc:
                note(box, f"monitor of {name}: {exc.message}", "red")
            finally:
                self.monitors.pop((box, path), None)
                if handle is not None:
                    note(box, f"monitor of {name} closed: "
                         f"{await close_monitor(session, handle)}", "")

        return hold

    def close_monitors(self) -> None:
        """Ask every open monitor to close (the panel waits for its workers)."""
        for stop in list(self.monitors.values()):
            stop.set()

    # --- before the GPU bills: check and doctor ------------------------------------------

    def check(self, box: str) -> Work:
        """`g`: torch, CUDA, one real matmul per GPU, GPU health, LibreYOLO and HF_HOME on
        the box; the steps on its line, the verdict in `checks` and the journal."""
        from tui.actions.preflight import check_box, journal_check, report_lines
        from tui.model.preflight import verdict_of

        config = self.fleet.box(box)

        def stage(words: str) -> None:
            self.progress(box, f"checking: {words}")

        async def work() -> Report:
            async with self.session(box) as session:
                report = await check_box(session, config, on_stage=stage)
            journal_check(self.journal, report)
            self.checks[box] = verdict_of(report)
            return Report(report.exit_code, report_lines(report))

        return work

    def doctor(self, box: str) -> Callable[[str], Awaitable[DoctorReport]]:
        """`G`: LibreYOLO's doctor on a data set on the box (the path is asked for)."""
        from tui.actions.preflight import doctor_box

        config = self.fleet.box(box)

        async def doctor(data: str) -> DoctorReport:
            self.doctor_paths[box] = data  # offered again when the screen opens next
            async with self.session(box) as session:
                return await doctor_box(session, config, data)

        return doctor

    def profile(self, box: str) -> Callable[[ProfileRequest, Callable[[str], None]],
                                            Awaitable[ProfileReport]]:
        """`profile`: LibreYOLO's profiler on the box over the panel's session, refused
        where a run of the box's last snapshot trains on the GPU it would use, or on GPUs
        that cannot be told (unless forced); journaled."""
        from tui.actions.profile import journal_profile, profile_on

        config = self.fleet.box(box)

        async def profile(request: ProfileRequest, say: Callable[[str], None]
                          ) -> ProfileReport:
            state = self.states.get(box)
            async with self.session(box) as session:
                report = await profile_on(
                    session, config, request, state.runs if state else (), say=say,
                    usd_per_hr=self.ledger.running_rate(box) if self.ledger else None)
            journal_profile(self.journal, report)
            return report

        return profile

    def fetch(self, box: str
              ) -> Callable[[str, str, StageProgress, bool], Awaitable[FetchReport]]:
        """ctrl+p: a staged data set onto the box (repo and destination are asked for),
        over the panel's session; journaled as the command journals it. `confirmed`: the
        user said yes to the first token that goes to the box (TokenConsent asks)."""
        from tui.actions.stage import fetch

        config = self.fleet.box(box)

        async def run(repo: str, dest: str, progress: StageProgress,
                      confirmed: bool = False) -> FetchReport:
            async with self.session(box) as session:
                return await fetch(self.fleet, config, repo, dest=dest or None,
                                   journal=self.journal, progress=progress, session=session,
                                   confirmed=confirmed)

        return run

    @contextlib.asynccontextmanager
    async def session(self, box: str) -> AsyncIterator[BoxSession]:
        """The box's watcher session (already logged in); a session of its own otherwise."""
        from tui.remote.session import BoxSession

        watched = self._watched(box)
        if watched is not None:
            yield watched
            return
        session = BoxSession(self.fleet.box(box), self.fleet, host_key_store(self.fleet))
        try:
            yield session
        finally:
            await session.close()
