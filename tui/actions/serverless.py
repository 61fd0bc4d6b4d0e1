"""Actions on a serverless app: stop it through its provider's CLI and read the stop back
(the app reads stopped only once the CLI lists it stopped), journaled as a box's stop is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tui.actions.flows import Report
from tui.model.config import ServerlessConfig
from tui.model.instance import PowerResult
from tui.model.serverless import ServerlessError
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_view import app_words, stop_command
from tui.providers.serverless import adapter, cli_options
from tui.store.journal import Journal

STOP_READBACK_SECONDS = 90.0  # how long a stop is read back before it is "unknown"
STOP_POLL_SECONDS = 2.0

async def stop_app(entry: ServerlessConfig, journal: Journal,
                   poll: Callable[[], Awaitable[ServerlessState]], clock: Callable[[], float],
                   *, readback: float = STOP_READBACK_SECONDS,
                   every: float = STOP_POLL_SECONDS) -> Report:
    """The provider's stop (`modal app stop`, `beam deployment stop`), then the app polled
    until its CLI says stopped:
    done; not within `readback`: unknown (it may still be billing); the CLI refused: failed."""
    report = Report()
    details = {"app": entry.app, "provider": entry.provider}
    before = await poll()
    if before.app is not None and before.app.state == "stopped" and before.error is None:
        # as a box: nothing to stop is said up front, and nothing is sent
        words = f"{entry.provider} app {entry.app} is already stopped: nothing was sent"
        journal.record(box=entry.name, action="stop", outcome="refused", message=words,
                       at=clock(), details=details)
        report.outcome = "refused"
        return report.fail(f"stop {entry.name}: refused: {words}")
    api = adapter(entry.provider)
    try:
        said = await api.stop_app(entry.app, **cli_options(entry, None))
    except ServerlessError as exc:
        journal.record(box=entry.name, action="stop", outcome="failed", message=str(exc),
                       at=clock(), details=details)
        report.outcome = "failed"
        return report.fail(f"stop {entry.provider} app {entry.app}: {exc}")
    if isinstance(said, str) and "already stopped" in said:
        report.say(f"{entry.app} was already stopped ({said}); reading it back")
    else:
        report.say(f"{stop_command(entry)}: accepted; reading it back")
    deadline = clock() + readback
    outcome: PowerResult
    while True:
        state = await poll()
        app = state.app
        if app is not None and app.state == "stopped" and state.error is None:
            outcome = "done"
            report.say(f"{entry.app} reads {app_words(app)}")
            break
        if clock() >= deadline:
            outcome = "unknown"
            seen = state.error or (app.detail if app else "not read")
            report.fail(f"{entry.app} not read stopped within {readback:g} s (last: {seen}): "
                        "it may still be billing")
            break
        await asyncio.sleep(every)
    journal.record(box=entry.name, action="stop", outcome=outcome, message=report.lines[-1],
                   at=clock(), details=details)
    report.outcome = outcome
    return report
