"""Money: rates, billing segments, projections, break-even, alarms. Pure arithmetic.

Rates come from the provider's API when it has one, else from the box's
config (which also overrides the API where the user set a figure). Every
figure carries where it came from, because a user deciding to stop or destroy
a box must know whether a number was billed, configured or computed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tui.model.config import Pricing

DEFAULT_HOURS_PER_MONTH = 730.0
PROVIDER_HOURS_PER_MONTH = {"vast": 720.0}  # Vast bills disk on a 720-hour month
RUNPOD_STOPPED_USD_PER_GB_MONTH = 0.20
IDLE_GPU_PCT = 5.0
BUDGET_WARN = 0.8


class InstanceFacts(Protocol):
    """What a provider adapter reports about an instance (see tui.providers)."""

    state: str
    running_usd_per_hr: float | None
    disk_usd_per_hr: float | None
    disk_gb: float | None
    storage_usd_per_gb_month: float | None
    hours_per_month: float | None
    can_stop: bool
    started_at: float | None


@dataclass(frozen=True)
class Rate:
    usd_per_hr: float
    source: str  # "api" | "config" | "computed"
    note: str = ""


@dataclass(frozen=True)
class BoxRates:
    """A box's rates in each state, and the stop-vs-destroy arithmetic."""

    state: str  # running | starting | stopped | stopping | destroyed | error | unknown
    running: Rate | None
    stopped: Rate | None
    hours_per_month: float
    hours_per_month_source: str
    rebuild_usd: float | None
    can_stop: bool = True

    @property
    def now(self) -> Rate | None:
        """What the box bills right now."""
        if self.state == "destroyed":
            return Rate(0.0, "computed", "destroyed: nothing billed")
        if self.state in ("stopped", "stopping"):
            return self.stopped
        if self.state in ("running", "starting", "unknown", "error"):
            return self.running
        return None

    @property
    def saving_pct(self) -> float | None:
        """How much stopping saves against running, in percent."""
        if self.running is None or self.stopped is None or self.running.usd_per_hr <= 0:
            return None
        return 100.0 * (1 - self.stopped.usd_per_hr / self.running.usd_per_hr)

    @property
    def break_even_hours(self) -> float | None:
        """Rebuild cost / stopped $/hr: come back sooner and stopping pays."""
        if not self.can_stop or self.rebuild_usd is None or self.stopped is None:
            return None
        if self.stopped.usd_per_hr <= 0:
            return math.inf
        return self.rebuild_usd / self.stopped.usd_per_hr

    def verdict(self) -> str | None:
        if not self.can_stop:
            return "this provider cannot stop a box: destroy or keep it running"
        hours = self.break_even_hours
        if hours is None:
            return None
        if math.isinf(hours):
            return "stopping costs nothing while stopped: stop rather than destroy"
        return f"stopping pays if you come back within {hours:.1f} h; later, destroy"


def usd(value: float) -> str:
    """Dollars with the precision a rate or a total needs ($0.0694/hr, $12.40)."""
    if value == 0:
        return "$0"
    if 0 < abs(value) < 0.0001:
        return "<$0.0001" if value > 0 else "-<$0.0001"
    if abs(value) < 1:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def stopped_usd_per_hr(disk_gb: float, usd_per_gb_month: float, hours_per_month: float) -> float:
    """Disk GB x storage $/GB-month / hours-per-month (the provider's convention)."""
    return disk_gb * usd_per_gb_month / hours_per_month


def box_rates(provider: str, pricing: Pricing | None, facts: InstanceFacts | None) -> BoxRates:
    """Merge the API's figures with the config's: a configured figure wins, the API fills in."""
    pricing = pricing or Pricing()
    if pricing.hours_per_month is not None:
        hpm, hpm_source = pricing.hours_per_month, "config"
    elif facts is not None and facts.hours_per_month is not None:
        hpm = facts.hours_per_month
        hpm_source = f"{provider} bills on a {hpm:g}-hour month"
    elif provider in PROVIDER_HOURS_PER_MONTH:
        hpm = PROVIDER_HOURS_PER_MONTH[provider]
        hpm_source = f"{provider} bills on a {hpm:g}-hour month"
    else:
        hpm, hpm_source = DEFAULT_HOURS_PER_MONTH, "730-hour month (no better convention known)"

    running: Rate | None = None
    if pricing.running_usd_per_hr is not None:
        running = Rate(pricing.running_usd_per_hr, "config")
    elif facts is not None and facts.running_usd_per_hr is not None:
        running = Rate(facts.running_usd_per_hr, "api")

    can_stop = facts.can_stop if facts is not None else True
    stopped: Rate | None = None
    disk_gb = pricing.disk_gb if pricing.disk_gb is not None else (
        facts.disk_gb if facts is not None else None)
    per_gb = pricing.storage_usd_per_gb_month
    if per_gb is None and facts is not None:
        per_gb = facts.storage_usd_per_gb_month
    if per_gb is None and provider == "runpod":
        per_gb = RUNPOD_STOPPED_USD_PER_GB_MONTH
    if not can_stop:
        stopped = None
    elif (facts is not None and facts.disk_usd_per_hr is not None
          and pricing.disk_gb is None and pricing.storage_usd_per_gb_month is None):
        stopped = Rate(facts.disk_usd_per_hr, "api", "the disk's own $/hr")
    elif disk_gb is not None and per_gb is not None:
        stopped = Rate(stopped_usd_per_hr(disk_gb, per_gb, hpm), "computed",
                       f"{disk_gb:g} GB x ${per_gb:g}/GB-month / {hpm:g} h")
    state = facts.state if facts is not None else ("running" if running else "unknown")
    return BoxRates(state, running, stopped, hpm, hpm_source, pricing.rebuild_usd, can_stop)


# --- per run ---------------------------------------------------------------


@dataclass(frozen=True)
class RunCost:
    usd_per_hr: float
    shared_by: int  # running runs on the box splitting its rate evenly
    per_epoch_usd: float | None
    to_finish_usd: float | None


def run_cost(box_usd_per_hr: float | None, running_runs: int, mean_epoch_seconds: float | None,
             eta_seconds: float | None) -> RunCost | None:
    """Cost per epoch = $/hr x mean epoch s / 3600; to finish = $/hr x ETA (rate split evenly)."""
    if box_usd_per_hr is None:
        return None
    share = max(running_runs, 1)
    rate = box_usd_per_hr / share
    per_epoch = rate * mean_epoch_seconds / 3600 if mean_epoch_seconds is not None else None
    to_finish = rate * eta_seconds / 3600 if eta_seconds is not None else None
    return RunCost(rate, share, per_epoch, to_finish)


# --- the ledger: billing segments ------------------------------------------


@dataclass(frozen=True)
class Event:
    """The start of a billing segment: from `t` on, `box` bills `usd_per_hr`."""

    t: float
    box: str
    state: str
    usd_per_hr: float
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "t": round(self.t, 3), "box": self.box, "state": self.state,
                "usd_per_hr": self.usd_per_hr, "source": self.source}


def parse_event(record: Mapping[str, Any]) -> Event | None:
    try:
        event = Event(float(record["t"]), str(record["box"]), str(record["state"]),
                      float(record["usd_per_hr"]), str(record.get("source", "")))
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(event.t) and math.isfinite(event.usd_per_hr)) or event.usd_per_hr < 0:
        return None
    return event


def next_event(last: Event | None, box: str, state: str, usd_per_hr: float, source: str,
               now: float, started_at: float | None = None) -> Event | None:
    """The event to append when a box's state or rate changed; None when it did not.

    A box seen for the first time is backfilled from the provider's start time
    when the API gives one (it was billing before the panel looked).
    """
    if last is not None and last.state == state and math.isclose(
            last.usd_per_hr, usd_per_hr, rel_tol=1e-9, abs_tol=1e-12):
        return None
    t = now
    if last is None and started_at is not None and started_at < now and state == "running":
        t = started_at
    return Event(t, box, state, usd_per_hr, source)


def accrued(events: Iterable[Event], now: float, *, since: float | None = None
            ) -> dict[str, float]:
    """Dollars per box: each segment bills its rate until the box's next event (or now),
    counting only time after `since` when given (e.g. today's spend)."""
    by_box: dict[str, list[Event]] = {}
    for event in events:
        by_box.setdefault(event.box, []).append(event)
    totals: dict[str, float] = {}
    for box, box_events in by_box.items():
        box_events.sort(key=lambda e: e.t)
        total = 0.0
        for event, following in zip(box_events, [*box_events[1:], None], strict=True):
            start = event.t if since is None else max(event.t, since)
            end = following.t if following is not None else now
            if end > start:
                total += event.usd_per_hr * (end - start) / 3600
        totals[box] = total
    return totals


def spend_series(events: Iterable[Event], now: float, points: int = 60
                 ) -> list[tuple[float, float]]:
    """Cumulative fleet spend at `points` evenly spaced times, for the cost screen's plot."""
    events = sorted(events, key=lambda e: e.t)
    if not events:
        return []
    start = events[0].t
    if now <= start:
        return [(start, 0.0)]
    step = (now - start) / max(points - 1, 1)
    times = [start + i * step for i in range(points)]
    return [(t, sum(accrued([e for e in events if e.t <= t], t).values())) for t in times]


# --- alarms ----------------------------------------------------------------


def idle_since(prev: float | None, billed_running: bool, progressing: bool,
               gpu_util_max: float | None, now: float) -> float | None:
    """When this box started burning money idle (None while it is not idle).

    Idle: billed as running, no run making progress, and GPUs under 5% (or no
    GPU reading at all, which cannot prove the box busy).
    """
    busy_gpu = gpu_util_max is not None and gpu_util_max >= IDLE_GPU_PCT
    if not billed_running or progressing or busy_gpu:
        return None
    return prev if prev is not None else now


def budget_level(spent: float, budget: float | None) -> str | None:
    """None under 80% (or without a budget), "warning" from 80%, "alarm" from 100%."""
    if budget is None or budget <= 0:
        return None
    if spent >= budget:
        return "alarm"
    if spent >= BUDGET_WARN * budget:
        return "warning"
    return None
