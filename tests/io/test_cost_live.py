"""The cost meter against real sshd boxes and loopback provider APIs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.provider_servers import (
    ProviderServer,
    RunPodServer,
    VastServer,
    runpod_pod,
    vast_instance,
)
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.app import GpurentApp
from tui.providers.meter import CostMeter
from tui.remote.watch import BoxWatcher
from tui.screens.fleet import FleetScreen
from tui.store.ledger import Ledger

Factory = Callable[..., Sshd]


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ProviderServer]]:
    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    monkeypatch.setenv("RUNPOD_API_KEY", "runpod-secret-key")
    monkeypatch.delenv("VAST_URL", raising=False)
    vast = VastServer("vast-secret-key", [vast_instance(12345678)])
    runpod = RunPodServer("runpod-secret-key", [runpod_pod("pod1")])
    vast.start()
    runpod.start()
    yield {"vast": vast, "runpod": runpod}
    vast.close()
    runpod.close()


def test_status_json_carries_the_money(tmp_path: Path, sshd_factory: Factory,
                                       client_key: KeyPair, providers: dict[str, ProviderServer],
                                       capsys: pytest.CaptureFixture[str],
                                       isolated_dirs: Path) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "vast-box", runs_roots=[str(root)], provider="vast",
                  instance_id="12345678", pricing={"rebuild_usd": 1.0}),
        box_entry(server, client_key, "pod-box", runs_roots=[str(root)], provider="runpod",
                  instance_id="pod1"),
        box_entry(server, client_key, "own-box", runs_roots=[str(root)],
                  pricing={"running_usd_per_hr": 0.5, "disk_gb": 250,
                           "storage_usd_per_gb_month": 0.2}),
    ], known_hosts=[server.known_hosts_line()],
        providers={"vast": {"base_url": providers["vast"].url},
                   "runpod": {"base_url": providers["runpod"].url}})
    before = time.time()
    assert main(["status", "--json", "--config", fleet.source]) == 0
    out = capsys.readouterr().out
    assert "secret-key" not in out
    doc = json.loads(out)
    boxes = {b["name"]: b for b in doc["boxes"]}
    vast = boxes["vast-box"]["cost"]
    assert vast["state"] == "running" and vast["usd_per_hr"] == 3.4828
    assert vast["rate_source"] == "api" and vast["stopped_usd_per_hr"] == 0.0694
    assert vast["break_even_hours"] == pytest.approx(1 / 0.0694, rel=1e-4)
    # Backfilled from Vast's start_date: the box was billing before the panel looked.
    start = vast_instance()["start_date"]
    assert vast["accrued_usd"] == pytest.approx(3.4828 * (before - start) / 3600, rel=1e-3)
    own = boxes["own-box"]["cost"]
    assert own["rate_source"] == "config" and own["hours_per_month"] == 730
    assert own["stopped_usd_per_hr"] == pytest.approx(250 * 0.2 / 730, abs=1e-6)
    pod = boxes["pod-box"]["cost"]
    assert pod["usd_per_hr"] == runpod_pod()["cost"]
    assert doc["fleet"]["usd_per_hr"] == pytest.approx(3.4828 + 0.5 + runpod_pod()["cost"])
    run = boxes["own-box"]["runs"][0]
    assert "cost_per_epoch_usd" in run and run["cost_to_finish_usd"] is None  # completed
    ledger = Ledger(isolated_dirs / "state" / "gpurent-tui" / "ledger.jsonl")
    assert {e.box for e in ledger.events} == {"vast-box", "pod-box", "own-box"}


def test_provider_down_is_reported_and_config_rates_still_apply(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        providers: dict[str, ProviderServer], capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    providers["vast"].close()
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "vast-box", provider="vast", instance_id="12345678",
                  pricing={"running_usd_per_hr": 3.0})],
        known_hosts=[server.known_hosts_line()],
        providers={"vast": {"base_url": providers["vast"].url}})
    assert main(["status", "--config", fleet.source]) == 0
    out = capsys.readouterr().out
    assert "$3.00/hr running (config)" in out
    assert "vast" in out and "12345678" in out  # the provider error names the instance


def dead_run(root: Path) -> None:
    """A run that says running while its process is gone: no progress on this box."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    run = runs_root_with(root.parent, "yolox_running", name=root.name) / "yolox_running"
    status = json.loads((run / "status.json").read_text())
    status.update(pid=gone.pid, updated_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00",
                                                         time.gmtime()))
    (run / "status.json").write_text(json.dumps(status))


async def test_idle_alarm_from_a_box_whose_runs_stopped(tmp_path: Path, sshd_factory: Factory,
                                                        client_key: KeyPair) -> None:
    server = sshd_factory()
    root = tmp_path / "runs"
    dead_run(root)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 36.0})],
                       known_hosts=[server.known_hosts_line()], idle_minutes=0.01)
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    meter = CostMeter(fleet, ledger=Ledger(tmp_path / "ledger.jsonl"))
    try:
        first = meter.update([await watcher.refresh()]).boxes["box"]
        assert first.idle_since is not None and not first.idle_alarm
        await asyncio.sleep(0.8)
        later = meter.update([await watcher.refresh()]).boxes["box"]
    finally:
        await watcher.close()
    assert later.idle_since == first.idle_since and later.idle_alarm
    assert later.idle_usd == pytest.approx(36.0 * (time.time() - first.idle_since) / 3600,
                                           rel=0.5)

    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        # Nothing bills until the box has answered once over SSH, then it is idle for
        # 0.6 s: on a busy machine the first login alone can take seconds.
        for _ in range(1200):
            cost = screen.fleet_list.view("box").cost
            if cost is not None and cost.idle_alarm:
                break
            await pilot.pause(0.05)
        assert "IDLE" in screen.fleet_list.text("box")
        assert "burned $" in screen.fleet_list.text("box")


def test_costs_command_per_box_fleet_and_since(tmp_path: Path, isolated_dirs: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from tui.model.bill import Event, Mark

    h = 3600.0
    t0 = datetime(2026, 11, 30, 12, 0).timestamp()  # local noon
    ledger = Ledger(isolated_dirs / "state" / "gpurent-tui" / "ledger.jsonl")
    for record in (Event(t0, "a", "running", 2.0, "api"), Mark(t0, "a", "training"),
                   Mark(t0 + 10 * h, "a", "idle"),            # the run ended at 22:00
                   Event(t0 + 14 * h, "a", "stopped", 0.1, "computed"),
                   Event(t0 + 20 * h, "a", "destroyed", 0.0, "computed"),
                   Event(t0, "gone", "running", 5.0, "config"),  # a box no longer configured
                   Event(t0 + 2 * h, "gone", "destroyed", 0.0, "computed")):
        (ledger.record if isinstance(record, Event) else ledger.mark)(record)  # type: ignore[operator]
    fleet = make_fleet(tmp_path, [{"name": "a", "host": "h", "provider": "vast",
                                   "instance_id": "1"}])
    assert main(["costs", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    (a,) = doc["boxes"]
    assert a["running"] == {"hours": 14.0, "usd": 28.0}
    assert a["stopped"] == {"hours": 6.0, "usd": pytest.approx(0.6)}
    assert a["idle"] == {"hours": 4.0, "usd": 8.0}
    assert a["after_last_run"]["usd"] == pytest.approx(8.6)  # idle 4 h, then the disk 6 h
    assert doc["fleet"]["total_usd"] == pytest.approx(28.6)
    assert [b["name"] for b in doc["not_in_config"]] == ["gone"]
    assert doc["not_in_config"][0]["total_usd"] == 10.0

    assert main(["costs", "--since", "2026-12-01", "--config", fleet.source]) == 0
    text = capsys.readouterr().out
    # From local midnight (t0 + 12 h): 2 h running at $2, both idle; then 6 h of disk.
    row = next(line for line in text.splitlines() if line.startswith("a "))
    assert row.split() == ["a", "2.0", "h", "$4.00", "6.0", "h", "$0.6000", "2.0", "h",
                           "$4.00", "8.0", "h", "$4.60", "not", "measured", "$4.60"]
    assert "gone" not in text  # its history ended before that day

    with pytest.raises(SystemExit) as exit_:
        main(["costs", "--since", "yesterday", "--config", fleet.source])
    assert exit_.value.code == 2
    assert "--since 'yesterday' is not a date" in capsys.readouterr().err
