"""Alarm clocks across a restart of the panel, over a real sshd box and a real ledger.

The runtime's meter and guardian are started afresh over a ledger that a panel
wrote before the restart: the box went idle then, so the idle alarm comes at
idle-since + threshold, not restart + threshold.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd

from tui.actions.guardian import Guardian
from tui.model.alerts import BOX_IDLE, OVER_BUDGET, UNREACHABLE
from tui.model.bill import Event, Mark
from tui.providers.meter import CostMeter
from tui.remote.watch import BoxWatcher
from tui.runtime.fleet import Runtime
from tui.store.journal import Journal
from tui.store.ledger import Ledger


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def idle_run(root: Path) -> None:
    """A run that says running while its process is gone: nothing progresses."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    run = runs_root_with(root.parent, "yolox_running", name=root.name) / "yolox_running"
    status = json.loads((run / "status.json").read_text())
    status.update(pid=gone.pid, updated_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00",
                                                         time.gmtime()))
    (run / "status.json").write_text(json.dumps(status))


async def test_a_restart_keeps_the_idle_clock_the_ledger_knows(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    root = tmp_path / "runs"
    idle_run(root)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 36.0})],
                       known_hosts=[server.known_hosts_line()], idle_minutes=10)
    restart = time.time()
    idle_at = restart - 6 * 60  # idle since 15:28, the panel restarted at 15:34
    ledger_path = tmp_path / "ledger.jsonl"
    before = Ledger(ledger_path)  # what the panel before the restart wrote
    before.record(Event(restart - 3600, "box", "running", 36.0, "config"))
    before.mark(Mark(restart - 3600, "box", "training"))
    before.mark(Mark(idle_at, "box", "idle"))

    clock = Clock(restart)

    async def panel(minutes: range) -> list[float]:
        """A panel started at the first of `minutes`: one money picture a minute."""
        clock.now = restart + minutes[0] * 60
        meter = CostMeter(fleet, ledger=Ledger(ledger_path), clock=clock)
        guardian = Guardian(fleet, Journal(tmp_path / "journal.jsonl"), clock=clock)
        watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
        alarms: list[float] = []
        try:
            state = await watcher.refresh()
            for minute in minutes:
                clock.now = restart + minute * 60
                cost = meter.update([state])
                decision, sent = guardian.judge_costs(cost, {"box": state}, set())
                alarms += [clock.now for e in sent if e.kind == BOX_IDLE]
                alarms += [clock.now for n in decision.notices if "idle" in n.text]
                since = cost.boxes["box"].idle_since
                assert since is not None and abs(since - idle_at) < 0.01
        finally:
            await watcher.close()
        return alarms

    # 15:34 .. 15:45: the alarm (and its notice) at 15:38, idle-since + 10 min, not at
    # 15:44, restart + 10 min.
    assert await panel(range(12)) == [restart + 4 * 60] * 2
    # Restarted again at 15:46, past any cool-down by 15:50: this idle spell was alarmed.
    assert await panel(range(12, 12 + 120, 10)) == []


async def test_a_restart_keeps_the_clock_of_a_box_down_since_before(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """A box that stopped answering at 15:14 (the ledger's "unseen" mark) and still does
    not answer after a restart at 15:34 is alerted at 15:44 (30 minutes), not at 16:04;
    and a restart after that alert does not send it again."""
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [{**box_entry(server, client_key), "port": 1,
                                   "pricing": {"running_usd_per_hr": 36.0}}],
                       known_hosts=[server.known_hosts_line()],
                       alerts={"unreachable_minutes": 30})
    restart = time.time()
    down_at = restart - 20 * 60
    before = Ledger(tmp_path / "state" / "ledger.jsonl")
    before.record(Event(restart - 3600, "box", "running", 36.0, "config"))
    before.mark(Mark(restart - 3600, "box", "training"))
    before.mark(Mark(down_at, "box", "unseen"))
    clock = Clock(restart)

    async def panel(minutes: range) -> list[float]:
        clock.now = restart + minutes[0] * 60
        runtime = Runtime(fleet, lambda _: None, journal=Journal(tmp_path / "journal.jsonl"),
                          meter=CostMeter(fleet, ledger=Ledger(tmp_path / "state" /
                                                               "ledger.jsonl"), clock=clock),
                          clock=clock)
        watcher = runtime.watchers["box"]
        alerts: list[float] = []
        try:
            for minute in minutes:
                clock.now = restart + minute * 60
                was = watcher.state
                state = await watcher.refresh()
                assert state.failed_since is not None
                assert abs(state.failed_since - down_at) < 0.01
                alerts += [clock.now for e in runtime.guardian.box_updated(was, state)
                           if e.kind == UNREACHABLE]
        finally:
            await runtime.aclose()
        return alerts

    assert await panel(range(0, 14, 2)) == [restart + 10 * 60]
    # Restarted again at 16:24, past the cool-down (30 minutes): this outage was alerted.
    assert await panel(range(50, 56, 2)) == []


def test_an_over_budget_alarm_sent_before_a_restart_is_not_sent_again(tmp_path: Path) -> None:
    """The spend is the ledger's, so a restart knows the box is over budget; the alarm
    it sent before is not sent again, past the cool-down too."""
    fleet = make_fleet(tmp_path, [{"name": "box", "host": "127.0.0.1", "budget_usd": 1.0,
                                   "pricing": {"running_usd_per_hr": 36.0}}])
    start = time.time()
    Ledger(tmp_path / "ledger.jsonl").record(Event(start - 3600, "box", "running", 36.0,
                                                   "config"))
    clock = Clock(start)

    def panel(minutes: range) -> list[float]:
        clock.now = start + minutes[0] * 60
        meter = CostMeter(fleet, ledger=Ledger(tmp_path / "ledger.jsonl"), clock=clock)
        guardian = Guardian(fleet, Journal(tmp_path / "journal.jsonl"), clock=clock)
        sent: list[float] = []
        for minute in minutes:
            clock.now = start + minute * 60
            decision, events = guardian.judge_costs(meter.update([]), {}, set())
            sent += [clock.now for e in events if e.kind == OVER_BUDGET]
            sent += [clock.now for n in decision.notices if "budget" in n.text]
        return sent

    assert panel(range(0, 3)) == [start] * 2
    assert panel(range(90, 93)) == []  # restarted an hour and a half later
