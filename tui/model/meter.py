"""The cost meter: one immutable picture of what the fleet costs now, has cost, will cost.

Pure: folds the boxes' snapshots, the providers' facts and the ledger's
events at one instant. The I/O around it (polling providers, appending to
the ledger) lives in tui.providers.meter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.model.cost import (
    BoxRates,
    Event,
    InstanceFacts,
    Rate,
    RunCost,
    accrued,
    box_rates,
    budget_level,
    idle_since,
    run_cost,
)
from tui.model.runs import Health


@dataclass(frozen=True)
class BoxCost:
    name: str
    rates: BoxRates
    accrued_usd: float
    today_usd: float
    runs: Mapping[str, RunCost] = field(default_factory=dict)  # by run path
    idle_since: float | None = None
    idle_usd: float = 0.0
    idle_alarm: bool = False
    budget_usd: float | None = None
    budget_level: str | None = None
    provider_error: str | None = None

    @property
    def rate_now(self) -> Rate | None:
        return self.rates.now

    @property
    def to_finish_usd(self) -> float:
        return sum(c.to_finish_usd or 0.0 for c in self.runs.values())


@dataclass(frozen=True)
class FleetCost:
    boxes: Mapping[str, BoxCost]
    usd_per_hr: float
    accrued_usd: float
    today_usd: float
    to_finish_usd: float
    budget_usd: float | None = None
    budget_level: str | None = None
    unpriced: tuple[str, ...] = ()  # boxes with no known rate


def meter(fleet: FleetConfig, boxes: Iterable[BoxState], facts: Mapping[str, InstanceFacts],
          events: Iterable[Event], idle_prev: Mapping[str, float], now: float,
          day_start: float, provider_errors: Mapping[str, str] | None = None) -> FleetCost:
    """Everything the panel and `status --json` show about money, at `now`."""
    events = list(events)
    totals = accrued(events, now)
    today = accrued(events, now, since=day_start)
    states = {b.name: b for b in boxes}
    costs: dict[str, BoxCost] = {}
    unpriced: list[str] = []
    for box in fleet.boxes:
        rates = box_rates(box.provider, box.pricing, facts.get(box.name))
        if box.name not in facts and box.provider == "manual":
            rates = BoxRates("running", rates.running, rates.stopped, rates.hours_per_month,
                             rates.hours_per_month_source, rates.rebuild_usd, rates.can_stop)
        rate = rates.now
        if rate is None:
            unpriced.append(box.name)
        state = states.get(box.name)
        runs: dict[str, RunCost] = {}
        progressing = False
        gpu_max = None
        if state is not None:
            running = [r for r in state.runs if r.health is Health.RUNNING]
            progressing = bool(running)
            for run in running:
                cost = run_cost(rate.usd_per_hr if rate else None, len(running),
                                run.mean_epoch_seconds, run.eta_seconds)
                if cost is not None:
                    runs[run.path] = cost
            utils = [g.util_pct for g in state.gpus if g.util_pct is not None]
            gpu_max = max(utils) if utils else None
        billed_running = rates.state in ("running", "starting") and bool(
            rate and rate.usd_per_hr > 0)
        since = idle_since(idle_prev.get(box.name), billed_running, progressing, gpu_max, now)
        idle_usd = rate.usd_per_hr * (now - since) / 3600 if since is not None and rate else 0.0
        spent = totals.get(box.name, 0.0)
        costs[box.name] = BoxCost(
            name=box.name, rates=rates, accrued_usd=spent, today_usd=today.get(box.name, 0.0),
            runs=runs, idle_since=since, idle_usd=idle_usd,
            idle_alarm=since is not None and now - since >= fleet.idle_minutes * 60,
            budget_usd=box.budget_usd, budget_level=budget_level(spent, box.budget_usd),
            provider_error=(provider_errors or {}).get(box.name))
    accrued_total = sum(totals.values())
    return FleetCost(
        boxes=costs,
        usd_per_hr=sum(c.rate_now.usd_per_hr for c in costs.values() if c.rate_now),
        accrued_usd=accrued_total,
        today_usd=sum(today.values()),
        to_finish_usd=sum(c.to_finish_usd for c in costs.values()),
        budget_usd=fleet.budget_usd,
        budget_level=budget_level(accrued_total, fleet.budget_usd),
        unpriced=tuple(unpriced),
    )
