"""Launch a training run detached on a box, and wait until LibreYOLO says it started.

The on-box launcher (tui/onbox/launch.py, sent on stdin to `python3 -`)
starts `libreyolo train ...` or the user's script with the box's `python` in
a new session, stdin from /dev/null and its output appended to
`<run>.launch/output.log` beside the run; the pid goes to
`<run>.launch/launch.json`. It then watches until the run's status.json
appears (answering `appeared`), or the process dies first (`died`, with the
tail of its output). Should the SSH connection drop meanwhile, the training
goes on; we reconnect and ask the box again for the same launch id.

Before that, unless told otherwise: a box whose last `check` failed is
refused, and LibreYOLO's `doctor` looks at the data set. Every launch that
reached a decision goes to the journal, with its arguments (token-like
values blanked), never a token.

`start_detached` is the plain "start this argv detached" for other on-box
programs (the watchdog).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import json
import os
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.actions.flows import Report
from tui.actions.onbox_run import KeptFrames
from tui.actions.preflight import doctor_box
from tui.model.box import Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.model.launch import (
    LaunchError,
    LaunchOutcome,
    LaunchPlan,
    LaunchRequest,
    LaunchResult,
    check_refusal,
    form_args,
    outside_roots,
    plan_launch,
    redact,
)
from tui.model.text import clean_block
from tui.remote.framing import new_nonce
from tui.remote.hostkeys import host_key_store
from tui.remote.programs import program_source
from tui.remote.session import BoxError, BoxSession
from tui.store.journal import Journal
from tui.store.secrets import scrub

LAUNCHER_COMMAND = "python3 -"
DEFAULT_WAIT = 600.0
MAX_FRAME = 1 << 20
TAIL_LINES = 40
TAIL_CHARS = 8000  # of a process's output kept for the report (the box sends ~6000)
LINE_CHARS = 400
MESSAGE_CHARS = 2000
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VAST_API_KEY", "RUNPOD_API_KEY",
              "LAMBDA_API_KEY", "WANDB_API_KEY")
Event = Callable[[str], object]  # told of each step; what it returns is ignored


def box_python(box: BoxConfig) -> str:
    """The interpreter the box trains with (the `python` key, python3 where not set)."""
    return box.python or "python3"


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…"


def tail_lines(text: str, count: int = TAIL_LINES) -> list[str]:
    """The last `count` lines of box output, cleaned, each cut at LINE_CHARS."""
    lines = [_cut(line.rstrip()) for line in clean_block(text).splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines[-count:]


# -- one run of the on-box launcher ----------------------------------------------------

@dataclass
class LauncherRun:
    """What one run of the on-box launcher said, and how it ended."""

    ended: str  # "exited" | "lost" (after it may have started) | "not_started" | "bad_answer"
    kept: KeptFrames = field(default_factory=KeptFrames)
    exit_status: int | None = None
    stderr: str = ""
    reason: str = ""

    @property
    def frames(self) -> list[dict[str, Any]]:
        """The frames kept (the latest of each kind), oldest first."""
        return list(self.kept)

    def first(self, key: str) -> Any:
        """The value of `key` in the oldest kept frame that has it."""
        return next((f[key] for f in self.kept if key in f), None)


async def run_launcher(session: BoxSession, params: dict[str, Any], *, deadline: float,
                       on_frame: Callable[[dict[str, Any]], None] | None = None
                       ) -> LauncherRun:
    """Run the on-box launcher once; never raises for the box's or the network's trouble.

    "not_started": no connection, so nothing ran. "lost": the connection or
    the answer broke off, and the launcher may have done its work.
    """
    frames = KeptFrames()  # every frame goes to on_frame; a bounded few are kept

    def seen(raw: bytes) -> None:
        try:
            frame = json.loads(raw)
        except (ValueError, RecursionError):
            return
        if isinstance(frame, dict):
            frames.add(frame, len(raw))
            if on_frame is not None:
                on_frame(frame)

    try:
        await session.connection()
    except BoxError as exc:
        return LauncherRun("not_started", reason=exc.message)
    try:
        result = await session.run_program(
            program_source("launch"), json.dumps(params).encode(), timeout=deadline,
            max_frames=None, max_frame=MAX_FRAME, on_frame=seen, what="launcher",
            command=LAUNCHER_COMMAND)
    except BoxError as exc:
        # Lost or timed out: the launcher may have done its work, so ask again. Anything
        # else (an answer over the cap, a flood, no python3) is not asked again.
        lost = exc.connection in (Connection.UNREACHABLE, Connection.TIMEOUT)
        return LauncherRun("lost" if lost else "bad_answer", frames, reason=exc.message)
    if result.exit_status is None and not result.exit_signal:
        return LauncherRun("lost", frames, stderr=result.stderr,
                           reason=f"box {session.box.name}: the connection was lost")
    return LauncherRun("exited", frames, result.exit_status, result.stderr,
                       reason="" if result.exit_status is not None
                       else f"the launcher was killed by signal {result.exit_signal}")


def _no_answer(run: LauncherRun, box: str) -> str:
    if run.ended == "exited":
        tail = " ".join(tail_lines(run.stderr, 5))[-400:]
        return f"the launcher on box {box} exited {run.exit_status} without an answer: " \
               f"{tail or 'no error output'}"
    return run.reason if run.reason.startswith("box ") else f"box {box}: {run.reason}"


# -- start anything detached (the watchdog's way in) ----------------------------------

@dataclass(frozen=True)
class Detached:
    pid: int
    log: str


async def start_detached(session: BoxSession, argv: Sequence[str], log: str, *,
                         cwd: str | None = None, env: dict[str, str] | None = None,
                         files: Sequence[dict[str, Any]] = (), deadline: float = 60.0
                         ) -> Detached:
    """Start `argv` on the box so it outlives the SSH connection (new session, stdin
    /dev/null, output appended to `log`); `files` ({path, text, mode}) are written first.

    `argv[0]` and paths may start with `~/`. BoxError when it could not be started.
    """
    run = await run_launcher(session, {"mode": "detach", "argv": list(argv), "log": log,
                                       "cwd": cwd, "env": env or {}, "files": list(files)},
                             deadline=deadline)
    started = run.first("started")
    if isinstance(started, dict) and isinstance(started.get("pid"), int):
        return Detached(started["pid"], str(started.get("log", log)))
    error = run.first("error")
    raise BoxError(Connection.PROBE_FAILED, clean_block(str(error)) if error
                   else _no_answer(run, session.box.name))


# -- launch ----------------------------------------------------------------------------

def _who() -> str:
    with contextlib.suppress(Exception):
        return f"{getpass.getuser()}@{socket.gethostname()}"
    return "unknown"


def secret_env(box: BoxConfig) -> tuple[str, ...]:
    """The variables whose values never reach the journal: the usual tokens and keys,
    and the one this box's pushes use (`token_env`)."""
    own = box.push.token_env if box.push is not None and box.push.token_env else None
    return (*SECRET_ENV, own) if own else SECRET_ENV


def journal_launch(journal: Journal, plan: LaunchPlan, outcome: LaunchOutcome,
                   script_path: str | None, script_text: str | None,
                   secret_vars: Sequence[str] = SECRET_ENV,
                   forced_past: str | None = None) -> None:
    """One line: who launched what, where, with which arguments (secrets blanked).

    `message` is the command as typed (`libreyolo train ...`, shell-quoted) so
    the panel's form can start from it; `files` holds the uploaded script. A launch
    given --force says so (`force`), with the refusal it went past (`forced_past`), so
    a run started on a box whose check failed is never a mystery later.
    """
    secrets = [os.environ.get(var, "") for var in secret_vars]
    command = shlex.join(redact(plan.command(), secrets))
    files = []
    if script_path is not None and script_text is not None:
        data = script_text.encode()
        files = [{"name": plan.script_name, "path": script_path, "size": len(data),
                  "sha256": hashlib.sha256(data).hexdigest()}]
    error = None if outcome.outcome == "started" else outcome.message
    details = None if forced_past is None else {"force": True, "forced_past": forced_past}
    journal.record(box=plan.box, action="launch", outcome=outcome.outcome, run=plan.name,
                   run_path=outcome.run_dir or plan.run_dir, files=files,
                   destination=_who(), message=command, error=error, details=details)


def _outcome(plan: LaunchPlan, outcome: LaunchResult, message: str, *, run_dir: str = "",
             pid: int | None = None, tail: str = "") -> LaunchOutcome:
    """Everything from the box is cleaned, redacted and bounded here, whatever the box
    sent (a failure may echo the command line back, keys and all)."""
    message = clean_block(scrub(message))
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS - 1] + "…"
    return LaunchOutcome(box=plan.box, name=plan.name,
                         run_dir=clean_block(run_dir or plan.run_dir), outcome=outcome,
                         message=message, pid=pid,
                         tail=clean_block(scrub(tail)[-TAIL_CHARS:]))


async def _doctor(session: BoxSession, box: BoxConfig, data: str, say: Event) -> str | None:
    """LibreYOLO's doctor on the data set; why the launch must not go on, or None."""
    say(f"doctor: libreyolo doctor {data} on box {box.name} ...")
    report = await doctor_box(session, box, data)
    if report.failure:
        return f"libreyolo doctor could not check {data}: {report.failure} " \
               "(skip the doctor, --no-doctor, to launch without it)"
    if report.exit_code:
        found = "; ".join(f"{f.check_id}: {f.message}" for f in report.errors[:5]) \
            or "errors found"
        return f"libreyolo doctor found errors in {data}: {found} " \
               "(fix the data set, or skip the doctor: --no-doctor)"
    say(f"doctor: {data} ok ({len(report.warnings)} warning(s))")
    return None


async def launch_run(session: BoxSession, box: BoxConfig, plan: LaunchPlan,
                     journal: Journal, *, script_path: str | None = None,
                     script_text: str | None = None, force: bool = False,
                     doctor: bool = True, wait: float = DEFAULT_WAIT,
                     on_event: Event | None = None) -> LaunchOutcome:
    """The whole launch over `session`; an outcome always comes back (and is journaled
    once the launch reached the box or was refused)."""
    def say(text: str) -> None:
        if on_event is not None:
            on_event(clean_block(scrub(text)))

    forced_past = None
    if force:  # journaled: what the launch went past (or that nothing needed it)
        forced_past = check_refusal(journal.entries, box.name) or "nothing (no failed check)"

    def journal_it(outcome: LaunchOutcome) -> None:
        journal_launch(journal, plan, outcome, script_path, script_text, secret_env(box),
                       forced_past)

    if not force and (refusal := check_refusal(journal.entries, box.name)):
        outcome = _outcome(plan, "refused", refusal)
        journal_it(outcome)
        return outcome
    if outside_roots(plan.project, box.runs_roots):
        say(f"note: {plan.project} is outside box {box.name}'s runs_roots "
            f"({', '.join(box.runs_roots)}): the panel will not show this run")
    if doctor and not plan.data:  # a script's data set is known only when --data names it
        say("doctor: skipped (no --data)")
    if doctor and plan.data and (refusal := await _doctor(session, box, plan.data, say)):
        outcome = _outcome(plan, "refused", refusal)
        journal_it(outcome)
        return outcome
    started: dict[str, Any] = {}
    try:
        outcome = await _launch(session, box, plan, script_text=script_text, wait=wait,
                                say=say, seen=started)
    except asyncio.CancelledError:  # Ctrl+C, or the panel quit: the run may be starting
        journal_it(_outcome(plan, "unknown", "interrupted while waiting for status.json; "
                                             "the process may be running on the box",
                            pid=started.get("pid")))
        raise
    journal_it(outcome)
    return outcome


async def _launch(session: BoxSession, box: BoxConfig, plan: LaunchPlan, *,
                  script_text: str | None, wait: float, say: Event,
                  seen: dict[str, Any]) -> LaunchOutcome:
    launch_id = new_nonce()
    params: dict[str, Any] = {
        "mode": "launch", "id": launch_id, "python": box_python(box), "kind": plan.kind,
        "args": list(plan.args), "project": plan.project, "name": plan.name,
        "resume": plan.resume, "has_resume": plan.has_resume, "has_model": plan.has_model,
        "wait": wait}
    if plan.kind == "script":
        params["script"] = {"name": plan.script_name, "text": script_text or ""}

    def on_frame(frame: dict[str, Any]) -> None:
        started = frame.get("started")
        if isinstance(started, dict) and "pid" not in seen:
            seen["pid"] = started.get("pid") if isinstance(started.get("pid"), int) else None
            seen["run_dir"] = str(started.get("run_dir", plan.run_dir))
            say(f"started pid {seen['pid']} on box {box.name}; output in "
                f"{started.get('log')}; waiting for status.json ...")

    give_up = time.monotonic() + wait + 60
    run = await run_launcher(session, params, deadline=wait + 30, on_frame=on_frame)
    lost_reason = ""
    while run.ended in ("lost", "not_started") and not _decided(run):
        if run.ended == "not_started" and "pid" not in seen and not lost_reason:
            return _outcome(plan, "failed", f"nothing was started: box {box.name}: "
                                            f"{run.reason}")
        lost_reason = lost_reason or run.reason
        left = give_up - time.monotonic()
        if left <= 0:
            pid = seen.get("pid")
            return _outcome(plan, "unknown",
                            f"lost the connection to box {box.name} ({lost_reason}) and "
                            f"could not ask again; the run may be starting (pid {pid}): "
                            f"see `gpurent-tui status`", pid=pid)
        say(f"connection to box {box.name} lost ({run.reason}); training goes on; "
            "asking again ...")
        # No close here: the session may be the panel's own; a dead connection is
        # opened again by the next call, and a hung one is dropped by its keepalives.
        await asyncio.sleep(min(2.0, max(left, 0)))
        run = await run_launcher(session, {"mode": "wait", "id": launch_id,
                                           "project": plan.project, "name": plan.name,
                                           "wait": max(5.0, left - 30)},
                                 deadline=max(10.0, left), on_frame=on_frame)
    return _judge(run, plan, box, seen, wait)


def _decided(run: LauncherRun) -> bool:
    return any(k in f for f in run.frames for k in ("appeared", "died", "waiting", "refused",
                                                      "not_started", "error"))


def _judge(run: LauncherRun, plan: LaunchPlan, box: BoxConfig, seen: dict[str, Any],
           wait: float) -> LaunchOutcome:
    pid = seen.get("pid")
    run_dir = seen.get("run_dir") or plan.run_dir
    if isinstance(refused := run.first("refused"), str):
        return _outcome(plan, "refused", refused)
    if isinstance(missing := run.first("not_started"), str):
        return _outcome(plan, "failed", f"the launch did not start on box {box.name}: "
                                        f"{missing}")
    appeared = run.first("appeared")
    if isinstance(appeared, dict):
        status = appeared.get("status")
        status = status if isinstance(status, dict) else {}
        if status.get("state") == "failed":
            error = status.get("error")
            error = error if isinstance(error, dict) else {}
            why = f"{error.get('type', 'error')}: {error.get('message', '')}".strip(": ")
            return _outcome(plan, "failed", f"the run failed as it started: {why}",
                            run_dir=run_dir, pid=pid, tail=str(appeared.get("tail") or ""))
        return _outcome(plan, "started", f"run {plan.name} started on box {box.name} "
                                         f"(pid {pid})", run_dir=run_dir, pid=pid)
    died = run.first("died")
    if isinstance(died, dict):
        code = died.get("exit")
        how = f"exited {code}" if isinstance(code, int) and code >= 0 else \
            f"was killed by signal {-code}" if isinstance(code, int) else "ended"
        return _outcome(plan, "failed", f"the process {how} before the run wrote status.json",
                        run_dir=run_dir, pid=pid, tail=str(died.get("tail") or ""))
    waiting = run.first("waiting")
    if isinstance(waiting, dict):
        return _outcome(plan, "failed", f"no status.json in {run_dir} after {wait:g} s; "
                                        f"pid {pid} is still running (not stopped)",
                        run_dir=run_dir, pid=pid, tail=str(waiting.get("tail") or ""))
    error = run.first("error")
    if error is not None:
        return _outcome(plan, "failed", f"the launcher on box {box.name} failed: {error}",
                        pid=pid)
    return _outcome(plan, "failed" if pid is None else "unknown", _no_answer(run, box.name),
                    pid=pid)


async def launch(fleet: FleetConfig, box: BoxConfig, plan: LaunchPlan, journal: Journal, *,
                 script_path: str | None = None, force: bool = False, doctor: bool = True,
                 wait: float = DEFAULT_WAIT, on_event: Event | None = None) -> LaunchOutcome:
    """The headless command: read the script, own session, the launch, closed after."""
    script_text = None
    if plan.kind == "script":
        assert script_path is not None
        script_text = Path(script_path).read_text(encoding="utf-8")
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        return await launch_run(session, box, plan, journal, script_path=script_path,
                                script_text=script_text, force=force, doctor=doctor,
                                wait=wait, on_event=on_event)
    finally:
        await session.close()


def outcome_report(outcome: LaunchOutcome, tail: int = TAIL_LINES) -> Report:
    """The outcome as the panel's action words (the run's path first when it started)."""
    report = Report()
    if outcome.outcome == "started":
        return report.say(f"{outcome.run_dir}: {outcome.message}")
    report.fail(f"{outcome.outcome}: {outcome.message}")
    for line in tail_lines(outcome.tail, tail) if outcome.tail else ():
        report.say(line)
    return report


async def launch_from_form(fleet: FleetConfig, box: BoxConfig, request: LaunchRequest,
                           journal: Journal, *, session: BoxSession | None = None,
                           now: float, on_event: Event | None = None) -> Report:
    """The panel's launch: the form's fields planned like the command line's arguments,
    over the session the panel holds (or a new one)."""
    form = request.form
    script_path = str(Path(form.script).expanduser()) if form.script.strip() else None
    try:
        extra = shlex.split(form.extra)
        plan = plan_launch(box.name, box.runs_roots, now=now, resume=request.resume,
                           name=form.name.strip() or None,
                           project=form.project.strip() or None,
                           script_name=Path(script_path).name if script_path else None,
                           train_args=extra if script_path else form_args(form),
                           data=(form.data.strip() or None) if script_path else None)
        script_text = Path(script_path).read_text(encoding="utf-8") if script_path else None
    except (LaunchError, ValueError) as exc:
        return Report().fail(f"launch on {box.name}: {exc}")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return Report().fail(f"launch on {box.name}: cannot read the script {script_path}: "
                             f"{why}")
    own = session is None
    session = session or BoxSession(box, fleet, host_key_store(fleet))
    try:
        outcome = await launch_run(session, box, plan, journal, script_path=script_path,
                                   script_text=script_text, force=request.force,
                                   doctor=request.doctor, on_event=on_event)
    finally:
        if own:
            await session.close()
    return outcome_report(outcome)
