"""A real Prometheus server (Debian package `prometheus`) scraping a real `gpurent-tui
watch --metrics` over real sshd boxes, with contrib/'s alert rules loaded: what its query
API answers is what `status --json` says; the box we destroyed is at rest and only the box
down for no reason of ours trips the unreachable alert; every dashboard panel's PromQL
runs. Without prometheus it skips (fails under GPURENT_REQUIRE_PROMETHEUS=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.prometheus import Prometheus, as_promql, dashboard, free_port, panels
from support.prometheus import need as need_tool
from support.sshd import KeyPair, Sshd
from support.watch_output import MetricsWatch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")  # session: set up before the sshd key pair, not after
def prometheus_binary() -> str:
    return need_tool("prometheus")


@pytest.fixture
def watched(tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
            isolated_dirs: Path) -> Iterator[tuple[int, str, dict[str, str]]]:
    """`watch --metrics` over three boxes: `b` training (a real sshd), `gone` destroyed by
    its budget (the journal says so), `down` not answering for no reason of ours."""
    from tui.store.journal import Journal

    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_running")
    running = root / "yolox_running" / "status.json"
    status = json.loads(running.read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=os.getpid(), started_at=now, updated_at=now)  # alive: running
    running.write_text(json.dumps(status))
    closed = free_port()  # nothing listens there
    fleet = make_fleet(
        tmp_path, [box_entry(server, client_key, "b", runs_roots=[str(root)], budget_usd=50,
                             pricing={"running_usd_per_hr": 3.6}),
                   {"name": "gone", "host": "127.0.0.1", "port": closed},
                   {"name": "down", "host": "127.0.0.1", "port": closed}],
        known_hosts=[server.known_hosts_line()], budget_usd=1000)
    Journal().record(box="gone", action="destroy", outcome="done", message="destroyed",
                     at=time.time() - 60, details={"by": "budget"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with MetricsWatch(fleet.source, env, str(ROOT)) as watch:
        yield watch.port, fleet.source, env
        log = watch.stop()
        assert watch.proc.returncode == 0, log


def test_a_real_prometheus_scrapes_what_status_says_and_pages_only_for_the_box_down(
        tmp_path: Path, prometheus_binary: str,
        watched: tuple[int, str, dict[str, str]]) -> None:
    port, config, env = watched
    prom = Prometheus(prometheus_binary, tmp_path, f"127.0.0.1:{port}")
    try:
        prom.until("the three boxes", lambda: len(prom.query("gpurent_box_up")) == 3)
        prom.until("the run's money and the fleet's", lambda: bool(
            prom.query("gpurent_run_unpushed_usd") and prom.query("gpurent_box_usd_per_hour")
            and prom.query("gpurent_fleet_budget_usd")
            and prom.query("gpurent_box_up == 1 or gpurent_box_at_rest == 1") and
            prom.query('ALERTS{alertname="GpurentBoxUnreachable"}')))
        doc = json.loads(subprocess.run(
            [sys.executable, "-m", "tui", "status", "--json", "--config", config],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60).stdout)
        boxes = {b["name"]: b for b in doc["boxes"]}
        live = boxes["b"]["runs"][0]

        # --- the same figures as status --json
        assert {k[0]: v for k, v in prom.query("gpurent_box_up").items()} == {
            name: float(box["connection"] == "ok") for name, box in boxes.items()}
        assert boxes["gone"]["rest"]["kind"] == "destroyed" and boxes["down"]["rest"] is None
        assert prom.query("gpurent_box_at_rest") == {
            ("gone", "", "destroyed", "budget"): 1.0,  # kind and by only while at rest
            ("b", "", "", ""): 0.0, ("down", "", "", ""): 0.0}
        run = ("b", "yolox_running", "", "")
        assert prom.query("gpurent_run_epoch")[run] == live["current_epoch"] == 7
        assert prom.query("gpurent_run_epochs_total")[run] == live["total_epochs"] == 30
        assert prom.query("gpurent_run_train_loss")[run] == live["train_loss"]
        assert abs(prom.query("gpurent_run_unpushed_usd")[run] - live["unpushed_usd"]) < 0.01
        assert prom.query('gpurent_run_health{health="running"}')[run] == 1.0
        rate = prom.query("gpurent_box_usd_per_hour")
        assert rate[("b", "", "", "")] == boxes["b"]["cost"]["usd_per_hr"] == 3.6
        assert prom.query("gpurent_box_budget_usd") == {
            ("b", "", "", ""): boxes["b"]["cost"]["budget_usd"]}
        assert list(prom.query("gpurent_fleet_budget_usd").values()) == \
            [doc["fleet"]["budget_usd"]] == [1000.0]
        (spent,) = prom.query("gpurent_fleet_spent_usd_total").values()
        assert abs(spent - doc["fleet"]["accrued_usd"]) < 0.01

        # --- the rules, evaluated every second: only `down` is on its way to paging
        alerts = [(a["labels"]["alertname"], a["labels"].get("box"), a["state"])
                  for a in prom.api("alerts")["alerts"]]
        assert ("GpurentBoxUnreachable", "down", "pending") in alerts, alerts
        assert not [a for a in alerts if a[1] in ("gone", "b")], alerts
        assert not [a for a in alerts if a[0] == "GpurentWatchDown"], alerts
        rules = prom.api("rules")["groups"][0]["rules"]
        assert all(r["health"] == "ok" for r in rules), rules

        # --- every dashboard panel's PromQL runs; the fleet at a glance adds up
        glance = {}
        for panel in panels(dashboard()):
            for target in panel.get("targets", []):
                result = prom.api("query", query=as_promql(target["expr"]))["result"]
                if panel["type"] == "stat" and result:
                    glance[panel["title"]] = float(result[0]["value"][1])
        assert (glance["Boxes up"], glance["At rest"], glance["Unreachable"]) == (1, 1, 1)
        assert glance["$/hr now"] == 3.6
    finally:
        prom.close()
