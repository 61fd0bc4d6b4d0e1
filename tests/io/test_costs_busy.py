"""`costs` says how busy each box's GPUs were over its billed time and what the idle share
cost, from the ledger: a live Runtime over a real sshd box whose `nvidia-smi` replays the
H200's 17 % recording writes the busy records, and `costs` reads them back after it quit."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fleets import DATA, box_entry, make_fleet
from support.nvidia_smi import replaying_nvidia_smi
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.bill import Event
from tui.providers.meter import CostMeter
from tui.runtime.events import CostChanged
from tui.runtime.events import Event as RuntimeEvent
from tui.runtime.fleet import Runtime
from tui.store.journal import Journal
from tui.store.ledger import Ledger

Factory = Callable[..., Sshd]
RATE = 3.49  # the H200's $/hr where the recordings were made
START = 1_000_000.0  # the fake clock's first look


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def live_run(root: Path) -> None:
    """A LibreYOLO run that progresses (updated now, by the box's own clock)."""
    run = root / "live"
    run.mkdir(parents=True)
    status = json.loads((DATA / "yolox_running" / "status.json").read_text())
    status.pop("pid", None)
    status["updated_at"] = datetime.now(UTC).isoformat()
    (run / "status.json").write_text(json.dumps(status))


def ledger_path(isolated_dirs: Path) -> Path:
    return isolated_dirs / "state" / "gpurent-tui" / "ledger.jsonl"


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for the runtime's own loop to get there; the clock is fake."""
    for _ in range(1200):
        if check():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never happened: {what}")


def folded_after(events: list[RuntimeEvent], seen: int) -> Callable[[], bool]:
    """Whether the money was folded after the first `seen` events (this look's included)."""
    return lambda: any(isinstance(e, CostChanged) for e in events[seen:])


async def test_costs_reads_the_busy_records_a_live_runtime_wrote(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Four looks 7.5 minutes apart, each the driver's 14 s window at 17 %: 56 s covered.
    The meter writes the first look's 14 s at once, the next 28 s 15 minutes later and the
    rest as the runtime closes; `costs` gives 17.0 % and 83 % of 56 s at $3.49/hr idle."""
    server = sshd_factory("box", env=replaying_nvidia_smi(tmp_path / "bin", "util-17.txt"))
    root = tmp_path / "runs"
    live_run(root)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": RATE})],
                       known_hosts=[server.known_hosts_line()])
    clock = Clock()
    meter = CostMeter(fleet, ledger=Ledger(ledger_path(isolated_dirs)), clock=clock)
    events: list[RuntimeEvent] = []
    runtime = Runtime(fleet, events.append, journal=Journal(tmp_path / "journal.jsonl"),
                      meter=meter, clock=clock, coalesce_seconds=0.01, config_seconds=3600)
    runtime.start()
    try:
        for step in (0.0, 450.0, 450.0, 450.0):
            clock.now += step
            runtime.poke()
            await until(lambda: runtime.states["box"].busy.last_at == clock.now,
                        f"a look at {clock.now}")
            await until(folded_after(events, len(events)), f"the money folded at {clock.now}")
        assert runtime.states["box"].busy.covered_s == 56.0
    finally:
        await runtime.aclose()
    records = [json.loads(line) for line in ledger_path(isolated_dirs).read_text().splitlines()]
    busy = [(r["t"], r["covered_s"], r["busy_s"]) for r in records if r.get("kind") == "gpu_busy"]
    assert busy == [(START, 14.0, 2.38), (START + 900, 28.0, 4.76), (START + 1350, 14.0, 2.38)]
    # the box is stopped as the runtime closes (nothing billed after: the fake clock's
    # ledger would otherwise bill on until today)
    Ledger(ledger_path(isolated_dirs)).record(Event(clock.now, "box", "stopped", 0.0, "config"))

    assert main(["costs", "--json", "--config", fleet.source]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    assert box["running"]["hours"] == round(1350 / 3600, 4)  # billed running 22.5 min
    # the 56 covered seconds' 17 % stands for the whole: billed $ x (1 - 0.17)
    idle = RATE * 1350 / 3600 * (1 - 0.17)  # $1.0862625 (rounded to 6 places)
    assert (box["gpu_busy_pct"], box["gpu_idle_usd"], box["gpu_busy_covered_s"],
            box["gpu_busy_billed_s"]) == (17.0, pytest.approx(idle, abs=1e-6), 56.0, 1350.0)
    assert main(["costs", "--config", fleet.source]) == 0
    out = capsys.readouterr().out.splitlines()
    assert " 17.0 %       $1.09 " in out[2]  # the title, the header, then the box
    assert "box: GPU busy over 56 s of 22 min billed" in out

    # A restart carries on from the ledger: 56 s before any look, 70 s after one more,
    # and only the new 14 s are written.
    clock.now += 30
    meter = CostMeter(fleet, ledger=Ledger(ledger_path(isolated_dirs)), clock=clock)
    runtime = Runtime(fleet, events.append, journal=Journal(tmp_path / "journal.jsonl"),
                      meter=meter, clock=clock, coalesce_seconds=0.01, config_seconds=3600)
    assert runtime.states["box"].busy.covered_s == 56.0
    runtime.start()
    try:
        runtime.poke()
        await until(lambda: runtime.states["box"].busy.last_at == clock.now, "a look")
        assert runtime.states["box"].busy.covered_s == 70.0
        assert runtime.states["box"].busy.pct == pytest.approx(17.0)
    finally:
        await runtime.aclose()
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    assert (box["gpu_busy_pct"], box["gpu_busy_covered_s"]) == (17.0, 70.0)


def test_one_shot_status_runs_a_moment_apart_write_each_second_once(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two `status` runs moments apart each read the driver's 14 s window; the second
    record covers only the seconds after the first record's end, so `costs` never counts
    a second twice (it said 28 s before)."""
    server = sshd_factory("box", env=replaying_nvidia_smi(tmp_path / "bin", "util-17.txt"))
    fleet = make_fleet(tmp_path, [box_entry(server, client_key,
                                            pricing={"running_usd_per_hr": RATE})],
                       known_hosts=[server.known_hosts_line()])
    began = time.time()
    for _ in range(2):
        assert main(["status", "--json", "--config", fleet.source]) == 0
    took = time.time() - began
    capsys.readouterr()
    records = [json.loads(line) for line in ledger_path(isolated_dirs).read_text().splitlines()]
    first, second = [r for r in records if r.get("kind") == "gpu_busy"]
    assert first["covered_s"] == 14.0
    assert 0 < second["covered_s"] <= round(second["t"] - first["t"], 3) + 0.001
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    assert 14.0 < box["gpu_busy_covered_s"] <= 14.0 + took + 0.1 < 28.0
    assert box["gpu_busy_pct"] == 17.0


def test_one_shot_status_prices_the_billed_time_not_only_the_covered_seconds(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A box billed running for 2 h at $3.49/hr ($6.98); one `status` reads the driver's
    14 s window at 17 %: the idle GPU money is billed $ x (1 - 0.17), about $5.79 (not
    the 14 s's $0.0113), and the words say how thin the sample is."""
    server = sshd_factory("box", env=replaying_nvidia_smi(tmp_path / "bin", "util-17.txt"))
    fleet = make_fleet(tmp_path, [box_entry(server, client_key,
                                            pricing={"running_usd_per_hr": RATE})],
                       known_hosts=[server.known_hosts_line()])
    rented = time.time() - 7200
    Ledger(ledger_path(isolated_dirs)).record(Event(rented, "box", "running", RATE, "config"))
    before = time.time()
    assert main(["status", "--json", "--config", fleet.source]) == 0
    after = time.time()
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    cost = box["cost"]
    assert (cost["gpu_busy_pct"], box["gpu_busy_covered_s"]) == (17.0, 14.0)
    low, high = (RATE * (t - rented) / 3600 * (1 - 0.17) for t in (before, after))
    assert low - 1e-6 <= cost["gpu_idle_usd"] <= high + 1e-6
    assert round(cost["gpu_idle_usd"], 2) == 5.79
    assert cost["gpu_busy_covered_s"] == 14.0
    assert 7200 <= cost["gpu_busy_billed_s"] <= 7200 + (after - before) + 0.1
    assert low - 1e-4 <= box["gpu_idle_usd"] <= high + 1e-4  # the box's own figure too
    assert main(["status", "--config", fleet.source]) == 0
    assert "GPU 17% busy over 14 s of 2.0 h billed ($5.79 idle)" in capsys.readouterr().out


def test_an_old_ledger_says_not_measured_never_zero(
        tmp_path: Path, isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger from before busy records: the box billed, its GPUs were never measured."""
    ledger = Ledger(ledger_path(isolated_dirs))
    ledger.record(Event(START, "a", "running", 2.0, "config"))
    fleet = make_fleet(tmp_path, [{"name": "a", "host": "h"}])
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    (a,) = doc["boxes"]
    assert (a["gpu_busy_pct"], a["gpu_idle_usd"], a["gpu_busy_covered_s"]) == (None, None, 0.0)
    assert doc["fleet"]["gpu_busy_pct"] is None
    assert main(["costs", "--config", fleet.source]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("a "))
    assert "not measured" in row and "%" not in row


def test_hostile_busy_lines_are_skipped_and_counted(
        tmp_path: Path, isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Busy records that claim more busy than covered, more covered than their stretch,
    negative or non-finite seconds, strings, booleans, more than a day or no box are
    skipped (counted on stderr); the one good record is the whole figure."""
    path = ledger_path(isolated_dirs)
    Ledger(path).record(Event(START, "a", "running", 3.6, "config"))
    Ledger(path).record(Event(START + 60, "a", "stopped", 0.0, "config"))  # billed 60 s
    good = {"v": 1, "kind": "gpu_busy", "t": START + 60, "box": "a", "covered_s": 60.0,
            "busy_s": 15.0}
    bad = [{**good, "busy_s": 61.0}, {**good, "covered_s": -5}, {**good, "busy_s": -1},
           {**good, "covered_s": "60"}, {**good, "busy_s": True}, {**good, "covered_s": 1e9},
           {**good, "box": 7}, {**good, "t": "now"},
           {**good, "since": START + 61}, {**good, "since": START + 30},  # after t; < covered
           {**good, "since": "yesterday"}, {**good, "since": START - 2 * 86_400}]
    with path.open("a") as f:
        for record in bad:
            f.write(json.dumps(record) + "\n")
        f.write('{"v": 1, "kind": "gpu_busy", "t": 1000100, "box": "a", "covered_s": NaN, '
                '"busy_s": 0}\n')
        f.write('{"v": 1, "kind": "gpu_busy", "t": 10001\n')  # torn
        f.write(json.dumps(good) + "\n")
    fleet = make_fleet(tmp_path, [{"name": "a", "host": "h"}])
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    captured = capsys.readouterr()
    (a,) = json.loads(captured.out)["boxes"]
    assert (a["gpu_busy_pct"], a["gpu_idle_usd"], a["gpu_busy_covered_s"]) == (
        25.0, round(3.6 * 60 / 3600 * (1 - 0.25), 6), 60.0)
    assert f"cost ledger {path}: 14 unreadable line(s) skipped" in captured.err
