"""Unpushed money priced at the time each epoch ran: the rate billed then (the ledger's),
shared between the runs that trained then, not today's rate over today's runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from support.fleets import DATA

from tui.model.box import BoxState, fold_answer
from tui.model.config import parse_config
from tui.model.cost import Event
from tui.model.meter import meter
from tui.model.status_doc import box_document

T0 = 1_800_000_000.0  # when the first run started (box and panel clocks agree)
EPOCH = 1200.0        # 20 minutes an epoch
COMPLETED = json.loads((DATA / "yolox_completed" / "status.json").read_text())


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def run(name: str, started: float, epochs: int, *, running_at: float | None = None
        ) -> dict[str, Any]:
    """A run of `epochs` epochs of EPOCH seconds from `started`: completed, or (seen at
    `running_at`) still training its next epoch."""
    running = running_at is not None
    updated = running_at - 5 if running_at is not None else started + epochs * EPOCH
    status = {**COMPLETED, "state": "running" if running else "completed",
              "started_at": iso(started), "updated_at": iso(updated),
              "current_epoch": epochs + (1 if running else 0),
              "completed_epochs": epochs, "total_epochs": 100 if running else epochs,
              "start_epoch": 1, "pid": 1}
    text = "".join(json.dumps({"epoch": e, "time": EPOCH, "train/loss": 1.0}) + "\n"
                   for e in range(1, epochs + 1))
    return {"path": f"/root/runs/{name}", "root": "/root/runs", "name": name, "s_sig": name,
            "w_sig": "w", "status": status, "pid_alive": running,
            "metrics": {"text": text, "off": len(text), "id": f"1:{name}", "head": "h"},
            "log": {"text": "", "off": 0, "id": f"2:{name}"}, "weights": []}


def config(rate: float) -> str:
    return f"""
[[box]]
name = "box-c"
host = "c.example.org"
[box.pricing]
running_usd_per_hr = {rate}
"""


def box_at(now: float, runs: list[dict[str, Any]]) -> BoxState:
    return fold_answer(BoxState(name="box-c"), {"v": 1, "time": now, "runs": runs,
                                                "gpus": {"absent": True}, "disks": []}, now)


def unpushed(runs: list[dict[str, Any]], ledger: list[Event], rate: float, now: float,
             name: str = "a") -> float | None:
    """The run's unpushed dollars as `status --json` says them (the panel's line and the
    run screen ask the same function)."""
    box = box_at(now, runs)
    cost = meter(parse_config(config(rate), "fleet.toml"), [box], {}, ledger, {}, now,
                 now - 86400).boxes["box-c"]
    document = box_document(box, cost, {})
    shown = next(r for r in document["runs"] if r["name"] == name)
    value = shown["unpushed_usd"]
    return round(value, 4) if value is not None else None


def test_past_epochs_keep_the_rate_billed_when_they_ran() -> None:
    """Three epochs at $1.20/hr, then the config's rate goes to $1.50: the three epochs
    still cost an hour at $1.20 (before: $1.50, today's rate times their time)."""
    runs = [run("a", T0, 3)]
    ledger = [Event(T0 - 60, "box-c", "running", 1.20, "config"),
              Event(T0 + 3 * EPOCH + 300, "box-c", "running", 1.50, "config")]
    now = T0 + 3 * EPOCH + 600
    assert unpushed(runs, ledger, 1.50, now) == 1.20
    # later, and after a restart (the same ledger read again), the same figure
    assert unpushed(runs, ledger, 1.50, now + 7200) == 1.20
    # an epoch that ran after the change costs the new rate
    later = [run("b", T0 + 3 * EPOCH + 600, 1)]
    assert unpushed(later, ledger, 1.50, now + 7200, "b") == 0.5


def test_a_finished_runs_money_is_fixed_whatever_trains_after_it() -> None:
    """A completed run's figure does not halve when two more runs start on its box (the
    demo's $0.38 / $0.76): its epochs ran alone, so they cost the whole box."""
    ledger = [Event(T0 - 60, "box-c", "running", 1.20, "config")]
    now = T0 + 4 * EPOCH
    alone = unpushed([run("a", T0, 3)], ledger, 1.20, now)
    crowded = unpushed([run("a", T0, 3), run("b", T0 + 3 * EPOCH + 60, 0, running_at=now),
                        run("c", T0 + 3 * EPOCH + 60, 0, running_at=now)], ledger, 1.20, now)
    assert alone == crowded == 1.20


def test_epochs_that_shared_the_box_cost_their_share_then() -> None:
    """Two runs that trained side by side split the box's rate for those hours, and keep
    that split once one of them has finished."""
    ledger = [Event(T0 - 60, "box-c", "running", 1.20, "config")]
    both = [run("a", T0, 3), run("b", T0, 3)]
    assert unpushed(both, ledger, 1.20, T0 + 4 * EPOCH) == 0.60
    assert unpushed(both, ledger, 1.20, T0 + 40 * EPOCH) == 0.60


def test_without_a_ledger_the_running_rate_prices_the_epochs() -> None:
    """A box metered only since after the run finished: its rate now prices the epochs,
    still shared as the runs trained then."""
    now = T0 + 4 * EPOCH
    ledger = [Event(now - 30, "box-c", "running", 1.50, "config")]
    runs = [run("a", T0, 3), run("b", now - 100, 0, running_at=now)]
    assert unpushed(runs, ledger, 1.50, now) == 1.50
