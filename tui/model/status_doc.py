"""The `status` command's output: the JSON document (schema gpurent.status/1) and a table."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tui.model.box import BoxState, Connection
from tui.model.busy import busy_fields, coverage_words
from tui.model.cost import UNKNOWN_DISK_RATE, RunCost, percent_words, usd
from tui.model.guard import PushRecord
from tui.model.meter import BoxCost, FleetCost
from tui.model.rest import rest_document, rest_words
from tui.model.runs import Health, RunState, folder_words, format_age
from tui.model.serverless_doc import (
    Entry,
    money_document,
    money_words,
    serverless_document,
    serverless_lines,
    serverless_money,
)
from tui.model.sizing import DiskProjection, project_disk, projection_document
from tui.model.throughput import UnitCost, unit_words
from tui.model.unpushed import AtStake, at_stake, box_timeline, rate_share
from tui.model.watchdog import guard_document
from tui.model.watchdog_silence import guard_reading, likely_fired, likely_fired_document

SCHEMA = "gpurent.status/1"


def iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def _money(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 6)


def run_document(run: RunState, cost: RunCost | None = None,
                 stake: AtStake | None = None,
                 unit: UnitCost | None = None) -> dict[str, Any]:
    """`unit`: the run's throughput and unit costs, and the money billed over its training
    span, of which `gpu_idle_usd` is the unused GPU share."""
    figures = unit.to_json() if unit is not None else {
        "images_per_second": None, "usd_per_epoch": None, "usd_per_1k_images": None}
    return {
        "path": run.shown_path,
        "name": run.name,
        "health": str(run.health),
        "reason": run.reason,
        "state": run.state,
        "current_epoch": run.current_epoch,
        "total_epochs": run.total_epochs,
        "eta_seconds": run.eta_seconds,
        "eta_method": run.pace.method if run.eta_seconds is not None else None,
        "mean_epoch_seconds": run.mean_epoch_seconds,
        "epoch_seconds": run.epoch_seconds,
        "train_loss": run.train_loss,
        "loss_history": run.loss_history,
        "best_metric": run.best_metric,
        "best_metric_name": run.best_metric_name,
        "best_epoch": run.best_epoch,
        "updated_at": run.updated_at,
        "pid": run.pid,
        "pid_alive": run.pid_alive,
        "error": run.error,
        "problems": list(run.problems),
        "weights": [{"name": w.name, "size": w.size, "mtime": w.mtime} for w in run.weights],
        "cost_per_epoch_usd": _money(cost.per_epoch_usd) if cost else None,
        "cost_to_finish_usd": _money(cost.to_finish_usd) if cost else None,
        # what a crash would cost now: epochs since the last verified push, in GPU money
        "unpushed_epochs": stake.epochs if stake else None,
        "unpushed_usd": _money(stake.usd) if stake else None,
        "last_verified_push": iso(stake.pushed_at) if stake else None,
        # the box's GPUs while this run progressed: the driver's busy average, integrated;
        # the idle share of what the box billed over the run's training span
        **busy_fields(run.busy, unit.billed_usd if unit is not None else None),
        **figures,
        "training_images": run.dataset.images if run.dataset else None,
        "unit_cost_note": (unit.note or None) if unit is not None else None,
    }


def cost_document(cost: BoxCost | None) -> dict[str, Any] | None:
    if cost is None:
        return None
    rate = cost.rate_now
    stopped = cost.rates.stopped
    return {
        "state": cost.rates.state,
        "usd_per_hr": _money(rate.usd_per_hr) if rate else None,
        "rate_source": rate.source if rate else None,
        "billed_since": iso(cost.billing.t) if cost.billing else None,
        "maybe_usd_per_hr": _money(cost.maybe_usd_per_hr),
        "doubt": cost.doubt,
        "stopped_usd_per_hr": _money(stopped.usd_per_hr) if stopped else None,
        "hours_per_month": cost.rates.hours_per_month,
        "accrued_usd": _money(cost.accrued_usd),
        "today_usd": _money(cost.today_usd),
        "saving_pct": _money(cost.rates.saving_pct),
        "break_even_hours": _money(cost.rates.break_even_hours),
        "idle_since": iso(cost.idle_since),
        "idle_alarm": cost.idle_alarm,
        "idle_usd": _money(cost.idle_usd) if cost.idle_since is not None else None,
        "idle_reason": cost.idle_reason if cost.idle_since is not None else None,
        "gpu_busy_pct": None if cost.gpu_busy_pct is None else round(cost.gpu_busy_pct, 1),
        "gpu_idle_usd": _money(cost.gpu_idle_usd),
        "gpu_busy_covered_s": round(cost.gpu_busy_covered_s, 1),
        "gpu_busy_billed_s": None if cost.gpu_busy_billed_s is None
        else round(cost.gpu_busy_billed_s, 1),
        "budget_usd": cost.budget_usd,
        "budget_level": cost.budget_level,
        "provider_error": cost.provider_error,
    }


def disk_projection(box: BoxState, cost: BoxCost | None) -> DiskProjection:
    """Will the box's disk hold its running runs to the end (and what an oversized one costs)."""
    stopped = cost.rates.stopped if cost is not None else None
    billed = cost.rates.disk_gb if cost is not None else None
    return project_disk(box, stopped_usd_per_hr=stopped.usd_per_hr if stopped else None,
                        billed_disk_gb=billed,
                        billed_by=cost.rates.disk_gb_from if cost is not None else "config")


def _stake(run: RunState, box: BoxState, cost: BoxCost | None,
           pushes: Mapping[str, PushRecord] | None) -> AtStake | None:
    running = sum(r.health is Health.RUNNING for r in box.runs)
    return at_stake(run, (pushes or {}).get(run.path), rate_share(run, cost, running),
                    box_timeline(box, cost))


def _guard(box: BoxState, now: float | None) -> dict[str, Any] | None:
    """The guard's part: its state, and the panel's reading of it (a silent box's watchdog
    that most likely fired: `likely_fired`)."""
    doc = guard_document(box.guard, box.box_time)
    if doc is None:
        return None
    if now is not None:
        reading = guard_reading(box, now)
        if reading is not None:
            doc["summary"], doc["level"] = reading
    doc["likely_fired"] = likely_fired_document(box)
    return doc


def box_busy_words(cost: BoxCost) -> str | None:
    """`GPU 17% busy over 14 s of 2.0 h billed ($5.79 idle)`: the figure, how thin the
    sample behind it is, and the unused share of the card's running money."""
    if cost.gpu_busy_pct is None:
        return None
    line = f"GPU {cost.gpu_busy_pct:.0f}% busy " + coverage_words(cost.gpu_busy_covered_s,
                                                                    cost.gpu_busy_billed_s)
    return line + (f" ({usd(cost.gpu_idle_usd)} idle)" if cost.gpu_idle_usd is not None else "")


def box_document(box: BoxState, cost: BoxCost | None = None,
                 pushes: Mapping[str, PushRecord] | None = None,
                 now: float | None = None) -> dict[str, Any]:
    return {
        "name": box.name,
        # "stopped" / "destroyed": not answering because we stopped or destroyed it on
        # purpose (`rest` says by whom and when); otherwise how the last look went.
        "connection": box.rest.kind if box.rest is not None else str(box.connection),
        "rest": rest_document(box.rest),
        "error": box.error,
        "box_time": iso(box.box_time),
        "last_ok_at": iso(box.last_ok_at),
        "gpus": [
            {"index": g.index, "name": g.name, "util_pct": g.util_pct,
             "mem_used_mib": g.mem_used_mib, "mem_total_mib": g.mem_total_mib,
             "temp_c": g.temp_c, "power_w": g.power_w}
            for g in box.gpus],
        "gpu_note": box.gpu_note,
        "gpu_busy_now_pct": round(box.gpu_busy.pct, 1) if box.gpu_busy else None,
        **busy_fields(box.busy, cost.gpu_busy_billed_usd if cost is not None else None),
        "disks": [
            {"root": d.root, "mount": d.mount, "device": d.device, "fstype": d.fstype,
             "total_bytes": d.total, "used_bytes": d.used, "free_bytes": d.free,
             "used_pct": d.percent}
            for d in box.disks],
        "disk_projection": projection_document(disk_projection(box, cost)),
        "problems": [*box.root_problems, *box.notices],
        "truncated": box.truncated,
        "cost": cost_document(cost),
        "guard": _guard(box, now),
        "runs": [run_document(r, cost.runs.get(r.path) if cost else None,
                              _stake(r, box, cost, pushes),
                              cost.units.get(r.path) if cost else None)
                 for r in box.runs],
    }


def fleet_document(cost: FleetCost | None) -> dict[str, Any] | None:
    """The fleet's money: its burn, spend and budget (None before the first money picture)."""
    if cost is None:
        return None
    return {"usd_per_hr": _money(cost.usd_per_hr), "accrued_usd": _money(cost.accrued_usd),
            "today_usd": _money(cost.today_usd), "to_finish_usd": _money(cost.to_finish_usd),
            "budget_usd": cost.budget_usd, "budget_level": cost.budget_level,
            "maybe_usd_per_hr": _money(cost.maybe_usd_per_hr),
            "doubts": list(cost.doubts), "unpriced": list(cost.unpriced)}


def status_document(boxes: list[BoxState], generated_at: float,
                    cost: FleetCost | None = None,
                    pushes: Mapping[str, Mapping[str, PushRecord]] | None = None,
                    serverless: Sequence[Entry] = ()) -> dict[str, Any]:
    """The whole document; `pushes`: per box, each run's last verified push (the journal);
    `serverless`: each [[serverless]] entry with its last poll (docs/serverless.md)."""
    fleet = fleet_document(cost)
    if fleet is not None and serverless:
        fleet["serverless_usd"] = money_document(serverless_money(serverless, generated_at))
    return {
        "schema": SCHEMA,
        "generated_at": iso(generated_at),
        "fleet": fleet,
        "boxes": [box_document(b, cost.boxes.get(b.name) if cost else None,
                               (pushes or {}).get(b.name), generated_at) for b in boxes],
        "serverless": [serverless_document(entry, state, generated_at, run_document)
                       for entry, state in serverless],
    }


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _run_line(run: RunState, unit: UnitCost | None = None) -> str:
    epoch = f"{run.current_epoch if run.current_epoch is not None else '-'}/" \
            f"{run.total_epochs if run.total_epochs is not None else '?'}"
    eta = format_age(run.eta_seconds) if run.eta_seconds is not None else "-"
    best = "-"
    if run.best_metric is not None:
        best = f"{run.best_metric_name or 'best'} {run.best_metric:.4f}"
        if run.best_epoch is not None:
            best += f" @{run.best_epoch}"
    line = (f"  {run.name:<28} {run.health:<10} epoch {epoch:<9} eta {eta:<7} "
            f"loss {_num(run.train_loss):<8} {best}")
    if run.health not in ("running", "completed"):
        line += f"\n      {run.reason}"
    words = unit_words(unit)
    if words:
        line += f"\n      {words}"
    folders = folder_words(run.weight_dirs, run.weight_dirs_more)
    if folders:
        line += f"\n      ! {folders}: a destroy would lose what it holds"
    return line


def _money_line(cost: BoxCost, advice: bool = True) -> str:
    """`advice`: whether stop-vs-destroy arithmetic applies (never to a destroyed box)."""
    rate = cost.rate_now
    if rate is None:
        if cost.maybe_usd_per_hr is None:
            return "  cost: no rate known (set [box.pricing] running_usd_per_hr)"
        line = (f"  cost: nothing metered yet (not observed), "
                f"{usd(cost.maybe_usd_per_hr)}/hr if running")
    elif rate.source == "unknown":
        line = f"  cost: {cost.rates.state}: {UNKNOWN_DISK_RATE}, spent {usd(cost.accrued_usd)}"
    else:
        line = f"  cost: {usd(rate.usd_per_hr)}/hr {cost.rates.state} ({rate.source})"
        line += f", spent {usd(cost.accrued_usd)}"
    gpu = box_busy_words(cost)
    if gpu:
        line += f", {gpu}"
    stopped = cost.rates.stopped
    if stopped is not None and cost.rates.state not in ("stopped", "destroyed"):
        line += f", stopped {usd(stopped.usd_per_hr)}/hr"
        if cost.rates.saving_pct is not None:
            line += f" ({percent_words(cost.rates.saving_pct)} less)"
    if advice and cost.rates.state != "destroyed" and cost.rates.break_even_hours is not None \
            and math.isfinite(cost.rates.break_even_hours):
        line += f", stop pays if back within {cost.rates.break_even_hours:.1f} h"
    if cost.idle_alarm:
        line += f"\n  ! IDLE: billed as running, {cost.idle_reason}: burned {usd(cost.idle_usd)}"
    if cost.budget_level and cost.budget_usd is not None:
        line += (f"\n  ! budget {cost.budget_level}: spent {usd(cost.accrued_usd)} of "
                 f"{usd(cost.budget_usd)}")
    if cost.doubt:
        line += f"\n  ? {cost.doubt}"
    return line


def fleet_money_line(cost: FleetCost) -> list[str]:
    """The fleet's burn and spend, its budget alarm, and what may be going out unmetered."""
    lines = [f"fleet: {usd(cost.usd_per_hr)}/hr now, spent {usd(cost.accrued_usd)} "
             f"({usd(cost.today_usd)} today), {usd(cost.to_finish_usd)} to finish"]
    if cost.maybe_usd_per_hr:
        lines[0] += f", +{usd(cost.maybe_usd_per_hr)}/hr if the boxes not observed yet are running"
    if cost.budget_level is not None and cost.budget_usd is not None:
        lines.append(f"! fleet budget {cost.budget_level}: spent {usd(cost.accrued_usd)} of "
                     f"{usd(cost.budget_usd)} "
                     f"({percent_words(100 * cost.accrued_usd / cost.budget_usd)})")
    return lines


def status_table(boxes: list[BoxState], now: float, cost: FleetCost | None = None,
                 serverless: Sequence[Entry] = ()) -> str:
    """The readable form of `status`: the fleet's burn, a block per box, a line per run,
    then a block per serverless app."""
    out: list[str] = []
    if cost is not None:
        out.extend(fleet_money_line(cost))
    if serverless:
        out.append(money_words(serverless_money(serverless, now)))
    for box in boxes:
        head = f"{box.name}  [{box.rest.kind if box.rest else box.connection}]"
        if box.gpus:
            utils = " ".join(f"{g.util_pct:.0f}%" if g.util_pct is not None else "?"
                             for g in box.gpus)
            head += f"  {len(box.gpus)} GPU: {utils}"
        elif box.gpu_note:
            head += f"  ({box.gpu_note})"
        for disk in box.disks:
            head += f"  disk {disk.root} {disk.percent}% of {disk.where}"
        out.append(head)
        box_cost = cost.boxes.get(box.name) if cost is not None else None
        if box.rest is not None:
            stopped = box_cost.rates.stopped if box_cost is not None else None
            disk_rate = stopped.usd_per_hr if stopped else None
            out.append(f"  · {rest_words(box.rest, iso(box.rest.at), disk_rate)}")
        elif box.connection is not Connection.OK and likely_fired(box) is not None:
            out.append(f"  · not answering: {box.error}")  # its watchdog's stop, expected
        elif box.connection is not Connection.OK:
            out.append(f"  ! {box.error}")
            age = box.data_age(now)
            if age is not None:
                out.append(f"  (data below is {format_age(age)} old)")
        if box_cost is not None:
            out.append(_money_line(box_cost, box.rest is None or box.rest.kind != "destroyed"))
            if box_cost.provider_error:
                out.append(f"  ! {box_cost.provider_error}")
        for problem in (*box.root_problems, *box.notices):
            out.append(f"  ! {problem}")
        reading = guard_reading(box, now)
        if reading is not None:
            words, level = reading
            out.append(f"  {'!' if level in ('bad', 'acted') else '·'} {words}")
        projection = disk_projection(box, box_cost)
        out.extend(f"  · disk at the runs' end: {fs.where} {fs.end_pct}%"
                   for fs in projection.filesystems if not fs.fills)  # a fill is warned below
        for warning in projection.warnings:
            out.append(f"  {'!' if warning.severity == 'warning' else '·'} {warning.message}")
        if not box.runs and box.connection is Connection.OK:
            out.append("  no runs found under the runs roots")
        out.extend(_run_line(run, box_cost.units.get(run.path) if box_cost else None)
                   for run in box.runs)
    for entry, state in serverless:
        out.extend(serverless_lines(entry, state, now, _run_line))
    return "\n".join(out)
