"""The bill reproduced: a day of a fleet's life, checked to the cent against a hand computation.

Loopback Vast and RunPod stand-ins, two manual boxes on real sshd, the
panel's own meter, ledger and actions (tui.actions.flows) on a fake clock:
running, a rate change, a stop and a start read back from the provider,
a destroy, a provider outage during which the pod was stopped at the
console, a manual stop read back only when the box stopped answering, two panel restarts,
a config edit and a box removed from the config.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fleets import DATA, box_entry, make_fleet
from support.provider_servers import RunPodServer, VastServer, runpod_pod, vast_instance
from support.sshd import KeyPair, Sshd

from tui.actions.flows import destroy, power
from tui.model.bill import costs_report
from tui.model.box import BoxState, fold_answer, fold_failure
from tui.model.box import Connection as Conn
from tui.model.config import FleetConfig
from tui.model.cost import percent_words
from tui.model.costs_doc import costs_document, costs_table
from tui.model.meter import FleetCost
from tui.providers.meter import CostMeter
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal
from tui.store.ledger import Ledger

H = 3600.0
T0 = 1_790_000_000.0  # 2026-09-21: the day starts here on the fake clock
RUNNING = json.loads((DATA / "yolox_running" / "status.json").read_text())
VAST_DISK = 250 * 0.20 / 720     # Vast's 720-hour month: $0.0694/hr
POD_DISK = 100 * 0.20 / 730      # RunPod: nothing better known than 730
LAB_DISK = 100 * 0.10 / 730      # a manual box's configured disk
VAST, POD, LAB, OLD = "vast-4090", "pod", "lab", "old"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


class Day:
    """The fake clock, the stand-ins and the boxes as the panel would see them."""

    def __init__(self, tmp_path: Path, lab: Sshd, old: Sshd, key: KeyPair) -> None:
        self.tmp_path = tmp_path
        self.now = T0
        self.vast = VastServer("vast-key", [vast_instance(
            111, start_date=T0 - 1 * H, storage_total_cost=None)])
        self.runpod = RunPodServer("runpod-key", [runpod_pod(
            "pod1", startedAt=iso(T0 - 0.5 * H))])
        self.vast.start()
        self.runpod.start()
        self.servers = {"lab": lab, "old": old}
        self.key = key
        self.ledger_path = tmp_path / "ledger.jsonl"
        self.journal = Journal(tmp_path / "journal.jsonl")
        self.vast_runs: list[dict[str, Any]] = []
        self.vast_up = True
        self.meter: CostMeter | None = None
        self.watchers: dict[str, BoxWatcher] = {}

    def clock(self) -> float:
        return self.now

    def config(self, old_rate: float | None) -> FleetConfig:
        closed = 1  # nobody listens on 127.0.0.1:1: a look at a rented box fails at once
        boxes = [
            {"name": VAST, "host": "127.0.0.1", "port": closed, "user": "root",
             "identity_file": str(self.key.private_path), "provider": "vast",
             "instance_id": "111", "pricing": {"rebuild_usd": 1.00}},
            {"name": POD, "host": "127.0.0.1", "port": closed, "provider": "runpod",
             "instance_id": "pod1"},
            box_entry(self.servers["lab"], self.key, LAB, runs_roots=[str(self.tmp_path)],
                      stop_command="true",
                      pricing={"running_usd_per_hr": 0.50, "disk_gb": 100,
                               "storage_usd_per_gb_month": 0.10}),
        ]
        if old_rate is not None:
            boxes.append(box_entry(self.servers["old"], self.key, OLD,
                                   runs_roots=[str(self.tmp_path)],
                                   pricing={"running_usd_per_hr": old_rate}))
        hosts = [s.known_hosts_line() for s in self.servers.values()]
        return make_fleet(self.tmp_path, boxes, known_hosts=hosts,
                          providers={"vast": {"base_url": self.vast.url},
                                     "runpod": {"base_url": self.runpod.url}})

    async def open_panel(self, old_rate: float | None) -> None:
        """A panel starts: a new meter over the ledger on disk, new SSH sessions."""
        await self.close_panel()
        fleet = self.config(old_rate)
        self.fleet = fleet
        self.meter = CostMeter(fleet, ledger=Ledger(self.ledger_path), clock=self.clock)
        self.watchers = {b.name: BoxWatcher(b, fleet, clock=self.clock)
                         for b in fleet.boxes if b.provider == "manual"}

    async def close_panel(self) -> None:
        if self.meter is not None:
            await self.meter.aclose()
        for watcher in self.watchers.values():
            await watcher.close()
        self.meter, self.watchers = None, {}

    def vast_state(self) -> BoxState:
        """The rented box as its probe would answer (box clock = panel clock here)."""
        box = BoxState(name=VAST)
        if not self.vast_up:
            return fold_failure(box, Conn.UNREACHABLE, "stopped", self.now)
        return fold_answer(box, {"v": 1, "time": self.now, "runs": self.vast_runs,
                                 "gpus": {"rows": ["0, RTX 4090, 97, 1, 2, 60, 300"]},
                                 "disks": []}, self.now)

    def vast_run(self, name: str, started: float, updated: float, state: str) -> None:
        status = {**RUNNING, "state": state, "started_at": iso(started),
                  "updated_at": iso(updated)}
        run = {"path": f"/root/runs/{name}", "root": "/root/runs", "name": name,
               "s_sig": "s", "status": status, "pid_alive": state == "running"}
        self.vast_runs = [r for r in self.vast_runs if r["name"] != name] + [run]

    async def tick(self, at: float, poll: bool = True) -> FleetCost:
        """Time passes to `at`; the providers are asked, the boxes looked at, the meter folds."""
        assert self.meter is not None
        self.now = at
        for run in self.vast_runs:  # a running run keeps writing status.json
            if run["status"]["state"] == "running":
                run["status"]["updated_at"] = iso(at - 5)
        if poll:
            await self.meter.poll()
        states = [self.vast_state()]
        for watcher in self.watchers.values():
            states.append(await watcher.refresh())
        return self.meter.update(states)

    def close(self) -> None:
        self.vast.close()
        self.runpod.close()


@pytest.fixture
def day(tmp_path: Path, sshd_factory: Any, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Day]:
    monkeypatch.setenv("VAST_API_KEY", "vast-key")  # what `stop` and `destroy` use
    monkeypatch.setenv("RUNPOD_API_KEY", "runpod-key")
    d = Day(tmp_path, sshd_factory("lab"), sshd_factory("old"), client_key)
    yield d
    d.close()


async def test_a_day_of_a_fleet_is_billed_to_the_cent(day: Day) -> None:
    # --- panel 1: T0 .. 6h -----------------------------------------------------
    await day.open_panel(old_rate=0.30)
    day.vast_run("run1", T0 - 1 * H, T0 - 5, "running")
    cost = await day.tick(T0)
    vast = cost.boxes[VAST]
    # The guide's measured box: $3.4828/hr running, $0.0694/hr stopped on Vast's
    # 720-hour month, 98% saved by stopping, a $1.00 rebuild breaks even at 14.4 h.
    assert vast.rates.running is not None and vast.rates.running.usd_per_hr == 3.4828
    assert vast.rates.stopped is not None and f"{vast.rates.stopped.usd_per_hr:.4f}" == "0.0694"
    assert vast.rates.hours_per_month == 720
    assert percent_words(vast.rates.saving_pct or 0) == "98%"
    assert f"{vast.rates.break_even_hours:.1f}" == "14.4"
    assert cost.boxes[POD].rates.hours_per_month == 730
    assert cost.usd_per_hr == pytest.approx(3.4828 + 1.38 + 0.50 + 0.30)

    day.vast_run("run1", T0 - 1 * H, T0 + 1.5 * H, "completed")
    await day.tick(T0 + 1.5 * H)
    # Stop, read back from Vast: the disk bills from then on.
    day.now = T0 + 2 * H
    stop = await power(day.fleet, day.fleet.box(VAST), "stop", day.journal,
                       ledger=day.meter.ledger, clock=day.clock)  # type: ignore[union-attr]
    assert stop.code == 0, stop.lines
    day.vast_up = False
    await day.tick(T0 + 2 * H)
    # The pod's rate goes up between two polls a minute apart: billed from the earlier.
    await day.tick(T0 + 3 * H - 60)
    day.runpod.change("pod1", {"cost": 1.50})
    await day.tick(T0 + 3 * H)
    # RunPod goes down for three hours; meanwhile the pod is stopped at its console.
    day.runpod.fail(*[day.runpod.error_fault(503, "upstream down")] * 5)
    cost = await day.tick(T0 + 4 * H)
    pod = cost.boxes[POD]
    assert pod.rate_now is not None and pod.rate_now.usd_per_hr == 1.50
    assert pod.doubt is not None and "runpod is not answering" in pod.doubt
    day.runpod.change("pod1", {"status": "EXITED", "cost": 0.0, "ssh": None})
    day.now = T0 + 5 * H
    start = await power(day.fleet, day.fleet.box(VAST), "start", day.journal,
                        ledger=day.meter.ledger, clock=day.clock)  # type: ignore[union-attr]
    assert start.code == 0, start.lines
    day.vast_up = True
    day.runpod.fail(*[day.runpod.error_fault(503, "upstream down")] * 5)
    await day.tick(T0 + 5 * H)
    day.vast_run("run2", T0 + 5.25 * H, T0 + 5.25 * H, "running")

    # --- panel 2 (a restart, and the old box's rate edited): 6h .. 12h ----------
    await day.open_panel(old_rate=0.40)
    day.runpod.fail(*[day.runpod.error_fault(503, "upstream down")] * 5)
    await day.tick(T0 + 6 * H)
    cost = await day.tick(T0 + 7 * H)  # RunPod answers again: the pod reads stopped from now
    assert cost.boxes[OLD].accrued_usd == pytest.approx(6 * 0.30 + 1 * 0.40)  # re-rated at 6h
    # The lab box's stop_command exits 0: that alone proves nothing, it bills on...
    # (watched for 1 s of real time: the box still answers SSH, so the effect is unseen)
    stopped = await power(day.fleet, day.fleet.box(LAB), "stop", day.journal,
                          ledger=day.meter.ledger, clock=day.clock,  # type: ignore[union-attr]
                          observe_timeout=1.0, poll_interval=0.2)
    assert stopped.code == 1 and stopped.outcome == "unknown", stopped.lines
    assert stopped.lines[-1].startswith("stop lab: unknown: may still be billing"), stopped.lines
    lab = day.meter.update([]).boxes[LAB]  # type: ignore[union-attr]
    assert lab.rate_now is not None and lab.rate_now.usd_per_hr == 0.50
    assert lab.doubt is not None and "may still be billing $0.5000/hr" in lab.doubt
    # ...until the box is seen to stop answering: its disk bills from then on.
    day.servers["lab"].stop()
    cost = await day.tick(T0 + 7 * H)
    lab = cost.boxes[LAB]
    assert lab.rate_now is not None and lab.rate_now.usd_per_hr == pytest.approx(LAB_DISK)
    assert lab.doubt is None
    cost = await day.tick(T0 + 11.75 * H)  # the last look of panel 2
    assert cost.boxes[OLD].accrued_usd == pytest.approx(6 * 0.30 + 5.75 * 0.40)

    # --- panel 3 (the old box removed from the config): 12h .. 24h ---------------
    await day.open_panel(old_rate=None)
    await day.tick(T0 + 12 * H)
    day.vast_run("run2", T0 + 5.25 * H, T0 + 17 * H, "completed")
    await day.tick(T0 + 17 * H)
    day.now = T0 + 20 * H
    gone = await destroy(day.fleet, day.fleet.box(VAST), day.journal, force_unpushed=True,
                         ledger=day.meter.ledger, clock=day.clock)  # type: ignore[union-attr]
    assert gone.code == 0, gone.lines
    day.vast_up = False
    await day.tick(T0 + 20 * H)
    cost = await day.tick(T0 + 24 * H)
    await day.close_panel()

    # --- the bill, by hand ---------------------------------------------------------
    vast_usd = (3 * H * 3.4828             # backfilled from Vast's start_date to the stop
                + 3 * H * VAST_DISK        # stopped 2h .. 5h
                + 15 * H * 3.4828) / H     # started 5h .. destroyed 20h; nothing after
    pod_usd = ((3.5 * H - 60) * 1.38       # from startedAt to the poll before the change
               + (4 * H + 60) * 1.50       # through the outage, until read stopped at 7h
               + 17 * H * POD_DISK) / H    # the volume, 7h .. 24h
    lab_usd = 7 * 0.50 + 17 * LAB_DISK     # up until seen down after its stop at 7h
    old_usd = 6 * 0.30 + 5.75 * 0.40       # 0.30 to 6h, 0.40 until panel 2 last watched it
    assert set(cost.boxes) == {VAST, POD, LAB}
    assert round(cost.boxes[VAST].accrued_usd, 2) == round(vast_usd, 2) == 62.90
    assert round(cost.boxes[POD].accrued_usd, 2) == round(pod_usd, 2)
    assert cost.boxes[LAB].accrued_usd == pytest.approx(lab_usd, abs=1e-6)
    assert cost.boxes[VAST].accrued_usd == pytest.approx(vast_usd, abs=1e-6)
    assert cost.boxes[POD].accrued_usd == pytest.approx(pod_usd, abs=1e-6)
    assert cost.accrued_usd == pytest.approx(vast_usd + pod_usd + lab_usd, abs=1e-6)
    assert cost.usd_per_hr == pytest.approx(LAB_DISK + POD_DISK)  # two disks, nothing else

    # A fresh panel replays the same bill from disk.
    replayed = Ledger(day.ledger_path)
    report = costs_report(replayed.book, [VAST, POD, LAB], None, T0 + 24 * H)
    bills = {b.box: b for b in report.boxes}
    assert bills[VAST].usd == pytest.approx(vast_usd, abs=1e-6)
    assert bills[VAST].running.hours == pytest.approx(18.0)
    assert bills[VAST].stopped.usd == pytest.approx(3 * VAST_DISK)
    # Idle: run1 ended at 1.5h (idle to the stop at 2h), started again at 5h with
    # nothing training until run2 at 5.25h, run2 ended at 17h (idle to the destroy).
    assert bills[VAST].idle.hours == pytest.approx(0.5 + 0.25 + 3)
    assert bills[VAST].idle.usd == pytest.approx(3.75 * 3.4828)
    assert bills[VAST].after_last_run.usd == pytest.approx(3 * 3.4828)
    assert bills[VAST].last_run_ended_at == pytest.approx(T0 + 17 * H)
    assert bills[POD].usd == pytest.approx(pod_usd, abs=1e-6)
    assert bills[LAB].usd == pytest.approx(lab_usd)
    assert bills[LAB].idle.hours == pytest.approx(7.0)  # seen with no run until it went
    assert bills[LAB].stopped.hours == pytest.approx(17.0) and bills[LAB].unseen.hours == 0
    assert report.usd == pytest.approx(vast_usd + pod_usd + lab_usd, abs=1e-6)
    (old,) = report.removed
    assert old.box == OLD and old.usd == pytest.approx(old_usd) and round(old_usd, 2) == 4.10
    assert old.end == T0 + 11.75 * H and old.may_still_bill_usd_per_hr == 0.40
    doc = costs_document(report)
    assert doc["schema"] == "gpurent.costs/1"
    assert doc["fleet"]["total_usd"] == pytest.approx(vast_usd + pod_usd + lab_usd, abs=1e-5)
    assert [b["name"] for b in doc["not_in_config"]] == [OLD]
    assert "old: not in the config" in costs_table(report)
    assert "may still be billing $0.4000/hr" in costs_table(report)
