"""How money reads on screen: the fleet's burn in the head strip, a line per box, a note per run."""

from __future__ import annotations

import math

from rich.text import Text

from tui.model.busy import BusyIntegral, coverage_words
from tui.model.cost import UNKNOWN_DISK_RATE, RunCost, percent_words, usd
from tui.model.meter import BoxCost, FleetCost
from tui.model.runs import format_age


def fleet_money(cost: FleetCost | None) -> Text:
    """`│ $5.48/hr · today $12.30 · to finish $3.10`, or nothing before any rate is known."""
    if cost is None or not any(c.rate_now or c.maybe_usd_per_hr for c in cost.boxes.values()):
        return Text()
    text = Text(" │ ", style="dim")
    text.append(f"{usd(cost.usd_per_hr)}/hr", style="bold")
    text.append(f" · today {usd(cost.today_usd)} · to finish {usd(cost.to_finish_usd)}")
    if cost.maybe_usd_per_hr:
        text.append(f" · +{usd(cost.maybe_usd_per_hr)}/hr not observed", style="yellow")
    if cost.budget_level is not None and cost.budget_usd is not None:
        style = "bold red" if cost.budget_level == "alarm" else "bold yellow"
        text.append(f" · budget {usd(cost.accrued_usd)}/{usd(cost.budget_usd)}", style=style)
    return text


def busy_note(busy: BusyIntegral | None, billed_usd: float | None,
              billed_s: float | None = None) -> str | None:
    """`GPU 17% busy over 14 s of 2.0 h billed ($5.79 idle)`: the driver's busy average,
    how much of the billed time it rests on, and the unused share of the money billed
    (`billed_usd` over `billed_s`); nothing before the first window."""
    pct = busy.pct if busy is not None else None
    if busy is None or pct is None:
        return None
    idle = busy.idle_usd(billed_usd)
    return (f"GPU {pct:.0f}% busy {coverage_words(busy.covered_s, billed_s)}"
            + (f" ({usd(idle)} idle)" if idle is not None else ""))


def box_money_line(cost: BoxCost | None, now: float, busy: BusyIntegral | None = None, *,
                   advice: bool = True) -> Text | None:
    """Rate now with its source, spent, how busy its GPUs were, the stopped rate, the
    saving and the verdict; alarms. `advice`: whether the stop-vs-destroy verdict applies
    (never to a destroyed box)."""
    if cost is None:
        return None
    rates = cost.rates
    rate = cost.rate_now
    text = Text()
    if rate is None and cost.maybe_usd_per_hr is not None:
        text.append(f"{usd(cost.maybe_usd_per_hr)}/hr if running", style="bold")
        text.append(" · nothing metered until it is observed", style="dim")
    elif rate is None:
        text.append("no rate known: set [box.pricing] running_usd_per_hr", style="dim")
    elif rate.source == "unknown":  # not $0: nobody said what the stopped disk bills
        text.append(f"{rates.state}: {UNKNOWN_DISK_RATE}", style="bold")
        text.append(f" · spent {usd(cost.accrued_usd)}")
    else:
        text.append(f"{usd(rate.usd_per_hr)}/hr", style="bold")
        text.append(f" {rates.state} ({rate.source})", style="dim")
        text.append(f" · spent {usd(cost.accrued_usd)}")
    gpu = busy_note(busy, cost.gpu_busy_billed_usd, cost.gpu_busy_billed_s)
    if gpu:
        text.append(f" · {gpu}")
    if rates.stopped is not None and rates.state not in ("stopped", "destroyed"):
        text.append(f" · stopped {usd(rates.stopped.usd_per_hr)}/hr", style="dim")
        if rates.saving_pct is not None:
            text.append(f" ({percent_words(rates.saving_pct)} less)", style="dim")
    advice = advice and rates.state != "destroyed"
    hours = rates.break_even_hours
    if advice and hours is not None and not math.isinf(hours):
        text.append(f" · stop pays if back within {hours:.1f} h", style="dim")
    elif advice and not rates.can_stop:
        text.append(" · cannot stop: destroy only", style="dim")
    if cost.idle_alarm and cost.idle_since is not None:
        text.append(f"\nIDLE {format_age(now - cost.idle_since)}: billed as running, "
                    f"{cost.idle_reason}: burned {usd(cost.idle_usd)} idle", style="bold red")
    if cost.budget_level is not None and cost.budget_usd is not None:
        style = "bold red" if cost.budget_level == "alarm" else "bold yellow"
        text.append(f"\nbudget {cost.budget_level}: spent {usd(cost.accrued_usd)} of "
                    f"{usd(cost.budget_usd)}", style=style)
    if cost.doubt:
        text.append(f"\n{cost.doubt}", style="yellow")
    if cost.provider_error:
        text.append(f"\n{cost.provider_error}", style="yellow")
    return text


def run_money(cost: RunCost | None) -> str | None:
    """`$0.08/epoch · $3.60 to finish (box rate ÷ 2 runs)`: a shared box says so."""
    if cost is None:
        return None
    parts = []
    if cost.per_epoch_usd is not None:
        parts.append(f"{usd(cost.per_epoch_usd)}/epoch")
    if cost.to_finish_usd is not None:
        parts.append(f"{usd(cost.to_finish_usd)} to finish")
    if cost.shared_by > 1 and parts:
        parts[-1] += f" (box rate ÷ {cost.shared_by} runs)"
    return " · ".join(parts) or None
