"""Whole actions as a user asks for them: push a run, stop/start a box, destroy it safely.

Shared by the panel's keys and the headless commands, so both journal the
same way and refuse the same things. Each flow returns words for a person
(cleaned of any control sequence a box put in them) and never raises: a box's
trouble, and even a bug of ours, ends as a failed report, so the panel's
per-box action lock is always given back.

Destroy decides on a fresh look at the box taken when it runs, never on a
snapshot cached when the key was pressed, and fails closed: unpushed
checkpoints or an incomplete picture refuse it, unless the user overrides by
typing (the CLI's --force-unpushed, the dialog's typed name after `t`). A
plain confirmation is never an override. Epoch snapshots a verified push left
out are the one loss given up without an override (--without-snapshots, the
dialog's `w`): best.pt, last.pt and the history must still be pushed.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec

from tui.actions.hub import push_uses_box_token
from tui.actions.power import PowerOutcome, destroy_box, start_box, stop_box
from tui.actions.push import Epochs, Progress, PushResult, push_run
from tui.model.box import BoxState, Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_UNPUSHED
from tui.model.guard import (
    PICTURE,
    Unpushed,
    Verdict,
    describe,
    guarded_files,
    last_verified_pushes,
    snapshot_count,
    snapshot_words,
    verdict,
)
from tui.model.milestones import push_details
from tui.model.runs import RunState
from tui.model.text import clean_block
from tui.model.token_rule import SENT_KEY, Step, decide
from tui.providers.meter import record_outcome
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.remote.watch import STREAM_BUDGET, BoxWatcher
from tui.store.journal import Journal
from tui.store.ledger import Ledger

# What the destroy dialog answers (tui.screens.confirm.DestroyScreen).
DIALOG_DESTROY = "destroy"
DIALOG_PUSH_FIRST = "push-then-destroy"
DIALOG_WITHOUT_SNAPSHOTS = "destroy-without-snapshots"
# What a destroy's journal line says it gave up, beside the files' names and sizes.
GIVEN_UP_SNAPSHOTS = "epoch snapshots never pushed (--without-snapshots)"


@dataclass
class Report:
    """What an action did, line by line, and the exit code a script should see."""

    code: int = EXIT_OK
    lines: list[str] = field(default_factory=list)
    unpushed: list[Unpushed] = field(default_factory=list)
    # A power action's outcome ("done", "unknown", "failed", "refused"), None for others:
    # "unknown" is not a failure, the box may still be billing (the panel says so).
    outcome: str | None = None

    def say(self, line: str) -> Report:
        self.lines.append(clean_block(line))
        return self

    def fail(self, line: str, code: int = EXIT_FAILED) -> Report:
        self.say(line)
        self.code = max(self.code, code)
        return self


P = ParamSpec("P")


Flow = Callable[P, Coroutine[Any, Any, "Report"]]


def never_raises(what: str) -> Callable[[Flow[P]], Flow[P]]:
    """A flow that fails with words instead of an exception (whatever went wrong)."""

    def wrap(flow: Flow[P]) -> Flow[P]:
        @functools.wraps(flow)
        async def safe(*args: P.args, **kwargs: P.kwargs) -> Report:
            try:
                return await flow(*args, **kwargs)
            except Exception as exc:  # a bug of ours must not strand the box's action lock
                return Report().fail(f"{what} failed unexpectedly ({type(exc).__name__}: "
                                     f"{exc}); nothing more was done: check the journal (J)")
        return safe

    return wrap


async def look(box: BoxConfig, fleet: FleetConfig, *, history: bool = False
               ) -> tuple[BoxWatcher, BoxState]:
    """One fresh probe of the box: its runs and their weights, as the guard needs them.

    The guard reads weights listings and run states, never metrics history, so none is
    asked for: a long run's megabytes parsed in one step would hold the panel's event loop
    for a tenth of a second or more. With `history` (a push journals each run's epoch and
    best, which a failed run's status.json no longer carries) the history streams in the
    panel watcher's bounded answers, each folded in its own turn of the loop."""
    watcher = BoxWatcher(box, fleet)
    if not history:
        return watcher, await watcher.refresh(budget=0)
    return watcher, await watcher.refresh(catch_up=True, budget=STREAM_BUDGET, cap=STREAM_BUDGET)


def journal_push(journal: Journal, result: PushResult, run: RunState | None = None,
                 why: str | None = None, token_sent: str | None = None) -> None:
    """One destination's push; with the run's epoch and best as the push found them (what
    "unpushed: N epochs" and the milestone policy count from), why a milestone push
    was made unasked, and which token went to the box (its source's name, for the Hub
    destination of a box that uploads itself; the rule's "asked before")."""
    details = push_details(run) if run is not None else {}
    if why is not None:
        details["milestone"] = why
    details[SENT_KEY] = token_sent if result.destination.startswith("hf://") else None
    journal.record(box=result.box, action="push", outcome=result.outcome, run=result.run,
                   run_path=result.run_path,
                   files=[dataclasses.asdict(f) for f in result.files],
                   destination=result.destination, verified=result.verified,
                   message=result.message, details=details)


@never_raises("push")
async def push_runs(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                    run_names: list[str] | None = None, include_epochs: Epochs = False,
                    progress: Progress | None = None, session: BoxSession | None = None,
                    state: BoxState | None = None, why: str | None = None,
                    budget: bool = False) -> Report:
    """Push the named runs (or every run) of a box to its destinations, verified.
    `include_epochs`: every epoch_<N>.pt, or a list of N; `why`: a milestone's words;
    `budget`: made by on_budget = "push-and-stop" (unasked, as a milestone is)."""
    report = Report()
    if box.push is None or not (box.push.hf_repo or box.push.local_dir):
        return report.fail(f"box {box.name} has no push destination: set hf_repo or local_dir "
                           "under [box.push]")
    step: Step = "milestone" if why is not None else "budget" if budget else "push"
    rule = decide(box, step, uses_token=push_uses_box_token(box), entries=journal.entries)
    if rule.notice is not None:
        report.say(rule.notice)
    watcher = None
    if session is None or state is None:
        watcher, state = await look(box, fleet, history=True)
        session = watcher.session
    try:
        if state.connection is not Connection.OK:
            return report.fail(f"cannot push from box {box.name}: {state.error}")
        runs = [r for r in state.runs if run_names is None or r.name in run_names]
        missing = sorted(set(run_names or ()) - {r.name for r in runs})
        if missing:
            known = ", ".join(r.name for r in state.runs) or "none"
            return report.fail(f"no run named {', '.join(missing)} on box {box.name} "
                               f"(runs: {known})")
        for run in runs:
            for result in await push_run(session, box, run.path, run.name,
                                         include_epochs=include_epochs, progress=progress):
                journal_push(journal, result, run, why, rule.source)
                mark = "verified" if result.verified else "NOT verified"
                line = f"{box.name}/{run.name} -> {result.destination}: {result.outcome}, {mark}"
                if result.outcome == "done" and result.verified:
                    report.say(f"{line} ({len(result.files)} files, {result.how})")
                else:
                    report.fail(f"{line}: {result.message}")
        if not runs:
            report.say(f"box {box.name} has no runs to push")
        return report
    finally:
        if watcher is not None:
            await watcher.close()


def _journal_power(journal: Journal, outcome: PowerOutcome, *,
                   files: Sequence[dict[str, Any]] = (),
                   runs: Sequence[dict[str, Any]] = (),
                   details: dict[str, Any] | None = None) -> None:
    journal.record(box=outcome.box, action=outcome.action, outcome=outcome.outcome,
                   message=outcome.message, files=files, runs=runs,
                   error=None if outcome.outcome == "done" else outcome.message,
                   details=details)


def _bill(ledger: Ledger | None, box: BoxConfig, outcome: PowerOutcome, sent_at: float,
          ended_at: float) -> None:
    """The outcome reaches the cost ledger: read back, a new segment; not, "may still bill"."""
    record_outcome(ledger if ledger is not None else Ledger(), box, outcome, sent_at, ended_at)


def _power_report(outcome: PowerOutcome) -> Report:
    said = "unknown: may still be billing." if outcome.outcome == "unknown" \
        else f"{outcome.outcome}:"
    report = Report(outcome=outcome.outcome).say(f"{outcome.action} {outcome.box}: {said} "
                                                 f"{outcome.message}")
    if outcome.outcome != "done":
        report.code = EXIT_FAILED
    return report


@never_raises("the power action")
async def power(fleet: FleetConfig, box: BoxConfig, action: Literal["stop", "start"],
                journal: Journal, *,
                session: BoxSession | None = None, ledger: Ledger | None = None,
                clock: Callable[[], float] = time.time, observe_timeout: float = 180.0,
                poll_interval: float = 3.0, by: str | None = None) -> Report:
    """Stop or start a box through its provider (or its configured command); the effect is
    watched for up to `observe_timeout` seconds, looking every `poll_interval`. `by`: who
    asked, when not the user ("budget"), journalled so the box's rest says so."""
    act: Callable[..., Awaitable[PowerOutcome]] = {"stop": stop_box, "start": start_box}[action]
    own = None
    if session is None and box.provider == "manual":
        own = BoxSession(box, fleet, host_key_store(fleet))
        session = own
    sent_at = clock()
    try:
        outcome = await act(box, fleet, ssh=session, observe_timeout=observe_timeout,
                            poll_interval=poll_interval)
    finally:
        if own is not None:
            await own.close()
    _journal_power(journal, outcome, details={"by": by} if by else None)
    _bill(ledger, box, outcome, sent_at, clock())
    return _power_report(outcome)


def destroy_blockers(state: BoxState, journal: Journal) -> list[Unpushed]:
    """What the destroy dialog must show as refused, from the panel's latest look and the
    journal as it is now (pushes made by the CLI or another panel count)."""
    return verdict(state, last_verified_pushes(journal.entries, state.name)).blockers


def _lost_files(state: BoxState, blockers: Sequence[Unpushed]) -> list[dict[str, Any]]:
    """Exactly what an overridden destroy loses: each unpushed file, each unseen place."""
    lost: list[dict[str, Any]] = []
    for b in blockers:
        run = state.run(b.run_path) if b.run != PICTURE else None
        for name in b.files:
            row: dict[str, Any] = {"run": b.run, "run_path": b.run_path, "name": name,
                                   "why": b.reason}
            weight = next((w for n, w in [*guarded_files(run),
                                          *((f"weights/{w.name}", w) for w in run.weights)]
                           if n == name), None) if run is not None else None
            if weight is not None:
                row.update(size=weight.size, mtime_ns=weight.mtime_ns, inode=weight.inode)
            lost.append(row)
    return lost


def _runs_of(state: BoxState) -> list[dict[str, Any]]:
    return [{"name": r.name, "path": r.path, "health": str(r.health),
             "weights": [w.name for w in r.weights]} for r in state.runs]


@never_raises("destroy")
async def destroy(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                  force_unpushed: bool = False, push_first: bool = False,
                  without_snapshots: bool = False,
                  accepted: Sequence[Unpushed] | None = None, ledger: Ledger | None = None,
                  clock: Callable[[], float] = time.time, observe_timeout: float = 180.0,
                  poll_interval: float = 3.0) -> Report:
    """Destroy a box, never losing weights, on a fresh look at it.

    Refused while checkpoints are unpushed or the picture of the box is
    incomplete, unless `push_first` pushes and verifies them, `force_unpushed`
    overrides everything (typed on the command line), or `accepted` lists what
    the user saw and typed the box's name to lose (the panel's override: what
    the fresh look finds beyond it is still refused). `without_snapshots` gives
    up epoch snapshots never pushed, and nothing else (with `push_first`, the
    push leaves them out).
    """
    watcher, state = await look(box, fleet, history=push_first)  # a push journals the best
    try:
        report = Report()
        judged = verdict(state, last_verified_pushes(journal.entries, box.name))
        # What a push must take: all that is unpushed but the snapshots given up.
        wanted = [u for u in judged.unpushed if not (without_snapshots and u.snapshots)]
        if wanted and push_first and state.connection is Connection.OK:
            # Epoch files the guard counts go too (a plain push leaves them on the box).
            epochs = any(f.startswith("weights/epoch_") for u in wanted for f in u.files)
            pushed = await push_runs(fleet, box, journal,
                                     run_names=sorted({u.run for u in wanted}),
                                     session=watcher.session, state=state,
                                     include_epochs=epochs)
            report.lines.extend(pushed.lines)
            state = await watcher.refresh(budget=0)  # the guard's second look: no history
            judged = verdict(state, last_verified_pushes(journal.entries, box.name))
        refusal = _refusal(box.name, judged, force_unpushed, accepted, without_snapshots)
        if refusal is not None:
            report.unpushed = judged.blockers
            report.fail(refusal, EXIT_UNPUSHED)
            journal.record(box=box.name, action="destroy", outcome="refused",
                           message=report.lines[-1], runs=_runs_of(state))
            return report
        lost: list[dict[str, Any]] = []
        given_up = None
        if judged.refused:
            lost = _lost_files(state, judged.blockers)
            if without_snapshots and judged.only_snapshots:
                given_up = {"given_up": GIVEN_UP_SNAPSHOTS}
                report.say(f"giving up {snapshot_count(judged.snapshots)}, never pushed: "
                           f"{describe(judged.snapshots)}; lost with the box and journalled "
                           "(best.pt, last.pt and the history are verified)")
            else:
                report.say(f"overriding the guard: {describe(judged.blockers)}; this is lost "
                           "with the box and journalled")
        for name in judged.live:
            report.say(f"run {name} is still training on box {box.name}: destroying stops it "
                       "mid-run")
        sent_at = clock()
        outcome = await destroy_box(box, fleet, ssh=watcher.session,
                                    observe_timeout=observe_timeout, poll_interval=poll_interval)
        _journal_power(journal, outcome, files=lost, runs=_runs_of(state), details=given_up)
        _bill(ledger, box, outcome, sent_at, clock())
        done = _power_report(outcome)
        report.lines.extend(done.lines)
        report.code = max(report.code, done.code)
        report.outcome = done.outcome
        return report
    finally:
        await watcher.close()


def _refusal(box: str, judged: Verdict, force: bool, accepted: Sequence[Unpushed] | None,
             without_snapshots: bool) -> str | None:
    """Why the destroy must not go ahead, or None."""
    if not judged.refused or force:
        return None
    if accepted is not None:
        beyond = judged.beyond(accepted)
        if not beyond:
            return None
        return (f"destroy {box} refused: the box changed since the dialog showed it: "
                f"{describe(beyond)}. Look again (D) before overriding")
    if without_snapshots and judged.only_snapshots:
        return None
    override = "override with --force-unpushed (in the panel: t, then type the box's name)"
    if judged.gaps:
        head = "the panel cannot see everything on the box"
        how = f"Make it visible (mount the volume, fix the folder), or {override}"
        return f"destroy {box} refused: {head}: {describe(judged.blockers)}. {how}"
    if judged.only_snapshots:
        return (f"destroy {box} refused: {snapshot_words(judged.snapshots)}; best.pt, last.pt "
                f"and the history are verified: {describe(judged.snapshots)}. Push them too "
                f"(`gpurent-tui push {box} --epochs`, or `gpurent-tui destroy {box} --yes "
                f"--push-first` to push, verify and destroy), or destroy without them "
                f"(`gpurent-tui destroy {box} --yes --without-snapshots`; in the panel: D, "
                "then p to push them too or w to destroy without them)")
    epochs = any(f.startswith("weights/epoch_") for u in judged.unpushed for f in u.files)
    push = f"`gpurent-tui push {box}{' --epochs' if epochs else ''}`"
    head = "checkpoints or history not pushed as they are now"
    if without_snapshots:
        head = ("--without-snapshots gives up only epoch snapshots that were never pushed, "
                "and more than those is unpushed")
    how = (f"Push them first ({push}, or `gpurent-tui destroy {box} --yes --push-first` to "
           f"push, verify and destroy; in the panel: p/P, or D then p)")
    if judged.snapshots:
        how += (f"; `gpurent-tui destroy {box} --yes --push-first --without-snapshots` pushes "
                "all but the epoch snapshots and gives those up")
    return f"destroy {box} refused: {head}: {describe(judged.blockers)}. {how}; or {override}"


async def destroy_from_dialog(fleet: FleetConfig, box: BoxConfig, journal: Journal,
                              answer: str, shown: Sequence[Unpushed], *,
                              ledger: Ledger | None = None) -> Report:
    """The panel's destroy, from the dialog's answer and the refusals it showed.

    A plain confirmation (typed name with nothing refused on screen) lets the
    guard decide on its fresh look; the typed override after `t` accepts what
    was shown, and nothing else; `p` pushes, verifies, then destroys; `w` (offered
    only when nothing but never-pushed snapshots was refused) gives up the snapshots
    shown, and nothing else.
    """
    if answer == DIALOG_WITHOUT_SNAPSHOTS:
        return await destroy(fleet, box, journal, without_snapshots=True,
                             accepted=[u for u in shown if u.snapshots], ledger=ledger)
    if answer == DIALOG_PUSH_FIRST:
        return await destroy(fleet, box, journal, push_first=True, ledger=ledger)
    if answer == DIALOG_DESTROY and shown:
        return await destroy(fleet, box, journal, accepted=list(shown), ledger=ledger)
    return await destroy(fleet, box, journal, ledger=ledger)


async def push_and_stop(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                        session: BoxSession | None = None, state: BoxState | None = None,
                        ledger: Ledger | None = None, observe_timeout: float = 180.0,
                        poll_interval: float = 3.0) -> Report:
    """`on_budget = "push-and-stop"`: never lose weights, then stop paying for the GPU.

    Pushes every run first when the box has a destination; stops only when that push
    verified, since stopping may strand the weights on a GPU that is gone on restart."""
    report = Report()
    if box.push is not None and (box.push.hf_repo or box.push.local_dir):
        pushed = await push_runs(fleet, box, journal, session=session, state=state,
                                 budget=True)
        report.lines += pushed.lines
        report.code = pushed.code
    if report.code == EXIT_OK:
        stopped = await power(fleet, box, "stop", journal, session=session, ledger=ledger,
                              observe_timeout=observe_timeout, poll_interval=poll_interval,
                              by="budget")
        report.lines += stopped.lines
        report.code = stopped.code
        report.outcome = stopped.outcome
    else:
        report.lines.append(f"{box.name} not stopped: the push did not verify, and stopping "
                            "might strand the weights")
    return report
