"""The fleet's policies, held once in the runtime (tui/runtime/) for the panel and `watch`.

The runtime feeds it the same things (each box's new state, each money picture, each
ended action) and it answers what to do: which alerts go out now (gated once
per cool-down and handed to the AlertSender), which boxes the budget policy
pushes and stops (tui.model.policy), which milestone push is due on a box
(tui.model.milestones), which boxes their provider stopped behind our back
(tui.model.preemption). The runtime runs the actions (one per box) and
reports back; nothing here waits on a box.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import replace
from typing import Any

from tui.actions.alerts import AlertSender
from tui.model.alerts import (
    BOX_IDLE,
    BOX_STOPPED,
    GPU_UNDERUSED,
    OVER_BUDGET,
    PREEMPTED,
    PUSH_FAILED,
    UNREACHABLE,
    WATCHDOG_ACTED,
    AlertEvent,
    Gate,
    disk_fill_event,
    event,
    gate,
    gpu_underused_events,
    run_events,
    unreachable_event,
    watchdog_acted,
)
from tui.model.box import BoxState, Connection
from tui.model.config import FleetConfig
from tui.model.meter import FleetCost
from tui.model.milestones import (
    RETRY_BASE_SECONDS,
    Milestones,
    Pushed,
    Wish,
    plan,
    pushed_by_box,
    settle,
)
from tui.model.policy import Alarms, Decision, judge_costs
from tui.model.preemption import UNSURE_WORDS, WORDS, power_change, preempted
from tui.model.watchdog import guard_events
from tui.model.watchdog_journal import watchdog_stops
from tui.model.watchdog_silence import likely_fired
from tui.store.journal import Journal
from tui.store.sent_alerts import SentAlerts

Log = Callable[[str], None]


class Guardian:
    """Alarms, alerts, milestone pushes and preemption for one fleet."""

    def __init__(self, fleet: FleetConfig, journal: Journal, *,
                 sender: AlertSender | None = None, clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = random.random,
                 retry_seconds: float = RETRY_BASE_SECONDS) -> None:
        self.fleet = fleet
        self.journal = journal
        self.sender = sender
        self.clock = clock
        self.jitter = jitter
        self.retry_seconds = retry_seconds  # a failed milestone push: first backoff
        self.alarms = Alarms()
        self.milestones = Milestones()
        # The alerts sent before a restart, next to the journal: the cool-down goes on
        # where it was, and an idle spell already alarmed is not alarmed twice.
        self.sent = SentAlerts(journal.path.with_suffix(".alerts.jsonl"))
        self.gate = Gate(sent=dict(self.sent.sent))
        self._alarms_restored = False
        self.preempted: frozenset[str] = frozenset()
        # Stopped while a watchdog was armed on it that the panel never saw act: its stop or
        # the provider's? (asked, not accused)
        self.unsure: frozenset[str] = frozenset()
        self._unreachable: set[str] = set()  # boxes whose outage was alerted (once each)
        self._disk_filling: set[str] = set()  # boxes whose disk-fill was alerted (once each)
        # (box, run): GPU under-use told, once per run, a restart included (the sent file)
        self._underused_runs: set[tuple[str, str]] = {
            (box, run or "") for kind, box, run in self.sent.sent if kind == GPU_UNDERUSED}
        self._guard_stopped: dict[str, float] = {}  # box -> when its watchdog last stopped it
        self._pushed: dict[str, Pushed] = {}
        self._folded_list: list[dict[str, Any]] | None = None  # the journal list folded
        self._folded_count = 0                                # and how much of it
        self._idle_plan: dict[str, tuple[object, ...]] = {}  # box -> what found nothing due
        self._pushed_version: int | None = None
        self._power: dict[str, str | None] = {}  # box -> its last stop/start/destroy
        self._power_version: int | None = None
        self._started: dict[str, float | None] = {}  # box -> its last start journalled
        self._watchdog_keys: dict[str, set[str]] = {}  # box -> its watchdog stops journalled
        self._armed: dict[str, float | None] = {}  # box -> a watchdog armed since its start
        self._provider_stopped: frozenset[str] = frozenset()  # as the last money picture read

    # --- alerts ----------------------------------------------------------------------

    def alert(self, events: Iterable[AlertEvent]) -> list[AlertEvent]:
        """The events that pass the cool-down, sent to the webhook and command (in the
        background); the caller rings, shows or logs them."""
        out, self.gate = gate(self.gate, events, self.clock(),
                              self.fleet.alerts.cooldown_minutes)
        if out:
            self.sent.add(out)
        if out and self.sender is not None:
            self.sender.send(out)
        return out

    def watchdog_acted(self, box: str, what: str) -> list[AlertEvent]:
        """The box's watchdog acted while nobody looked (read from its state on the box)."""
        return self.alert([watchdog_acted(box, what, self.clock())])

    def box_updated(self, before: BoxState | None, after: BoxState) -> list[AlertEvent]:
        """Runs that just failed, died or stalled; a box unreachable past its minutes; a
        runs root that will fill before its running runs finish."""
        now = self.clock()
        found = run_events(before, after, now)
        if before is not None and before.last_ok_at is not None:  # not history at a first look
            steps = guard_events(before.guard, after.guard)
            if steps:  # one alert per look, naming every step (the cool-down is per kind)
                found.append(watchdog_acted(after.name, "; ".join(
                    f"{s.action} {s.outcome}" + (f": {s.detail}" if s.detail else "")
                    for s in steps), now))
        self._journal_watchdog(after)
        stops = _guard_stops(after)
        if stops:
            self._guard_stopped[after.name] = max(stops)
        fired = likely_fired(after)
        if after.connection is Connection.OK:
            self._unreachable.discard(after.name)
        elif fired is not None:
            if after.name not in self._unreachable:  # said once, as the header says it
                self._unreachable.add(after.name)
                found.append(event(WATCHDOG_ACTED, after.name,
                                   f"{after.name}: {fired.words()}", now))
        elif after.name not in self._unreachable and self._alerted_down(after):
            self._unreachable.add(after.name)  # this outage was alerted before a restart
        elif after.name not in self._unreachable and not self._stopped_on_purpose(after.name):
            down = unreachable_event(after, self.fleet.alerts.unreachable_minutes, now)
            if down is not None:
                self._unreachable.add(after.name)
                found.append(down)
        if after.connection is Connection.OK:  # once per box while its disk stays short
            fill = disk_fill_event(after, now)
            if fill is None:
                self._disk_filling.discard(after.name)
            elif after.name not in self._disk_filling:
                self._disk_filling.add(after.name)
                found.append(fill)
        return self.alert(found)

    # --- money -----------------------------------------------------------------------

    def judge_costs(self, cost: FleetCost, states: Mapping[str, BoxState],
                    busy: Container[str]) -> tuple[Decision, list[AlertEvent]]:
        """The alarms (tui.model.policy: the bell and the notices), the boxes to push and
        stop, and the alerts for boxes that went idle, over budget or provider-stopped."""
        reachable = {n for n, s in states.items() if s.connection is Connection.OK}
        before = self.alarms
        if not self._alarms_restored:  # the first picture since a (re)start
            self._alarms_restored = True
            over = frozenset(n for n, c in cost.boxes.items() if c.budget_level == "alarm"
                             and (OVER_BUDGET, n, None) in self.sent.sent)
            before = replace(before, idle=before.idle | self._idle_alarmed(cost),
                             over_budget=before.over_budget | over)
        decision = judge_costs(before, cost, self.fleet.on_budget, reachable=reachable,
                               busy=busy)
        self.alarms = decision.alarms
        now = self.clock()
        found = [event(BOX_IDLE, n, f"{n} is billed as running but idle", now)
                 for n in sorted(decision.alarms.idle - before.idle)]
        found += [event(OVER_BUDGET, n, f"{n} is over its budget", now)
                  for n in sorted(decision.alarms.over_budget - before.over_budget)]
        self._provider_stopped = frozenset(
            n for n, c in cost.boxes.items() if c.rates.state in ("stopped", "destroyed"))
        self._fold_power()
        stopped = frozenset(b.name for b in self.fleet.boxes
                            if not self._watchdog_stopped(b.name)
                            and preempted(b, cost.boxes.get(b.name), self._power[b.name]))
        unsure = frozenset(n for n in stopped if self._armed.get(n) is not None)
        stopped -= unsure
        found += [event(PREEMPTED, n, f"{n} was {WORDS}: start it again or destroy it", now)
                  for n in sorted(stopped - self.preempted)]
        found += [event(BOX_STOPPED, n, f"{n} was {UNSURE_WORDS} (a watchdog was armed on "
                        "it): start it again or destroy it", now)
                  for n in sorted(unsure - self.unsure)]
        self.preempted, self.unsure = stopped, unsure
        found += self._underused(cost, states)
        return decision, self.alert(found)

    def _underused(self, cost: FleetCost, states: Mapping[str, BoxState]) -> list[AlertEvent]:
        """`gpu_underused`, once per run: it progresses on GPUs that stay mostly idle."""
        found = []
        for name, state in states.items():
            box_cost = cost.boxes.get(name)
            running = box_cost.rates.running if box_cost is not None else None
            for item in gpu_underused_events(
                    state, running.usd_per_hr if running is not None else None,
                    self.fleet.alerts.gpu_underused_pct, self.fleet.alerts.gpu_underused_minutes):
                key = (name, item.run or "")
                if key not in self._underused_runs:
                    self._underused_runs.add(key)
                    found.append(item)
        return found
    def _alerted_down(self, state: BoxState) -> bool:
        """This outage (since `failed_since`, which a restart takes from the ledger) was
        alerted already, before a restart."""
        sent = self.sent.sent.get((UNREACHABLE, state.name, None))
        return sent is not None and state.failed_since is not None \
            and sent >= state.failed_since

    def _idle_alarmed(self, cost: FleetCost) -> frozenset[str]:
        """Boxes whose idle spell (as the ledger dates it) was alarmed before a restart."""
        out = set()
        for name, box in cost.boxes.items():
            sent = self.sent.sent.get((BOX_IDLE, name, None))
            if box.idle_alarm and box.idle_since is not None and sent is not None \
                    and sent >= box.idle_since:
                out.add(name)
        return frozenset(out)

    def _fold_power(self) -> None:
        """Each box's last stop/start/destroy, last start and armed watchdog, folded from
        the journal once per version (one pass for the fleet)."""
        version = self.journal.version
        if self._power_version != version:
            self._power_version = version
            self._power = {b.name: None for b in self.fleet.boxes}
            self._started = {b.name: None for b in self.fleet.boxes}
            self._armed = {b.name: None for b in self.fleet.boxes}
            self._watchdog_keys = {b.name: set() for b in self.fleet.boxes}
            for entry in self.journal.entries:  # one pass for the fleet
                name, action = entry.get("box"), entry.get("action")
                if name not in self._power:
                    continue
                key = entry.get("guard_step")
                if entry.get("by") == "watchdog" and isinstance(key, str):
                    self._watchdog_keys[name].add(key)
                at = entry.get("time")
                at = float(at) if isinstance(at, int | float) else None
                power = power_change(entry)  # a failed or refused one changed nothing
                if power is not None:
                    self._power[name] = power
                    if power == "start":
                        self._started[name] = at
                        self._armed[name] = None  # a stop ended the watchdog with the box
                elif action == "guard":  # armed, or replaced (by a dry run, or a failure)
                    self._armed[name] = at if entry.get("outcome") == "armed" else None
                elif action == "guard-remove" and entry.get("outcome") == "removed":
                    self._armed[name] = None

    def _journal_watchdog(self, state: BoxState) -> None:
        """The box's watchdog stopped it (its state says done), or most likely did (silent
        since its trigger held): journalled once, `by: "watchdog"`, so the box rests and a
        fresh `status` says why (tui.model.watchdog_journal)."""
        if state.guard is None or state.guard.dry_run:
            return
        self._fold_power()
        if state.name not in self._power:
            return
        for stop in watchdog_stops(state, self._watchdog_keys[state.name],
                                   self._started.get(state.name)):
            self.journal.record(box=state.name, action=stop.action, outcome=stop.outcome,
                                message=stop.message, at=stop.at, details=stop.details())
            self._watchdog_keys[state.name].add(stop.key)

    def _watchdog_stopped(self, name: str) -> bool:
        """The box's watchdog set out to stop it, and we did not start it since."""
        stopped_at = self._guard_stopped.get(name)
        started_at = self._started.get(name)
        return stopped_at is not None and (started_at is None or started_at < stopped_at)

    def _stopped_on_purpose(self, name: str) -> bool:
        """A box not answering because it is stopped is no news: our last power action on
        it was a stop or destroy, its watchdog stopped it, or the provider reads it
        stopped (a stop behind our back has its own alert)."""
        self._fold_power()
        return self._power.get(name) in ("stop", "destroy") or \
            self._watchdog_stopped(name) or name in self._provider_stopped

    def stopped_words(self, name: str) -> str | None:
        """How a box stopped behind our back is named in its header, or None."""
        return WORDS if name in self.preempted else UNSURE_WORDS if name in self.unsure \
            else None

    # --- milestone pushes ------------------------------------------------------------

    def milestone(self, state: BoxState, busy: bool) -> Wish | None:
        """The milestone push due on this box now (one per box at a time), or None."""
        box = next((b for b in self.fleet.boxes if b.name == state.name), None)
        if box is None or box.push is None or not box.push.milestones:
            return None
        pushed = self._fold_pushes()[state.name]
        # Nothing a plan reads changed since it last found nothing due (the weights tuple
        # is kept by the fold while the box's listing is unchanged; the box's pushes keep
        # their object while the journal adds nothing for it): nothing is due now, unless
        # a failed push's backoff may have run out.
        seen = (pushed, self.milestones, state.connection, busy,
                tuple((r.path, r.weights, r.files, r.health, r.best_epoch, r.best_metric)
                      for r in state.runs))
        if not self.milestones.attempts and self._idle_plan.get(state.name) == seen:
            return None
        wish = plan(box.push, state, pushed, self.milestones, self.clock(), busy=busy)
        if wish is None:
            self._idle_plan[state.name] = seen
        else:
            self._idle_plan.pop(state.name, None)
        return wish

    def _fold_pushes(self) -> dict[str, Pushed]:
        """Every box's verified pushes, folded from the journal's new lines only (the
        whole journal again only when it was replaced or could not be written)."""
        version = self.journal.version
        if self._pushed_version == version:
            return self._pushed
        entries = self.journal.entries
        names = [b.name for b in self.fleet.boxes]
        if entries is self._folded_list and len(entries) >= self._folded_count:
            self._pushed = pushed_by_box(entries[self._folded_count:], names, self._pushed)
        else:
            self._pushed = pushed_by_box(entries, names)
        self._folded_list, self._folded_count = entries, len(entries)
        self._pushed_version = version
        return self._pushed

    def push_cancelled(self, wish: Wish) -> None:
        """A milestone push the user cancelled backs off as a failed one does (it is not
        started again the moment the box is free), without an alert: the user knows."""
        self.milestones = settle(self.milestones, wish, False, self.clock(), self.jitter(),
                                 "cancelled by you", self.retry_seconds)

    def push_ended(self, wish: Wish, ok: bool, lines: list[str]) -> list[AlertEvent]:
        """Record how a milestone push ended; a failure backs off and alerts."""
        error = "; ".join(lines[-2:])
        self.milestones = settle(self.milestones, wish, ok, self.clock(), self.jitter(),
                                 error, self.retry_seconds)
        if ok:
            return []
        return self.alert([event(PUSH_FAILED, wish.box, f"{wish.box}/{wish.run}: milestone "
                                 f"push ({wish.why}) failed: {error}", self.clock(),
                                 wish.run)])


def _guard_stops(state: BoxState) -> list[float]:
    """When the box's watchdog set out to stop or destroy it, as its state showed: a step
    being sent, done or failed (a stop the provider did not confirm may still have
    stopped it), or its firing (every rule ends in a stop or a destroy). Its `done` is
    written only after the provider confirms, when the box is usually gone: the panel
    rarely sees that one. A dry run acts on nothing."""
    guard = state.guard
    if guard is None or guard.dry_run:
        return []
    stops = [s.at or 0.0 for s in guard.did
             if s.action in ("stop", "destroy") and s.outcome in ("sending", "done", "failed")]
    if guard.fired is not None:
        stops.append(guard.fired.at or 0.0)
    return stops
