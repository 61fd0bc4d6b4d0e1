"""Whole actions as a user asks for them: push a run, stop/start a box, destroy it safely.

Shared by the panel's keys and the headless commands, so both journal the
same way and refuse the same things. Each flow returns words for a person and
never raises for a box's own troubles.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tui.actions.power import PowerOutcome, destroy_box, start_box, stop_box
from tui.actions.push import Progress, PushResult, push_run
from tui.model.box import BoxState, Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.model.guard import Unpushed, last_verified_pushes, unpushed_weights
from tui.providers.meter import record_outcome
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal
from tui.store.ledger import Ledger

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNPUSHED = 3


@dataclass
class Report:
    """What an action did, line by line, and the exit code a script should see."""

    code: int = EXIT_OK
    lines: list[str] = field(default_factory=list)
    unpushed: list[Unpushed] = field(default_factory=list)

    def fail(self, line: str, code: int = EXIT_FAILED) -> Report:
        self.lines.append(line)
        self.code = max(self.code, code)
        return self


async def look(box: BoxConfig, fleet: FleetConfig) -> tuple[BoxWatcher, BoxState]:
    """One probe of the box: its runs and their weights, as the guard needs them."""
    watcher = BoxWatcher(box, fleet)
    return watcher, await watcher.refresh()


def journal_push(journal: Journal, result: PushResult) -> None:
    journal.record(box=result.box, action="push", outcome=result.outcome, run=result.run,
                   run_path=result.run_path,
                   files=[dataclasses.asdict(f) for f in result.files],
                   destination=result.destination, verified=result.verified,
                   message=result.message)


async def push_runs(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                    run_names: list[str] | None = None, include_epochs: bool = False,
                    progress: Progress | None = None, session: BoxSession | None = None,
                    state: BoxState | None = None) -> Report:
    """Push the named runs (or every run) of a box to its destinations, verified."""
    report = Report()
    if box.push is None or not (box.push.hf_repo or box.push.local_dir):
        return report.fail(f"box {box.name} has no push destination: set hf_repo or local_dir "
                           "under [box.push]")
    watcher = None
    if session is None or state is None:
        watcher, state = await look(box, fleet)
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
                journal_push(journal, result)
                mark = "verified" if result.verified else "NOT verified"
                line = f"{box.name}/{run.name} -> {result.destination}: {result.outcome}, {mark}"
                if result.outcome == "done" and result.verified:
                    report.lines.append(f"{line} ({len(result.files)} files)")
                else:
                    report.fail(f"{line}: {result.message}")
        if not runs:
            report.lines.append(f"box {box.name} has no runs to push")
        return report
    finally:
        if watcher is not None:
            await watcher.close()


def _journal_power(journal: Journal, outcome: PowerOutcome) -> None:
    journal.record(box=outcome.box, action=outcome.action, outcome=outcome.outcome,
                   message=outcome.message,
                   error=None if outcome.outcome == "done" else outcome.message)


def _bill(ledger: Ledger | None, box: BoxConfig, outcome: PowerOutcome, sent_at: float,
          ended_at: float) -> None:
    """The outcome reaches the cost ledger: read back, a new segment; not, "may still bill"."""
    record_outcome(ledger if ledger is not None else Ledger(), box, outcome, sent_at, ended_at)


def _power_report(outcome: PowerOutcome) -> Report:
    report = Report(lines=[f"{outcome.action} {outcome.box}: {outcome.outcome}: "
                           f"{outcome.message}"])
    if outcome.outcome != "done":
        report.code = EXIT_FAILED
    return report


async def power(fleet: FleetConfig, box: BoxConfig, action: str, journal: Journal, *,
                session: BoxSession | None = None, ledger: Ledger | None = None,
                clock: Callable[[], float] = time.time) -> Report:
    """Stop or start a box through its provider (or its configured command)."""
    act: Callable[..., Awaitable[PowerOutcome]] = {"stop": stop_box, "start": start_box}[action]
    own = None
    if session is None and box.provider == "manual":
        own = BoxSession(box, fleet, host_key_store(fleet))
        session = own
    sent_at = clock()
    try:
        outcome = await act(box, fleet, ssh=session)
    finally:
        if own is not None:
            await own.close()
    _journal_power(journal, outcome)
    _bill(ledger, box, outcome, sent_at, clock())
    return _power_report(outcome)


async def destroy(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                  force_unpushed: bool = False, push_first: bool = False,
                  ledger: Ledger | None = None, clock: Callable[[], float] = time.time) -> Report:
    """Destroy a box, never losing weights: refused while checkpoints are unpushed,
    unless `push_first` pushes and verifies them, or `force_unpushed` overrides."""
    watcher, state = await look(box, fleet)
    try:
        if state.connection is not Connection.OK and not force_unpushed:
            report = Report().fail(
                f"destroy {box.name} refused: cannot see the box to check its weights "
                f"({state.error}); pass --force-unpushed if you accept losing them",
                EXIT_UNPUSHED)
            journal.record(box=box.name, action="destroy", outcome="refused",
                           message=report.lines[-1])
            return report
        unpushed = unpushed_weights(state.runs, last_verified_pushes(journal.entries, box.name))
        report = Report()
        if unpushed and push_first:
            pushed = await push_runs(fleet, box, journal, run_names=[u.run for u in unpushed],
                                     session=watcher.session, state=state)
            report.lines.extend(pushed.lines)
            state = await watcher.refresh()
            unpushed = unpushed_weights(state.runs,
                                        last_verified_pushes(journal.entries, box.name))
        if unpushed and not force_unpushed:
            report.unpushed = unpushed
            files = "; ".join(f"{u.run}: {', '.join(u.files)} ({u.reason})" for u in unpushed)
            report.fail(f"destroy {box.name} refused: weights newer than their last verified "
                        f"push: {files}. Push them first (P in the panel, `gpurent-tui push "
                        f"{box.name}`), or override with --force-unpushed", EXIT_UNPUSHED)
            journal.record(box=box.name, action="destroy", outcome="refused",
                           message=report.lines[-1])
            return report
        if unpushed:
            report.lines.append(f"overriding the guard: {sum(len(u.files) for u in unpushed)} "
                                "unpushed checkpoint file(s) will be lost")
        sent_at = clock()
        outcome = await destroy_box(box, fleet, ssh=watcher.session)
        _journal_power(journal, outcome)
        _bill(ledger, box, outcome, sent_at, clock())
        done = _power_report(outcome)
        report.lines.extend(done.lines)
        report.code = max(report.code, done.code)
        return report
    finally:
        await watcher.close()
