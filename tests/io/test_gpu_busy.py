"""The true GPU-busy figure over real sshd: a box whose `nvidia-smi` replays the H200's
`-q -d UTILIZATION` recordings gives the busy integral, `gpu_idle_usd` and the
`gpu_underused` alert exactly, on a fake clock (the driver's ~14 s average per window)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fleets import DATA, box_entry, make_fleet
from support.nvidia_smi import fake_nvml, replaying_nvidia_smi, utilisation_answers_served
from support.sshd import KeyPair, Sshd

from tui.actions.guardian import Guardian
from tui.model.alerts import GPU_UNDERUSED
from tui.model.bill import Event
from tui.model.box import BoxState, Connection
from tui.model.config import FleetConfig
from tui.model.meter import FleetCost, meter
from tui.model.metrics_doc import metric_families
from tui.model.runs import Health
from tui.model.status_doc import box_document, status_table
from tui.model.watchdog import fold_guard, guard_document
from tui.onbox import guard, probe
from tui.remote.watch import BoxWatcher
from tui.screens.cost import notes
from tui.store.journal import Journal
from widgets.fleet_text import run_detail_line
from widgets.money_text import box_money_line

Factory = Callable[..., Sshd]
RATE = 3.49  # the H200's $/hr where the recordings were made
START = 1_000_000.0  # the fake clock's first look


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def live_run(root: Path) -> Path:
    """A LibreYOLO run that progresses (updated now, by the box's own clock)."""
    run = root / "live"
    run.mkdir(parents=True)
    status = json.loads((DATA / "yolox_running" / "status.json").read_text())
    status.pop("pid", None)
    status["updated_at"] = datetime.now(UTC).isoformat()
    (run / "status.json").write_text(json.dumps(status))
    return run


def h200_fleet(tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
               *util: str, env: dict[str, str] | None = None,
               **top: object) -> tuple[FleetConfig, Path]:
    bin_dir = tmp_path / "bin"
    server = sshd_factory("box", env={**replaying_nvidia_smi(bin_dir, *util), **(env or {})})
    root = tmp_path / "runs"
    live_run(root)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": RATE})],
                       known_hosts=[server.known_hosts_line()], **top)
    return fleet, bin_dir


def billed(fleet: FleetConfig, state: BoxState) -> FleetCost:
    """The meter's picture of the box, billed running at its configured $/hr since it was
    first seen (the ledger's segment an answering box opens)."""
    now = state.last_ok_at or 0.0
    book = [Event(START - 14, state.name, "running", RATE, "config")]
    return meter(fleet, [state], {}, book, {}, now, now - 3600)


async def look(watcher: BoxWatcher) -> BoxState:
    state = await watcher.refresh()
    assert state.connection is Connection.OK, state.error
    (run,) = state.runs
    assert run.health is Health.RUNNING, run.reason
    return state


async def test_the_busy_integral_and_idle_money_over_dense_and_sparse_refreshes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Three driver averages (17 %, 39 %, 70 %, each over 14.00 s): the second is read
    10 s after the first, so only its last 10 s are new; the third 30 s later, so it
    covers its own 14 s and the 16 s gap is not guessed. One `utilization.gpu` read per
    refresh said 0 % every time. The idle money is the billed running $ x (1 - busy)."""
    fleet, bin_dir = h200_fleet(tmp_path, sshd_factory, client_key,
                                "util-17.txt", "util-39.txt", "util-70.txt")
    clock = Clock()
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
    try:
        for step in (0.0, 10.0, 30.0):
            clock.now += step
            state = await look(watcher)
        assert utilisation_answers_served(bin_dir) == 3
        assert state.gpus[0].util_pct == 0.0  # the one-sample read the panel showed before
        covered, busy = 14 + 10 + 14, 14 * 0.17 + 10 * 0.39 + 14 * 0.70
        assert state.busy.covered_s == covered and abs(state.busy.busy_s - busy) < 1e-9
        assert state.runs[0].busy == state.busy  # the run progressed the whole time
        cost = billed(fleet, state)
        doc = box_document(state, cost.boxes["box"])
        # billed running since START - 14: 54 s at $3.49/hr; the 38 covered seconds' busy
        # share stands for all of them: idle = billed $ x (1 - busy / covered)
        pct, billed_usd = round(100 * busy / covered, 1), RATE * 54 / 3600
        idle = round(billed_usd * (1 - busy / covered), 4)
        assert (doc["gpu_busy_pct"], doc["gpu_idle_usd"]) == (42.3, idle) == (42.3, 0.0302)
        assert doc["gpu_busy_now_pct"] == 70.0 and doc["gpu_busy_covered_s"] == covered
        assert (doc["cost"]["gpu_busy_pct"], round(doc["cost"]["gpu_idle_usd"], 4)) == (pct, idle)
        assert (doc["cost"]["gpu_busy_covered_s"], doc["cost"]["gpu_busy_billed_s"]) == (38, 54)
        # the run: the same share of what the box billed over its training span
        run_doc, unit = doc["runs"][0], cost.boxes["box"].units[state.runs[0].path]
        assert unit.billed_usd is not None and unit.billed_usd > 0
        assert (run_doc["gpu_busy_pct"], run_doc["gpu_idle_usd"]) == (
            pct, round(unit.billed_usd * (1 - busy / covered), 4))
        # the same figures where a person looks: the box's money line and the cost screen
        line = box_money_line(cost.boxes["box"], clock.now, state.busy)
        assert line is not None and line.plain == (  # billed 54 s, 38 s of them covered
            "$3.49/hr running (config) · spent $0.0524 · GPU 42% busy over 38 s of 54 s "
            "billed ($0.0302 idle)")
        run_cost = cost.boxes["box"].runs[state.runs[0].path]
        detail = run_detail_line(state.runs[0], clock.now, run_cost, unit=unit)
        assert "GPU 42% busy over 38 s of " in detail.plain
        assert ("  cost: $3.49/hr running (config), spent $0.0524, GPU 42% busy over 38 s of "
                "54 s billed ($0.0302 idle)") in status_table([state], clock.now, cost).splitlines()
        assert ("box: GPUs 42% busy over 38 s of 54 s billed: $0.0302 of its GPU time went "
                "unused (`gpurent-tui profile` says why)") in notes(cost)
        series = {f.name: f.series for f in metric_families([state], cost, {}, {"box": "manual"},
                                                              {}, clock.now)}
        assert series["gpurent_box_gpu_busy_covered_seconds"] == [(("box", "manual"), 38.0)]
        ((_, money),) = series["gpurent_box_gpu_idle_usd"]
        assert round(money, 4) == idle
        # the same instant folded again (a catch-up round) adds nothing
        state = await look(watcher)
        assert state.busy.covered_s == covered
    finally:
        await watcher.session.close()


async def test_gpu_underused_once_per_run_after_fifteen_minutes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The run progresses while the driver reads its GPU 17 % busy at every look (once a
    minute): nothing before 15 minutes of windows, then one `gpu_underused` naming the
    rate, the share and what to try; never again for that run."""
    fleet, _ = h200_fleet(tmp_path, sshd_factory, client_key, "util-17.txt")
    clock = Clock()
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
    guardian = Guardian(fleet, Journal(tmp_path / "journal.jsonl"), clock=clock)
    found = []
    try:
        for minute in range(17):
            if minute:
                clock.now += 60
            state = await look(watcher)
            _, events = guardian.judge_costs(billed(fleet, state), {"box": state}, set())
            found.append([e for e in events if e.kind == GPU_UNDERUSED])
        assert all(not f for f in found[:15])  # 14 min of windows (plus the first 14 s)
        (alert,) = found[15]
        assert alert.run == "live" and alert.box == "box"
        assert alert.text == ("box/live: paying $3.49/hr for 17% of an H200 over the last "
                              "15 min: dataloader-bound? `gpurent-tui profile box`")
        assert found[16] == []
    finally:
        await watcher.session.close()


async def test_gpu_underused_is_not_sent_again_after_a_restart(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The alert sent, the panel restarts (a new guardian over the same journal) more than
    the cool-down later: the run was told already (journal.alerts.jsonl), so not again."""
    fleet, _ = h200_fleet(tmp_path, sshd_factory, client_key, "util-17.txt",
                          alerts={"gpu_underused_minutes": 1, "cooldown_minutes": 1})
    clock = Clock()
    journal = tmp_path / "journal.jsonl"
    guardian = Guardian(fleet, Journal(journal), clock=clock)
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
    told = []
    try:
        for minute in range(3):
            if minute:
                clock.now += 60
            state = await look(watcher)
            _, events = guardian.judge_costs(billed(fleet, state), {"box": state}, set())
            told += [e for e in events if e.kind == GPU_UNDERUSED]
        assert [e.run for e in told] == ["live"]
        clock.now += 120  # past the cool-down
        state = await look(watcher)
        restarted = Guardian(fleet, Journal(journal), clock=clock)
        _, events = restarted.judge_costs(billed(fleet, state), {"box": state}, set())
        assert [e for e in events if e.kind == GPU_UNDERUSED] == []
    finally:
        await watcher.session.close()


async def test_thresholds_come_from_the_fleet_config(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """`[alerts] gpu_underused_pct = 10` and a 17 % GPU: no alert however long."""
    fleet, _ = h200_fleet(tmp_path, sshd_factory, client_key, "util-17.txt",
                          alerts={"gpu_underused_pct": 10, "gpu_underused_minutes": 2})
    assert (fleet.alerts.gpu_underused_pct, fleet.alerts.gpu_underused_minutes) == (10, 2)
    clock = Clock()
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
    guardian = Guardian(fleet, Journal(tmp_path / "journal.jsonl"), clock=clock)
    try:
        for _ in range(4):
            clock.now += 60
            state = await look(watcher)
            _, events = guardian.judge_costs(billed(fleet, state), {"box": state}, set())
            assert [e for e in events if e.kind == GPU_UNDERUSED] == []
        assert state.runs[0].busy.trailing(clock.now, 2) == 17.0
    finally:
        await watcher.session.close()


async def test_nvml_is_preferred_and_read_since_the_last_sample_by_the_kept_probe(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A box whose libnvidia-ml.so.1 (a stand-in built from tests/support/fake_nvml.c,
    NVML's own signatures, 71 samples 200 ms apart, odd slots 99 % busy) loads: the probe
    reads NVML's samples through ctypes and never forks `nvidia-smi -q`; the kept probe asks
    only for samples since the last one it saw, so the second window is the 10 s between."""
    nvml = fake_nvml(tmp_path / "lib")
    if nvml is None:
        pytest.skip("no C compiler to build the stand-in libnvidia-ml.so.1")
    fleet, bin_dir = h200_fleet(tmp_path, sshd_factory, client_key, "util-17.txt", env=nvml)
    clock = Clock()
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=clock)
    try:
        first = await look(watcher)
        clock.now += 10
        state = await look(watcher)
        assert watcher.session.probe_mode == "kept"
    finally:
        await watcher.session.close()
    assert utilisation_answers_served(bin_dir) == 0
    assert first.gpu_busy is not None and state.gpu_busy is not None
    assert (first.gpu_busy.span, round(first.gpu_busy.pct, 4)) == (14.2, round(35 * 99 / 71, 4))
    assert (state.gpu_busy.span, state.gpu_busy.pct) == (10.0, 49.5)
    assert abs(state.busy.covered_s - 24.2) < 1e-6
    assert abs(state.busy.busy_s - (0.35 * 99 / 71 * 14.2 + 4.95)) < 1e-6


async def test_where_nvml_will_not_start_nvidia_smi_answers(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """nvmlInit_v2 fails (a driver/library mismatch): the fallback reads the recording."""
    nvml = fake_nvml(tmp_path / "lib")
    if nvml is None:
        pytest.skip("no C compiler to build the stand-in libnvidia-ml.so.1")
    fleet, bin_dir = h200_fleet(tmp_path, sshd_factory, client_key, "util-39.txt",
                                env={**nvml, "FAKE_NVML_FAIL": "init"})
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=Clock())
    try:
        state = await look(watcher)
    finally:
        await watcher.session.close()
    assert utilisation_answers_served(bin_dir) == 1
    assert state.gpu_busy is not None and (state.gpu_busy.span, state.gpu_busy.pct) == (14, 39)


def test_the_watchdog_keeps_the_integral_while_the_panel_is_away(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The on-box watchdog folds the same driver averages at its own looks (here 0, 10 and
    40 s after arming: the same tiling as the panel's), and its state reads back through
    the panel's hostile-input reader into `status --json`'s guard part."""
    bin_dir = tmp_path / "bin"
    env = replaying_nvidia_smi(bin_dir, "util-17.txt", "util-39.txt", "util-70.txt")
    monkeypatch.setenv("PATH", env["PATH"])
    root = tmp_path / "runs"
    live_run(root)
    watch = guard.Watch({"runs_roots": [str(root)], "max_hours": 2.0}, now=START)
    for at in (START, START + 10, START + 40, START + 40):
        watch.look(probe, at)
    assert utilisation_answers_served(bin_dir) == 4
    covered, busy = 14 + 10 + 14, 14 * 0.17 + 10 * 0.39 + 14 * 0.70
    assert watch.busy["covered_s"] == covered and abs(watch.busy["busy_s"] - busy) < 1e-9
    raw = {"v": 1, "armed_at": START,
           "gpu_busy": {"covered_s": covered, "busy_s": round(busy, 1)}}
    doc = guard_document(fold_guard(raw, START + 40), START + 40)
    assert doc is not None and (doc["gpu_busy_pct"], doc["gpu_busy_covered_s"]) == (42.4, 38.0)
    for hostile, read in (({"covered_s": 10, "busy_s": 1e9}, 100.0),
                          ({"covered_s": 10, "busy_s": -5}, 0.0),
                          ({"covered_s": "10", "busy_s": 1}, None),
                          ({"covered_s": float("inf"), "busy_s": 1}, None), ("lots", None)):
        doc = guard_document(fold_guard({"v": 1, "gpu_busy": hostile}, None), None)
        assert doc is not None and doc["gpu_busy_pct"] == read
