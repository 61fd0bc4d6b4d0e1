"""The on-box watchdog from the panel's side: what to arm, and what its state file says. Pure.

`gpurent-tui guard` arms a watchdog on a box (tui/onbox/guard.py) that acts
without a panel; this module plans its config (triggers, actions, limits) and
reads back the state it keeps on the box. That state is written on a
stranger's machine, so it is read as hostile: every field type- and
range-checked, every text cleaned and cut, every list bounded. Anything
unreadable marks the guard line alone ("guard state unreadable: ..."), never
the box or its runs.

Times in the state are the box's clock, compared with the box's own clock
(`box_time` of the probe answer), so a skewed box reads right. The heartbeat
is the state file's mtime: older than a few beats reads "guard not running".
A watchdog that acted ends on its own and says so in `ended` (its heartbeat
then stops by design), or says in `staying` that it waits to try a failed
stop or destroy again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from tui.model import fields
from tui.model.runs import format_age
from tui.model.text import clean

Trigger = Literal["done", "stalled", "idle", "timeout"]
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
# What a step of the watchdog says it did: a trigger's firing (its action is the trigger,
# its outcome "fired"), its own "fired" step, then each push, stop or destroy.
StepAction = Literal[Trigger, "fired", "push", "stop", "destroy", "?"]  # ?: one it never writes
StepOutcome = Literal["fired", "acting", "dry_run", "skipped", "verified", "refused", "sending",
                      "ran", "done", "failed", "?"]  # ?: an outcome it never writes
STEP_ACTIONS: tuple[StepAction, ...] = get_args(StepAction)
STEP_OUTCOMES: tuple[StepOutcome, ...] = get_args(StepOutcome)
STEPS = {"stop": ("stop",), "push,stop": ("push", "stop"), "push,destroy": ("push", "destroy")}
DEFAULT_STEPS = ("push", "stop")
DEFAULT_POLL_SECONDS = 30.0
TEXT_CELLS = 200
MAX_DID = 20
MAX_TIME = 1e11
STALE_BEATS = 3
STALE_SLACK = 5.0
POWER_TRIES = 3
RETRY_SECONDS = 120.0
MAX_TRIES = 100
MAX_KEPT = 20          # runs named in `kept` (as the watchdog writes at most)
MAX_KEPT_FILES = 20    # files per run there
MAX_MORE = 10**6
KEPT_SHOWN = 2         # runs, then files per run, named in the one-line summary
KEPT_FILES_SHOWN = 4


class GuardPlanError(ValueError):
    """A guard command's arguments that cannot be armed, in words."""


def parse_on(rules: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`--on done=push,destroy --on timeout=stop` as trigger -> steps; every trigger not
    named pushes (when an hf_repo is set) and stops."""
    actions: dict[str, tuple[str, ...]] = {t: DEFAULT_STEPS for t in TRIGGERS}
    for rule in rules:
        name, sep, steps = rule.partition("=")
        names = [n.strip() for n in name.split("|")] if sep else []
        if not sep or not all(n in TRIGGERS for n in names):
            raise GuardPlanError(
                f"--on {rule!r}: expected TRIGGER=STEPS with TRIGGER one of "
                f"{', '.join(TRIGGERS)} (several joined by |) and STEPS one of "
                f"{', '.join(STEPS)}")
        chosen = STEPS.get(steps.strip().replace(" ", ""))
        if chosen is None:
            raise GuardPlanError(f"--on {rule!r}: STEPS must be one of {', '.join(STEPS)}")
        for n in names:
            actions[n] = chosen
    return actions


def check_limits(max_hours: float, no_progress_minutes: float | None,
                 poll_seconds: float) -> None:
    for label, value in (("--max-hours", max_hours), ("--no-progress-minutes",
                                                      no_progress_minutes),
                         ("--poll-seconds", poll_seconds)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise GuardPlanError(f"{label} must be a positive number (fractions allowed), "
                                 f"not {value!r}")


def guard_config(*, guard_id: str, box: str, provider: str, runs_roots: Sequence[str],
                 max_hours: float, no_progress_minutes: float | None,
                 actions: Mapping[str, Sequence[str]], dry_run: bool, poll_seconds: float,
                 instance_id: str | None = None, base_url: str | None = None,
                 stop_command: str | None = None, destroy_command: str | None = None,
                 hf_repo: str | None = None, hf_endpoint: str | None = None,
                 no_token_reason: str | None = None,
                 retry_seconds: float = RETRY_SECONDS) -> dict[str, Any]:
    """The watchdog's config.json: everything it needs, no secret (those go apart)."""
    return {
        "v": 1, "id": guard_id, "box": box, "provider": provider,
        "runs_roots": list(runs_roots), "max_hours": max_hours,
        "no_progress_minutes": no_progress_minutes,
        "actions": {t: list(s) for t, s in actions.items()}, "dry_run": dry_run,
        "poll_seconds": poll_seconds, "beat_seconds": poll_seconds,
        "instance_id": instance_id, "base_url": base_url, "stop_command": stop_command,
        "destroy_command": destroy_command, "hf_repo": hf_repo, "hf_endpoint": hf_endpoint,
        "no_token_reason": no_token_reason,
        "power_tries": POWER_TRIES, "retry_seconds": retry_seconds,
    }


def plan_words(max_hours: float, no_progress_minutes: float | None,
               actions: Mapping[str, Sequence[str]], hf_repo: str | None) -> str:
    """What the armed watchdog will do, in one sentence for the command line."""
    when = [f"after {hours_words(max_hours)}"]
    if no_progress_minutes is not None:
        when.append(f"after {minutes_words(no_progress_minutes)} without progress or "
                    "with idle GPUs")
    when.append("when every run finished")
    steps = sorted({",".join(s) for s in actions.values()})
    push = f" (push to {hf_repo})" if hf_repo else " (no hf_repo: nothing to push)"
    return f"acts {', '.join(when)}: {' / '.join(steps)}{push}"


def hours_words(hours: float) -> str:
    return format_age(hours * 3600)


def minutes_words(minutes: float) -> str:
    seconds = minutes * 60
    return f"{minutes:g} min" if seconds >= 60 else f"{seconds:.0f} s"


# -- the state the watchdog keeps on the box -----------------------------------------------

@dataclass(frozen=True)
class GuardStep:
    """One thing the watchdog did (or would do, dry run): push, stop, destroy, fired."""

    action: StepAction
    outcome: StepOutcome
    at: float | None
    detail: str
    answer: str | None = None


@dataclass(frozen=True)
class GuardStay:
    """Why an acted watchdog still runs: a failed stop or destroy it will try again."""

    action: Literal["stop", "destroy"]
    retry_at: float | None
    attempt: int
    attempts: int


@dataclass(frozen=True)
class GuardKept:
    """Files of one run a destroy would have lost (no push takes them, or the Hub did not
    verify them), so the watchdog stopped the box instead: they are on its disk."""

    run: str
    files: tuple[str, ...]
    more: int  # files beyond those named
    why: str


@dataclass(frozen=True)
class GuardView:
    """The watchdog's state as the panel may show it; `error` when it cannot be read."""

    heartbeat: float | None = None  # the state file's mtime (box clock)
    error: str | None = None
    armed: bool = False
    dry_run: bool = False
    armed_at: float | None = None
    max_hours: float | None = None
    no_progress_minutes: float | None = None
    beat_seconds: float = DEFAULT_POLL_SECONDS
    last_progress_at: float | None = None
    idle_since: float | None = None
    gpu_note: str | None = None
    # the GPUs' busy seconds over the seconds its looks covered, since armed
    busy_covered_s: float | None = None
    busy_s: float | None = None
    can_stop: str | None = None
    hf_repo: str | None = None
    fired: GuardStep | None = None
    did: tuple[GuardStep, ...] = ()
    staying: GuardStay | None = None
    kept: tuple[GuardKept, ...] = ()
    kept_more: int = 0  # runs with kept files beyond those named
    ended: str | None = None
    actions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    guard_id: str | None = None  # which arming wrote it (a nonce); None: none, or not one

    def final(self, trigger: str) -> str:
        """What a trigger ends in: stop, or destroy (only after a verified push)."""
        steps = self.actions.get(trigger, DEFAULT_STEPS)
        return "destroy" if "destroy" in steps else "stop"

    @property
    def deadline(self) -> float | None:
        if self.armed_at is None or self.max_hours is None:
            return None
        return self.armed_at + self.max_hours * 3600

    def stale(self, box_time: float | None) -> bool:
        """The heartbeat is older than a few beats: the watchdog is not running."""
        if self.heartbeat is None or box_time is None:
            return False
        return box_time - self.heartbeat > STALE_BEATS * self.beat_seconds + STALE_SLACK


def _text(value: object, cells: int = TEXT_CELLS) -> str | None:
    """A string field, cleaned for a terminal and cut to `cells`."""
    found = fields.nonempty(value)
    if found is None:
        return None
    found = clean(found[:cells * 2])
    return found if len(found) <= cells else found[:cells - 1] + "…"


def _time(value: object) -> float | None:
    number = fields.finite(value)
    return number if number is not None and 0 <= number < MAX_TIME else None


def _busy(raw: object) -> tuple[float | None, float | None]:
    """The watchdog's busy integral: covered seconds in range, busy ones clamped to them."""
    if not isinstance(raw, Mapping):
        return None, None
    covered, busy = fields.finite(raw.get("covered_s")), fields.finite(raw.get("busy_s"))
    if covered is None or busy is None or not 0 < covered < 1e9:
        return None, None
    return covered, min(covered, max(0.0, busy))


def _positive(value: object) -> float | None:
    number = fields.finite(value)
    return number if number is not None and 0 < number < 1e9 else None


def _step(raw: object) -> GuardStep | None:
    """A step as the watchdog writes it. One with no action is dropped; one whose action it
    never writes reads '?' (a watchdog that says it fired, or acted, is still shown)."""
    if not isinstance(raw, Mapping):
        return None
    said = raw.get("action") or raw.get("trigger")
    if fields.nonempty(said) is None:
        return None
    action: StepAction = next((a for a in STEP_ACTIONS if a == said), "?")
    outcome: StepOutcome = next((o for o in STEP_OUTCOMES if o == raw.get("outcome")), "?")
    return GuardStep(action=action, outcome=outcome,
                     at=_time(raw.get("at")),
                     detail=_text(raw.get("detail") or raw.get("why")) or "",
                     answer=_text(raw.get("answer")))


def _stay(raw: object) -> GuardStay | None:
    """`staying` as the watchdog writes it; anything else reads as not staying."""
    if not isinstance(raw, Mapping) or raw.get("action") not in ("stop", "destroy"):
        return None
    attempt, attempts = fields.whole(raw.get("attempt")), fields.whole(raw.get("attempts"))
    if attempt is None or attempts is None or not 1 <= attempt <= attempts <= MAX_TRIES:
        return None
    action: Literal["stop", "destroy"] = "stop" if raw["action"] == "stop" else "destroy"
    return GuardStay(action=action, retry_at=_time(raw.get("retry_at")), attempt=attempt,
                     attempts=attempts)


def _kept(raw: object) -> tuple[GuardKept, ...]:
    """`kept` as the watchdog writes it, bounded: at most MAX_KEPT runs, MAX_KEPT_FILES
    names each (the rest counted), every text cleaned and cut; an entry naming no run is
    dropped."""
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw[:MAX_KEPT]:
        if not isinstance(item, Mapping):
            continue
        run = _text(item.get("run"), 120)
        if run is None:
            continue
        files_raw = item.get("files")
        files_raw = files_raw if isinstance(files_raw, list) else []
        files = tuple(f for f in (_text(x, 120) for x in files_raw[:MAX_KEPT_FILES]) if f)
        more = _kept_more(item.get("more")) + max(0, len(files_raw) - MAX_KEPT_FILES)
        out.append(GuardKept(run=run, files=files, more=min(more, MAX_MORE),
                             why=_text(item.get("why")) or "kept"))
    return tuple(out)


def _kept_more(raw: object) -> int:
    said = fields.whole(raw)
    return said if said is not None and 0 <= said <= MAX_MORE else 0


def kept_words(kept: Sequence[GuardKept], runs_more: int = 0) -> str:
    """`kept on the box: r1: weights/best_ema.pt (no push takes it ...)`: what a destroy
    would have lost, so the box was stopped and they are on its disk."""
    parts = []
    for k in kept[:KEPT_SHOWN]:
        names = list(k.files[:KEPT_FILES_SHOWN])
        more = k.more + len(k.files) - len(names)
        if more:
            names.append(f"+{more} more")
        parts.append(f"{k.run}: {', '.join(names) or 'its files'} ({k.why})")
    hidden = max(0, len(kept) - KEPT_SHOWN) + runs_more
    if hidden:
        parts.append(f"+{hidden} more run(s)")
    return "kept on the box: " + "; ".join(parts)


def fold_guard(raw: object, heartbeat: float | None) -> GuardView:
    """The watchdog's state.json, read as hostile input: bounded, typed, cleaned."""
    if not isinstance(raw, Mapping):
        return GuardView(heartbeat=heartbeat, error="guard state is not a JSON object")
    if raw.get("v") != 1:
        return GuardView(heartbeat=heartbeat,
                         error=f"guard state has version {_text(fields.brief(raw.get('v')), 20)}, "
                               "expected 1")
    fired = None
    if isinstance(raw.get("fired"), Mapping):
        f = raw["fired"]
        fired = _step({"action": f.get("trigger"), "outcome": "fired", "at": f.get("at"),
                       "detail": f.get("why")})
    actions: dict[str, tuple[str, ...]] = {}
    raw_actions = raw.get("actions")
    for trigger in TRIGGERS:
        steps = raw_actions.get(trigger) if isinstance(raw_actions, Mapping) else None
        if isinstance(steps, list) and tuple(steps) in STEPS.values():
            actions[trigger] = tuple(steps)
    did_raw = raw.get("did")
    did = tuple(s for s in (_step(x) for x in (did_raw if isinstance(did_raw, list)
                                                else [])[-MAX_DID:]) if s is not None)
    return GuardView(
        heartbeat=heartbeat,
        armed=raw.get("armed") is True,
        dry_run=raw.get("dry_run") is True,
        armed_at=_time(raw.get("armed_at")),
        max_hours=_positive(raw.get("max_hours")),
        no_progress_minutes=_positive(raw.get("no_progress_minutes")),
        beat_seconds=_positive(raw.get("beat_seconds")) or DEFAULT_POLL_SECONDS,
        last_progress_at=_time(raw.get("last_progress_at")),
        idle_since=_time(raw.get("idle_since")),
        gpu_note=_text(raw.get("gpu_note")),
        busy_covered_s=_busy(raw.get("gpu_busy"))[0], busy_s=_busy(raw.get("gpu_busy"))[1],
        can_stop=_text(raw.get("can_stop")),
        hf_repo=_text(raw.get("hf_repo"), 120),
        fired=fired, did=did, staying=_stay(raw.get("staying")), kept=_kept(raw.get("kept")),
        kept_more=min(MAX_MORE, _kept_more(raw.get("kept_more")) + max(
            0, len(raw["kept"]) - MAX_KEPT if isinstance(raw.get("kept"), list) else 0)),
        ended=_text(raw.get("ended"), 120), actions=actions, guard_id=_guard_id(raw.get("id")))


GUARD_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _guard_id(value: object) -> str | None:
    """The arming's id as the panel made it (a short nonce); anything else is not one."""
    return value if isinstance(value, str) and GUARD_ID.fullmatch(value) else None


def fold_guard_part(prev: GuardView | None, part: Mapping[str, Any]
                    ) -> tuple[GuardView | None, bool]:
    """The probe's `guard` part folded into the last view: (view, whether the state itself
    was in it). A part with only the heartbeat keeps the last state."""
    if part.get("absent"):
        return None, True
    heartbeat = _time(part.get("at"))
    if "error" in part:
        return GuardView(heartbeat=heartbeat,
                         error=_text(str(part["error"])) or "guard state unreadable"), True
    if "state" in part:
        return fold_guard(part["state"], heartbeat), True
    if prev is None:
        return None, False
    return _replace_heartbeat(prev, heartbeat), False


def _replace_heartbeat(view: GuardView, heartbeat: float | None) -> GuardView:
    from dataclasses import replace
    return replace(view, heartbeat=heartbeat)


def guard_events(prev: GuardView | None, new: GuardView | None) -> list[GuardStep]:
    """What the watchdog did that `prev` had not shown yet: the hook for alerts (`the
    watchdog acted`). Steps are matched by (action, outcome, at)."""
    if new is None:
        return []
    seen = {(s.action, s.outcome, s.at) for s in prev.did} if prev is not None else set()
    return [s for s in new.did if (s.action, s.outcome, s.at) not in seen]


def guard_summary(view: GuardView, box_time: float | None,
                  countdown_at: float | None = None) -> tuple[str, str]:
    """(words, level) for the box header: level is ok | warn | acted | bad.
    `countdown_at`: the box's clock carried forward while it is silent (the countdown runs
    on; the heartbeat is still judged on the last answer's clock).

    `guarded: stops in 3h12m or after 20 min without progress`, `guard acted 12:03 ...`,
    `guard not running (last heartbeat 14m ago)`, `guard state unreadable: ...`.
    """
    if view.error is not None:
        return f"guard state unreadable: {view.error}", "bad"
    now = box_time if box_time is not None else view.heartbeat
    dry = " (dry run)" if view.dry_run else ""
    if view.fired is not None:
        steps = "; ".join(f"{s.action} {s.outcome}" + (f": {s.detail}" if s.detail else "")
                          for s in [s for s in view.did if s.action != "fired"][-4:])
        ago = f" {format_age(now - view.fired.at)} ago" if now is not None and \
            view.fired.at is not None else ""
        head = f"guard fired{ago}{dry} ({view.fired.action}: {view.fired.detail})"
        tail, level = _after_acting(view, box_time, now)
        if view.kept or view.kept_more:
            tail = f"; {kept_words(view.kept, view.kept_more)}{tail}"
        return (f"{head}: {steps}{tail}" if steps else f"{head}{tail}"), level
    if view.stale(box_time):
        age = format_age(box_time - view.heartbeat) if box_time is not None and \
            view.heartbeat is not None else "?"
        ended = f", {view.ended}" if view.ended else ""
        return f"guard not running (last heartbeat {age} ago{ended})", "bad"
    if not view.armed:
        return f"guard not armed ({view.ended or 'ended'})", "warn"
    parts = []
    deadline = view.deadline
    left_from = countdown_at if countdown_at is not None else now
    if deadline is not None and left_from is not None:
        final = view.final("timeout")
        verb = f"would {final}" if view.dry_run else f"{final}s"
        parts.append(f"{verb} in {format_age(max(0.0, deadline - left_from))}")
    if view.no_progress_minutes is not None:
        parts.append(f"after {minutes_words(view.no_progress_minutes)} without progress")
    parts.append("when every run finished")
    words = f"guarded{dry}: " + " or ".join(parts)
    cannot = view.can_stop is not None and ("cannot" in view.can_stop
                                            or view.can_stop.startswith("no "))
    notes = [n for n in (view.gpu_note, view.can_stop if cannot else None) if n]
    if notes:
        words += " (" + "; ".join(notes) + ")"
    return words, "warn" if cannot else "ok"


def _after_acting(view: GuardView, box_time: float | None, now: float | None
                  ) -> tuple[str, str]:
    """(words, level) of what became of a watchdog that fired: ended on its own (its silent
    heartbeat is expected then), staying to try a failed step again, or gone unannounced."""
    powered = [s for s in view.did if s.action in ("stop", "destroy")]
    gave_up = bool(powered) and powered[-1].outcome == "failed"
    if view.ended is not None:
        return f"; guard {view.ended}", "bad" if gave_up else "acted"
    if view.stale(box_time):
        return "; guard not running now", "acted"
    stay = view.staying
    if stay is not None:
        when = f" in {format_age(max(0.0, stay.retry_at - now))}" \
            if stay.retry_at is not None and now is not None else ""
        return (f"; staying: retrying the {stay.action}{when} (attempt {stay.attempt} of "
                f"{stay.attempts})"), "acted"
    return "", "acted"


def guard_document(view: GuardView | None, box_time: float | None) -> dict[str, Any] | None:
    """The guard's part of `status --json`."""
    if view is None:
        return None
    words, level = guard_summary(view, box_time)
    return {
        "summary": words, "level": level, "error": view.error,
        "running": view.error is None and view.ended is None and not view.stale(box_time),
        "armed": view.armed, "dry_run": view.dry_run, "armed_at": view.armed_at,
        "max_hours": view.max_hours, "no_progress_minutes": view.no_progress_minutes,
        "deadline": view.deadline, "heartbeat": view.heartbeat,
        "last_progress_at": view.last_progress_at, "gpu_note": view.gpu_note,
        "gpu_busy_pct": None if view.busy_s is None or not view.busy_covered_s
        else round(100 * view.busy_s / view.busy_covered_s, 1),
        "gpu_busy_covered_s": view.busy_covered_s,
        "can_stop": view.can_stop, "hf_repo": view.hf_repo,
        "fired": None if view.fired is None else {
            "trigger": view.fired.action, "at": view.fired.at, "why": view.fired.detail},
        "did": [{"action": s.action, "outcome": s.outcome, "at": s.at, "detail": s.detail,
                 "answer": s.answer} for s in view.did],
        "staying": None if view.staying is None else {
            "action": view.staying.action, "retry_at": view.staying.retry_at,
            "attempt": view.staying.attempt, "attempts": view.staying.attempts},
        "kept": [{"run": k.run, "files": list(k.files), "more": k.more, "why": k.why}
                 for k in view.kept],
        "kept_more": view.kept_more,
        "ended": view.ended,
    }
