"""The `status` command's output: the JSON document (schema gpurent.status/1) and a table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tui.model.box import BoxState, Connection
from tui.model.runs import RunState, format_age

SCHEMA = "gpurent.status/1"


def iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def run_document(run: RunState) -> dict[str, Any]:
    return {
        "path": run.path,
        "name": run.name,
        "health": str(run.health),
        "reason": run.reason,
        "state": run.state,
        "current_epoch": run.current_epoch,
        "total_epochs": run.total_epochs,
        "eta_seconds": run.eta_seconds,
        "mean_epoch_seconds": run.mean_epoch_seconds,
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
    }


def box_document(box: BoxState) -> dict[str, Any]:
    return {
        "name": box.name,
        "connection": str(box.connection),
        "error": box.error,
        "box_time": iso(box.box_time),
        "last_ok_at": iso(box.last_ok_at),
        "gpus": [
            {"index": g.index, "name": g.name, "util_pct": g.util_pct,
             "mem_used_mib": g.mem_used_mib, "mem_total_mib": g.mem_total_mib,
             "temp_c": g.temp_c, "power_w": g.power_w}
            for g in box.gpus],
        "gpu_note": box.gpu_note,
        "disks": [
            {"root": d.root, "total_bytes": d.total, "used_bytes": d.used,
             "free_bytes": d.free, "used_pct": round(d.used_pct, 1)}
            for d in box.disks],
        "problems": [*box.root_problems, *box.notices],
        "truncated": box.truncated,
        "runs": [run_document(r) for r in box.runs],
    }


def status_document(boxes: list[BoxState], generated_at: float) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "generated_at": iso(generated_at),
        "boxes": [box_document(b) for b in boxes],
    }


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _run_line(run: RunState) -> str:
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
    return line


def status_table(boxes: list[BoxState], now: float) -> str:
    """The readable form of `status`: a block per box, a line per run."""
    out: list[str] = []
    for box in boxes:
        head = f"{box.name}  [{box.connection}]"
        if box.gpus:
            utils = " ".join(f"{g.util_pct:.0f}%" if g.util_pct is not None else "?"
                             for g in box.gpus)
            head += f"  {len(box.gpus)} GPU: {utils}"
        elif box.gpu_note:
            head += f"  ({box.gpu_note})"
        for disk in box.disks:
            head += f"  disk {disk.root} {disk.used_pct:.0f}%"
        out.append(head)
        if box.connection is not Connection.OK:
            out.append(f"  ! {box.error}")
            age = box.data_age(now)
            if age is not None:
                out.append(f"  (data below is {format_age(age)} old)")
        for problem in (*box.root_problems, *box.notices):
            out.append(f"  ! {problem}")
        if not box.runs and box.connection is Connection.OK:
            out.append("  no runs found under the runs roots")
        out.extend(_run_line(run) for run in box.runs)
    return "\n".join(out)
