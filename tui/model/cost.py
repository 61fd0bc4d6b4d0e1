"""Money: rates, billing segments, projections, break-even, alarms. Pure arithmetic.

Rates come from the provider's API when it has one, else from the box's
config (which also overrides the API where the user set a figure). Every
figure carries where it came from, because a user deciding to stop or destroy
a box must know whether a number was billed, configured or computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tui.model.bill import RUNNING_STATES, Event, accrued, parse_record, spend_series
from tui.model.config import Pricing
from tui.model.instance import InstanceInfo

__all__ = ["Event", "accrued", "spend_series"]  # the history's types, where callers look

DEFAULT_HOURS_PER_MONTH = 730.0
PROVIDER_HOURS_PER_MONTH = {"vast": 720.0}  # Vast bills disk on a 720-hour month
RUNPOD_STOPPED_USD_PER_GB_MONTH = 0.20
IDLE_GPU_PCT = 5.0
BUDGET_WARN = 0.8


# A stopped box whose disk rate nobody gave: not "$0/hr", which reads as free.
UNKNOWN_DISK_RATE = ("what its disk bills is unknown "
                     "(set disk_gb and storage_usd_per_gb_month in [box.pricing])")


@dataclass(frozen=True)
class Rate:
    usd_per_hr: float
    source: str  # "api" | "config" | "computed"
    note: str = ""


@dataclass(frozen=True)
class BoxRates:
    """A box's rates in each state, and the stop-vs-destroy arithmetic."""

    state: str  # an InstanceState, or what the ledger says the box bills as
    running: Rate | None
    stopped: Rate | None
    hours_per_month: float
    hours_per_month_source: str
    rebuild_usd: float | None
    can_stop: bool = True
    disk_gb: float | None = None  # the disk the stopped rate bills, by the config or the API
    disk_gb_from: str = ""  # "config" or "provider": whose figure disk_gb is

    @property
    def now(self) -> Rate | None:
        """What the box bills in its state. Starting and stopping bill the running rate
        until the provider reads the new state: where unsure, money is going out."""
        if self.state == "destroyed":
            return Rate(0.0, "computed", "destroyed: nothing billed")
        if self.state == "stopped":
            return self.stopped or Rate(0.0, "unknown", f"stopped; {UNKNOWN_DISK_RATE}")
        if self.state in RUNNING_STATES:
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


def percent_words(value: float) -> str:
    """A share for a person: whole percents, except that 99.5% never reads "100%" and
    0.4% never reads "0%" (the difference is the money)."""
    if value >= 100 or value <= 0:
        return f"{value:.0f}%"
    whole = f"{value:.0f}"
    if whole in ("0", "100"):
        fine = f"{value:.1f}"
        if fine in ("0.0", "100.0"):
            return "<0.1%" if whole == "0" else ">99.9%"
        return f"{fine}%"
    return f"{whole}%"


def usd(value: float) -> str:
    """Dollars with the precision a rate or a total needs ($0.0694/hr, $12.40)."""
    if value == 0:
        return "$0"
    if 0 < abs(value) < 0.0001:
        return "<$0.0001" if value > 0 else "-<$0.0001"
    if abs(value) < 1:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def estimate_usd(value: float) -> str:
    """An estimated amount to the cent ($0.51, $37.96): its last digits are not known, and
    estimates side by side read alike; a rate keeps usd()'s precision."""
    if value == 0:
        return "$0"
    if 0 < abs(value) < 0.005:
        return "<$0.01" if value > 0 else "-<$0.01"
    return f"${value:,.2f}"


def stopped_usd_per_hr(disk_gb: float, usd_per_gb_month: float, hours_per_month: float) -> float:
    """Disk GB x storage $/GB-month / hours-per-month (the provider's convention)."""
    return disk_gb * usd_per_gb_month / hours_per_month


def box_rates(provider: str, pricing: Pricing | None, facts: InstanceInfo | None) -> BoxRates:
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
    disk_from = "config" if pricing.disk_gb is not None else "provider" if disk_gb else ""
    return BoxRates(state, running, stopped, hpm, hpm_source, pricing.rebuild_usd, can_stop,
                    disk_gb, disk_from)


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


# --- the ledger: billing segments (tui.model.bill holds the history) -------


def parse_event(record: Mapping[str, Any]) -> Event | None:
    """A ledger line as a billing segment; None for anything else (a mark, a bad line)."""
    parsed = parse_record(record)
    return parsed if isinstance(parsed, Event) else None


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
