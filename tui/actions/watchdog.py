"""Arm (or remove) the on-box watchdog: `gpurent-tui guard BOX ...`.

The watchdog (tui/onbox/guard.py) runs on the box without a panel: it is
started detached the way a launch is (tui.actions.launch.start_detached), so
it outlives the SSH connection and this process. One per box: arming again
stops the old one and replaces its files.

What goes to the box, all on the SSH channel's stdin (never argv, a remote
command line or an environment line): the program and the two it reuses
(probe.py finds the runs, push.py lists and hashes their files), its config
(limits, actions, where to push, how to stop: no secret), and a 0600
secrets file (read once by the watchdog and removed) with the Hub token
only when a step will push to `hf_repo` from the box (never for a dry run or
stop-only steps; the one rule, tui.model.token_rule, decides which token and
asks the first time). The
user's account-wide provider key goes there only with `use_account_key`
(`--use-account-key`); without it the watchdog stops the box with the
instance's own scoped credentials (Vast's CONTAINER_API_KEY, a RunPod pod's
RUNPOD_API_KEY) or a manual box's own stop_command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.actions.flows import Report
from tui.actions.hub import HubError, token_value
from tui.actions.launch import box_python, start_detached
from tui.model.box import Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.model.exit_codes import EXIT_FAILED, EXIT_USAGE
from tui.model.fields import items
from tui.model.text import clean, clean_block
from tui.model.token_rule import SENT_KEY, TokenDecision, decide
from tui.model.watchdog import (
    DEFAULT_POLL_SECONDS,
    DEFAULT_STEPS,
    RETRY_SECONDS,
    TRIGGERS,
    fold_guard,
    guard_config,
    guard_summary,
    plan_words,
)
from tui.providers import ADAPTERS
from tui.remote.framing import new_nonce
from tui.remote.hostkeys import host_key_store
from tui.remote.programs import program_source
from tui.remote.session import BoxError, BoxSession
from tui.store.journal import GuardOutcome, Journal

GUARD_DIR = "~/.gpurent-tui/guard"
SHIPPED = ("guard.py", "probe.py", "push.py")
INSTALL_WAIT = 30.0
CONTROL_TIMEOUT = 30.0
Say = Callable[[str], None]


@dataclass(frozen=True)
class GuardRequest:
    """What the user asked the watchdog to do (the command's arguments)."""

    max_hours: float
    no_progress_minutes: float | None = None
    actions: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: {t: DEFAULT_STEPS for t in TRIGGERS})
    dry_run: bool = False
    poll_seconds: float = DEFAULT_POLL_SECONDS
    use_account_key: bool = False
    hf_endpoint: str | None = None
    retry_seconds: float = RETRY_SECONDS  # between tries of a failed final stop or destroy


async def guard_control(session: BoxSession, params: dict[str, Any]) -> dict[str, Any]:
    """One control request to the watchdog's program on the box (stop, state); BoxError
    when it gives no readable answer."""
    result = await session.run_program(program_source("guard"), json.dumps(params).encode(),
                                       timeout=CONTROL_TIMEOUT, what="watchdog control")
    try:
        answer = json.loads(result.frames[0])
    except (ValueError, RecursionError, IndexError):
        answer = None
    if not isinstance(answer, dict):
        raise _bad(session, "the watchdog's control program gave no readable answer")
    if "error" in answer:
        raise _bad(session, f"the watchdog's control program failed: "
                            f"{clean(str(answer['error']))[:300]}")
    return answer


def _bad(session: BoxSession, words: str) -> BoxError:
    return BoxError(Connection.PROBE_FAILED, f"box {session.box.name}: {words}")


class TokenQuestion(Exception):
    """Arming would send a Hub token to this box for the first time and nobody said yes:
    nothing was sent; `notice` is the question (arm again with `confirmed`)."""

    def __init__(self, notice: str) -> None:
        super().__init__(notice)
        self.notice = notice


def will_push(request: GuardRequest) -> bool:
    """Whether a step of this watchdog can push: a dry run acts on nothing, and a trigger
    set to `stop` pushes nothing."""
    return not request.dry_run and any("push" in steps for steps in request.actions.values())


def guard_token(box: BoxConfig, request: GuardRequest,
                entries: Iterable[Mapping[str, Any]]) -> TokenDecision:
    """The one rule (tui.model.token_rule), asked for this watchdog: a Hub token goes to
    the box only when one of its steps will push to hf_repo from there."""
    push = box.push
    uses = will_push(request) and push is not None and bool(push.hf_repo)
    return decide(box, "guard", uses_token=uses, entries=entries,
                  repo=push.hf_repo if push is not None else None)


def _secrets(fleet: FleetConfig, box: BoxConfig, request: GuardRequest,
             env: Mapping[str, str], decision: TokenDecision, confirmed: bool = False
             ) -> tuple[dict[str, str], str | None, list[str]]:
    """(secrets for the box, why no Hub push is possible or None, notices for the user).
    TokenQuestion when the rule asks and the user has not said yes."""
    secrets: dict[str, str] = {}
    notices: list[str] = []
    no_token = None
    push = box.push
    if push is None or not push.hf_repo:
        no_token = "no hf_repo in the box's [box.push]: nothing to push"
    elif decision.withheld is not None:
        no_token = decision.withheld
    elif not decision.sends:
        no_token = ("a dry run: no Hub token was sent to the box (it pushes nothing)"
                    if request.dry_run else "no step pushes (every trigger only stops): "
                    "no Hub token was sent to the box")
    elif decision.ask and not confirmed:
        raise TokenQuestion(decision.notice or "")
    else:
        try:
            token, where = token_value(box, decision), decision.source_words
        except HubError as exc:
            token, where = None, exc.message
        if token:
            secrets["hf_token"] = token
            if decision.notice is not None:
                notices.append(decision.notice)
        else:
            no_token = f"no Hub token ({where or 'HF_TOKEN is not set'}): nothing to push"
    if request.use_account_key:
        adapter = ADAPTERS.get(box.provider)
        key = adapter.find_key(env) if adapter is not None else None
        if key is None:
            raise ValueError(f"--use-account-key: no {box.provider} account key here "
                             f"(set {adapter.key_var if adapter else 'its key variable'})")
        secrets["account_key"] = key.reveal()
        notices.append(
            f"--use-account-key: your account-wide {box.provider} key now sits on box "
            f"{box.name} (in the watchdog's memory). Whoever controls that box can stop, "
            "start or destroy every instance of your account, and rent new ones. Remove it "
            f"with `gpurent-tui guard {box.name} --remove` when the run is over.")
    return secrets, no_token, notices


def _base_url(fleet: FleetConfig, box: BoxConfig, env: Mapping[str, str]) -> str | None:
    adapter = ADAPTERS.get(box.provider)
    if adapter is None:
        return None
    return fleet.providers.get(box.provider) or adapter.url_from(env)


async def install_guard(fleet: FleetConfig, box: BoxConfig, request: GuardRequest,
                        journal: Journal, *, session: BoxSession | None = None,
                        env: Mapping[str, str] | None = None, say: Say | None = None,
                        confirmed: bool = False) -> Report:
    """Arm the watchdog on `box` (replacing any there); journaled, never with a secret.
    The first Hub token it would send to the box needs `confirmed` (the user's yes to
    `guard_token`'s notice); without it nothing is sent and the arming is refused."""
    env = os.environ if env is None else env
    report = Report()
    decision = guard_token(box, request, journal.entries)
    try:
        secrets, no_token, notices = _secrets(fleet, box, request, env, decision, confirmed)
    except TokenQuestion as asked:
        return report.fail(f"guard {box.name}: not armed, nothing sent: {asked.notice} "
                           "(say yes to it: --yes)", EXIT_USAGE)
    except ValueError as exc:
        return report.fail(f"guard {box.name}: {exc}")
    for notice in notices:
        if say is not None:
            say(notice)
    guard_id = new_nonce()[:16]
    push = box.push
    config = guard_config(
        guard_id=guard_id, box=box.name, provider=box.provider, runs_roots=box.runs_roots,
        max_hours=request.max_hours, no_progress_minutes=request.no_progress_minutes,
        actions=request.actions, dry_run=request.dry_run, poll_seconds=request.poll_seconds,
        instance_id=box.instance_id, base_url=_base_url(fleet, box, env),
        stop_command=box.stop_command, destroy_command=box.destroy_command,
        hf_repo=push.hf_repo if push is not None else None,
        hf_endpoint=request.hf_endpoint or env.get("HF_ENDPOINT") or None,
        no_token_reason=no_token, retry_seconds=request.retry_seconds)
    words = plan_words(request.max_hours, request.no_progress_minutes, request.actions,
                       config["hf_repo"] if not no_token or request.dry_run else None)
    if request.dry_run:
        words = "dry run (acts on nothing, says what it would do): " + words
    own = session is None
    session = session or BoxSession(box, fleet, host_key_store(fleet))
    outcome: GuardOutcome = "failed"
    error: str | None = None
    try:
        old = await guard_control(session, {"mode": "stop", "remove": True, "dir": GUARD_DIR})
        if old.get("stopped"):
            report.say(f"box {box.name}: the watchdog that ran there was stopped and replaced")
        elif (ended := _ended(old)) is not None:
            report.say(f"box {box.name}: the watchdog there had already ended ({ended}); "
                       "replaced")
        files = [{"path": f"{GUARD_DIR}/{name}", "text": program_source(name.removesuffix(".py")),
                  "mode": 0o600}
                 for name in SHIPPED]
        files.append({"path": f"{GUARD_DIR}/config.json", "text": json.dumps(config),
                      "mode": 0o600})
        files.append({"path": f"{GUARD_DIR}/secrets.json", "text": json.dumps(secrets),
                      "mode": 0o600})
        # The training interpreter: rented images keep huggingface_hub (a push) there.
        started = await start_detached(session, [box_python(box), "guard.py"],
                                       f"{GUARD_DIR}/guard.log", cwd=GUARD_DIR, files=files)
        state = await _wait_armed(session, guard_id)
        if state is None:
            error = (f"the watchdog (pid {started.pid}) did not write its state within "
                     f"{INSTALL_WAIT:g} s; see {GUARD_DIR}/guard.log on the box")
        else:
            view = fold_guard(state, None)
            summary, _ = guard_summary(view, view.armed_at)
            outcome = "dry_run" if request.dry_run else "armed"
            report.say(f"box {box.name}: {summary}")
            report.say(f"  {words}")
            if view.can_stop and ("cannot" in view.can_stop or
                                  view.can_stop.startswith("no ")):
                report.say(f"  warning: it cannot stop this box: {view.can_stop}")
            elif view.can_stop:
                report.say(f"  stops with: {view.can_stop}")
            if no_token:
                report.say(f"  {no_token}")
    except BoxError as exc:
        error = exc.message
    finally:
        if error is not None and secrets:
            await _drop_secrets(session)
        if own:
            await session.close()
    if error is not None:
        report.fail(f"guard {box.name}: {clean_block(error)}")
    journal.record(box=box.name, action="guard", outcome=outcome,
                   destination=config["hf_repo"], message=words, error=error,
                   details={SENT_KEY: decision.source if "hf_token" in secrets else None})
    return report


def _ended(answer: Mapping[str, Any]) -> str | None:
    """How a watchdog that was no longer running says it ended (its state, read as a
    stranger's words), or None when it left no such word."""
    state = answer.get("state")
    if not isinstance(state, Mapping):
        return None
    view = fold_guard(state, None)
    return view.ended if view.error is None else None


async def _drop_secrets(session: BoxSession) -> None:
    """An arming that failed stops what it started and leaves no secret on the box (the
    watchdog removes its secrets file once read; one that never ran did not)."""
    with contextlib.suppress(BoxError):
        await guard_control(session, {"mode": "stop", "drop_secrets": True, "dir": GUARD_DIR})


async def _wait_armed(session: BoxSession, guard_id: str) -> dict[str, Any] | None:
    """The watchdog's first state (its id ours), or None if it never wrote one."""
    deadline = time.monotonic() + INSTALL_WAIT
    while time.monotonic() < deadline:
        answer = await guard_control(session, {"mode": "state", "dir": GUARD_DIR})
        state = answer.get("state")
        if isinstance(state, dict) and state.get("id") == guard_id:
            return state
        if answer.get("pid_id") == guard_id and not answer.get("pid_alive"):
            return None  # it started and ended: its log says why
        await asyncio.sleep(0.3)
    return None


async def remove_guard(fleet: FleetConfig, box: BoxConfig, journal: Journal, *,
                       session: BoxSession | None = None) -> Report:
    """Stop the watchdog and remove its files (secrets included); journaled."""
    report = Report()
    own = session is None
    session = session or BoxSession(box, fleet, host_key_store(fleet))
    error = None
    try:
        answer = await guard_control(session, {"mode": "stop", "remove": True,
                                               "dir": GUARD_DIR})
        removed = items(answer.get("removed"))
        if answer.get("stopped"):
            report.say(f"box {box.name}: the watchdog was stopped; {len(removed)} file(s) "
                       f"removed from {GUARD_DIR}")
        elif (ended := _ended(answer)) is not None:
            report.say(f"box {box.name}: the watchdog had already ended ({ended}); "
                       f"{len(removed)} file(s) removed from {GUARD_DIR}")
        elif removed:
            report.say(f"box {box.name}: no watchdog was running; {len(removed)} file(s) "
                       f"removed from {GUARD_DIR}")
        else:
            report.say(f"box {box.name}: no watchdog there; nothing to remove")
    except BoxError as exc:
        error = exc.message
        report.fail(f"guard {box.name} --remove: {clean_block(error)}")
    finally:
        if own:
            await session.close()
    journal.record(box=box.name, action="guard-remove",
                   outcome="failed" if error else "removed", error=error)
    if error:
        report.code = EXIT_FAILED
    return report
