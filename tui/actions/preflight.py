"""`check` and `doctor`: one round trip each with the box's training interpreter.

The on-box program (tui/onbox/preflight.py) runs under the box's `python` (not
the probe's python3), answers in frames, and announces each step before it
takes it; the pure verdicts live in tui/model/preflight.py. Both actions
return a report whatever happens on the box (no GPU, no torch, a crash in
the driver, a hang, a lie), and `check` goes to the journal.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

from tui.actions.onbox_run import ProgramRun, describe_end, interpreter_missing, run_onbox
from tui.model.config import BoxConfig, FleetConfig
from tui.model.preflight import (
    ERROR,
    CheckReport,
    DoctorReport,
    Finding,
    interpreter_command,
    judge_check,
    judge_doctor,
)
from tui.remote.hostkeys import host_key_store
from tui.remote.programs import program_source
from tui.remote.session import BoxSession
from tui.store.journal import Journal

CHECK_DEADLINE = 300.0
DOCTOR_DEADLINE = 1800.0
ALARM_MARGIN = 3  # the box stops itself this many seconds before the client gives up


ENTRY = "\nsys.exit(main(sys.stdin.read(), NONCE))\n"


@functools.cache
def program(name: str) -> str:
    """An on-box program of tui/onbox with its entry call: it reads its parameters (JSON)
    from stdin and answers in frames with the NONCE it is given."""
    return program_source(name) + ENTRY


def params_bytes(params: dict[str, Any]) -> bytes:
    return json.dumps(params, separators=(",", ":")).encode()


def _alarm(deadline: float) -> int:
    return max(5, int(deadline) - ALARM_MARGIN)


def _not_run(run: ProgramRun, box: BoxConfig, what: str, deadline: float) -> str:
    if interpreter_missing(run):
        return (f"the interpreter {box.python} was not found on box {box.name}: set `python` "
                f"for this box to the one that has torch (e.g. /opt/conda/bin/python, "
                f"~/venv/bin/python)")
    return describe_end(run, f"{what} on box {box.name}", deadline)


async def check_box(session: BoxSession, box: BoxConfig, *,
                    deadline: float = CHECK_DEADLINE,
                    on_stage: Callable[[str], None] | None = None,
                    clock: Callable[[], float] = time.time) -> CheckReport:
    """Run the check on the box over `session`; a report always comes back."""
    if box.stand_in is not None:  # a demo box: nothing there to check
        return CheckReport(box=box.name, python=box.python, checked_at=clock(), findings=(),
                           stand_in=box.stand_in)
    params = {"mode": "check", "deadline": _alarm(deadline),
              "persistent": box.persistent, "runs_roots": list(box.runs_roots),
              "matmul_n": 2000, "smi_timeout": 15, "tool_timeout": 120}

    def seen(frame: dict[str, Any]) -> None:
        if on_stage is not None and isinstance(frame.get("stage"), str):
            on_stage(frame["stage"][:200])

    run = await run_onbox(session, interpreter_command(box.python), program("preflight"),
                          params_bytes(params), deadline=deadline, what="check", on_frame=seen)
    failure = None
    if not run.done:
        failure = Finding(ERROR, "check.incomplete", _not_run(run, box, "the check", deadline),
                          "" if interpreter_missing(run) else
                          "run it again; if it stops at the same step, that step is the "
                          "problem")
    return judge_check(run.parts(), box=box.name, python=box.python, checked_at=clock(),
                       persistent=box.persistent, runs_roots=box.runs_roots, failure=failure,
                       has_gpu=box.gpu)


async def doctor_box(session: BoxSession, box: BoxConfig, data: str, *, fast: bool = False,
                     strict: bool = False, deadline: float = DOCTOR_DEADLINE,
                     on_stage: Callable[[str], None] | None = None) -> DoctorReport:
    """LibreYOLO's own `doctor --json` on the box, with the box's interpreter."""
    if box.stand_in is not None:
        return DoctorReport(box=box.name, data=data, stand_in=box.stand_in)
    params = {"mode": "doctor", "deadline": _alarm(deadline), "data": data,
              "fast": fast, "strict": strict, "tool_timeout": max(5, _alarm(deadline) - 2)}

    def seen(frame: dict[str, Any]) -> None:
        if on_stage is not None and isinstance(frame.get("stage"), str):
            on_stage(frame["stage"][:200])

    run = await run_onbox(session, interpreter_command(box.python), program("preflight"),
                          params_bytes(params), deadline=deadline, what="doctor",
                          on_frame=seen)
    parts = run.parts()
    if not run.done and "doctor" not in parts:
        return judge_doctor(None, box=box.name, data=data, python=box.python,
                            failure=_not_run(run, box, "libreyolo doctor", deadline),
                            strict=strict)
    return judge_doctor(parts.get("doctor"), box=box.name, data=data, python=box.python,
                        strict=strict)


def report_lines(report: CheckReport) -> list[str]:
    """A check's outcome in a few lines for a box's line in the panel: problems first,
    each with its fix, then warnings; or what passed."""
    lines = [f"✗ {f.message}" + (f" (fix: {f.fix})" if f.fix else "") for f in report.errors]
    lines += [f"! {f.message}" + (f" (fix: {f.fix})" if f.fix else "") for f in report.warnings]
    return lines or [report.summary]


def journal_check(journal: Journal, report: CheckReport) -> None:
    """One journal line per check: the verdict and its first problem, never a secret.
    A demo box's stand-in checked nothing: no line."""
    if report.stand_in is not None:
        return
    outcome = report.verdict if report.complete else "failed"  # ok|warnings|problems|failed
    journal.record(box=report.box, action="check", outcome=outcome, message=report.summary,
                   error=report.errors[0].message if report.errors else None,
                   at=report.checked_at)


def _session(fleet: FleetConfig, box: BoxConfig) -> BoxSession:
    return BoxSession(box, fleet, host_key_store(fleet))


async def check(fleet: FleetConfig, box: BoxConfig, journal: Journal | None = None, *,
                deadline: float = CHECK_DEADLINE,
                on_stage: Callable[[str], None] | None = None) -> CheckReport:
    """The headless command: its own session, the check, the journal line."""
    session = _session(fleet, box)
    try:
        report = await check_box(session, box, deadline=deadline, on_stage=on_stage)
    finally:
        await session.close()
    if journal is not None:
        journal_check(journal, report)
    return report


async def doctor(fleet: FleetConfig, box: BoxConfig, data: str, *, fast: bool = False,
                 strict: bool = False, deadline: float = DOCTOR_DEADLINE,
                 on_stage: Callable[[str], None] | None = None) -> DoctorReport:
    session = _session(fleet, box)
    try:
        return await doctor_box(session, box, data, fast=fast, strict=strict,
                                deadline=deadline, on_stage=on_stage)
    finally:
        await session.close()
