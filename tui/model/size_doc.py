"""The `size --json` document (schema gpurent.size/1): the disk to rent for one job."""

from __future__ import annotations

from typing import Any

from tui.model.sizing import DiskPlan

SCHEMA = "gpurent.size/1"


def size_document(plan: DiskPlan, rate: float | None, hours: float | None) -> dict[str, Any]:
    """`rate` ($ per GB-month) and `hours` (the provider's hours per month) price the
    stopped disk; without either its hourly cost is null."""
    return {"schema": SCHEMA, "data_bytes": plan.data_bytes,
            "checkpoint_bytes": plan.checkpoint_bytes, "checkpoints": plan.checkpoints,
            "save_period": plan.save_period,
            "logs_bytes": plan.logs_bytes, "system_bytes": plan.system_bytes,
            "headroom_bytes": plan.headroom_bytes, "needed_bytes": plan.needed_bytes,
            "fetch_peak_bytes": plan.fetch_peak_bytes, "allocate_gb": plan.allocate_gb,
            "stopped_usd_per_hr": plan.stopped_usd_per_hr(rate, hours)
            if rate is not None and hours is not None else None}
