"""`push` and `stop` of a [[serverless]] entry from the command line: the panel's p and s
on an app, through the same flows (tui/actions/serverless*.py)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tui.cli.output import print_report
from tui.model.config import ServerlessConfig

if TYPE_CHECKING:
    from tui.actions.flows import Report
    from tui.model.serverless_runs import ServerlessState


def serverless_push(entry: ServerlessConfig, run_name: str | None) -> int:
    """`push NAME [RUN]` of a [[serverless]] entry: the panel's p, from the command line:
    the volume read once, then each named run's weights copied to `local_dir`."""
    from tui.actions.flows import Report
    from tui.actions.serverless_push import push_run
    from tui.model.text import clean
    from tui.runtime.serverless import poll_entry
    from tui.store.journal import Journal

    async def push() -> Report:
        state = await poll_entry(entry, None, time.time)
        if state.error is not None:
            return Report().fail(f"{entry.name}: {state.error}")
        runs = [r for r in state.runs if run_name is None or run_name in (r.name, r.path)]
        if not runs:
            read = ", ".join(clean(r.name) for r in state.runs) or "none"
            return Report().fail(f"{entry.name}: no run {run_name or ''} read on volume "
                                 f"{entry.volume}:{entry.runs_path} (runs read: {read})")
        journal, report = Journal(), Report()
        for run in runs:
            done = await push_run(entry, run, journal, time.time,
                                  volume_path=state.volume_path(run.path))
            report.lines += done.lines
            report.code = max(report.code, done.code)
        return report

    return print_report(asyncio.run(push()))


def serverless_stop(entry: ServerlessConfig) -> int:
    """`stop NAME` of a [[serverless]] entry: its app stopped and read back, journaled."""
    from tui.actions.serverless import stop_app
    from tui.runtime.serverless import poll_entry
    from tui.store.journal import Journal

    async def stop() -> Report:
        last: list[ServerlessState | None] = [None]

        async def poll() -> ServerlessState:
            state = last[0] = await poll_entry(entry, last[0], time.time)
            return state

        return await stop_app(entry, Journal(), poll, time.time)

    return print_report(asyncio.run(stop()))
