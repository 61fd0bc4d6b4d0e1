"""The `costs` command's output: the JSON document (schema gpurent.costs/1) and a table.

Per box and for the fleet: the billed parts (running, stopped, idle, unseen, after the
last run), and from the ledger's gpu_busy records `gpu_busy_pct`, `gpu_idle_usd` (the
running money x (1 - busy)), `gpu_busy_covered_s` and `gpu_busy_billed_s`: null where no
meter recorded the box's GPUs ("not measured", never 0 %). docs/commands.md is the
reference."""

from __future__ import annotations

from typing import Any

from tui.model.bill import BoxBill, CostsReport, GpuBusy, Spend
from tui.model.busy import coverage_words
from tui.model.cost import usd
from tui.model.status_doc import iso

SCHEMA = "gpurent.costs/1"
PARTS = ("running", "stopped", "idle", "unseen", "after_last_run")


def _spend(spend: Spend) -> dict[str, float]:
    return {"hours": round(spend.hours, 4), "usd": round(spend.usd, 6)}


def fleet_gpu(report: CostsReport) -> GpuBusy | None:
    """The configured boxes' busy records together, beside their running time and money
    billed; None when no box has one."""
    measured = [b.gpu for b in report.boxes if b.gpu is not None]
    if not measured:
        return None
    return GpuBusy(sum(g.covered_s for g in measured), sum(g.busy_s for g in measured),
                   sum(g.billed_s for g in measured), sum(g.billed_usd for g in measured))


def fleet_idle_usd(report: CostsReport) -> float | None:
    """The measured boxes' idle GPU money summed (each box's own busy share of its own
    billing, not the fleet's mean share of the fleet's)."""
    measured = [b.gpu for b in report.boxes if b.gpu is not None]
    return sum(g.idle_usd for g in measured) if measured else None


def _gpu(gpu: GpuBusy | None, idle: float | None = None) -> dict[str, float | None]:
    """gpu_busy_pct, gpu_idle_usd, gpu_busy_covered_s and gpu_busy_billed_s; null (never
    0 %) unmeasured."""
    if gpu is None:
        return {"gpu_busy_pct": None, "gpu_idle_usd": None, "gpu_busy_covered_s": 0.0,
                "gpu_busy_billed_s": None}
    return {"gpu_busy_pct": round(gpu.pct, 1),
            "gpu_idle_usd": round(gpu.idle_usd if idle is None else idle, 6),
            "gpu_busy_covered_s": round(gpu.covered_s, 1),
            "gpu_busy_billed_s": round(gpu.billed_s, 1)}


def bill_document(bill: BoxBill) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": bill.box, "state": bill.state, "from": iso(bill.start),
                           "until": iso(bill.end)}
    for part in PARTS:
        doc[part] = _spend(getattr(bill, part))
    doc.update(_gpu(bill.gpu))
    doc["last_run_ended_at"] = iso(bill.last_run_ended_at)
    doc["total_usd"] = round(bill.usd, 6)
    return doc


def costs_document(report: CostsReport) -> dict[str, Any]:
    fleet: dict[str, Any] = {part: _spend(report.total(part)) for part in PARTS}
    fleet.update(_gpu(fleet_gpu(report), fleet_idle_usd(report)))
    fleet["total_usd"] = round(report.usd, 6)
    return {
        "schema": SCHEMA,
        "since": iso(report.since),
        "until": iso(report.until),
        "boxes": [bill_document(b) for b in report.boxes],
        "fleet": fleet,
        "not_in_config": [{**bill_document(b),
                           "may_still_bill_usd_per_hr": b.may_still_bill_usd_per_hr}
                          for b in report.removed],
    }


def _cell(spend: Spend) -> str:
    return f"{spend.hours:7.1f} h {usd(spend.usd):>9}"


def _gpu_cell(gpu: GpuBusy | None, idle: float | None = None) -> str:
    if gpu is None:
        return f"{'not measured':>19}"
    return f"{gpu.pct:5.1f} % {usd(gpu.idle_usd if idle is None else idle):>11}"


def coverage_note(name: str, gpu: GpuBusy | None) -> str | None:
    """`box: GPU busy over 56 s of 22 min billed`: how thin the sample behind the figure is."""
    if gpu is None:
        return None
    return f"{name}: GPU busy {coverage_words(gpu.covered_s, gpu.billed_s)}"


def costs_table(report: CostsReport) -> str:
    """Per box: running, stopped, idle and after-last-run hours and dollars, how busy its
    GPUs were and what their idle share cost; the fleet's sum."""
    since = iso(report.since) or "the first entry"
    out = [f"costs from {since} until {iso(report.until)} (UTC), from the ledger",
           f"{'box':<20} {'running':>19} {'stopped':>19} {'of it idle':>19} "
           f"{'after last run':>19} {'GPU busy, idle $':>19} {'total':>10}"]

    def row(name: str, running: Spend, stopped: Spend, idle: Spend, after: Spend,
            gpu: GpuBusy | None, total: float, gpu_idle: float | None = None) -> str:
        return (f"{name[:20]:<20} {_cell(running)} {_cell(stopped)} {_cell(idle)} "
                f"{_cell(after)} {_gpu_cell(gpu, gpu_idle)} {usd(total):>10}")

    for bill in report.boxes:
        out.append(row(bill.box, bill.running, bill.stopped, bill.idle, bill.after_last_run,
                       bill.gpu, bill.usd))
    out.append(row("fleet", report.total("running"), report.total("stopped"),
                   report.total("idle"), report.total("after_last_run"), fleet_gpu(report),
                   report.usd, fleet_idle_usd(report)))
    unseen = report.total("unseen")
    notes = ["idle: billed as running while no run progressed; after last run: everything "
             "billed after a box's last run ended (money a stop or destroy would have saved); "
             "GPU busy: the driver's busy average over the seconds a meter watched, and "
             "idle $ = the running money billed x (1 - busy), those seconds standing for the "
             "whole (not measured: no meter recorded it)"]
    notes += [n for n in (coverage_note(b.box, b.gpu) for b in report.boxes) if n]
    if unseen.hours:
        notes.append(f"{unseen.hours:.1f} h ({usd(unseen.usd)}) billed as running while the "
                     "box could not be looked at: neither idle nor busy for sure")
    notes.append("a box still billing is counted up to now at its last observed rate; "
                 "`gpurent-tui status` looks again")
    for bill in report.removed:
        note = (f"{bill.box}: not in the config; its history until {iso(bill.end)}, when a "
                f"meter last watched it: {usd(bill.usd)} (counted in no total)")
        if bill.may_still_bill_usd_per_hr is not None:
            note += (f"; not watched since, it was billing then: may still be billing "
                     f"{usd(bill.may_still_bill_usd_per_hr)}/hr (check its provider, or put "
                     "it back in the config)")
        notes.append(note)
    out.extend(notes)
    return "\n".join(out)
