"""A real Prometheus server scraping a real `watch --metrics` over a Modal app (the `modal`
stand-in first on PATH) whose run's ETA is past the timeout its script sets, contrib/'s
rules loaded: the query API joins the run to its app on (instance, box), only
GpurentServerlessEtaPastTimeout is on its way to paging, and the dashboard's serverless
panel's queries answer. Without prometheus it skips (fails under
GPURENT_REQUIRE_PROMETHEUS=1)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from support.modal_standin import ModalStandIn, status_json
from support.prometheus import Prometheus, as_promql, dashboard, panels
from support.prometheus import need as need_tool
from support.watch_output import MetricsWatch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = '''import modal

app = modal.App("yolo-train")
volume = modal.Volume.from_name("runs-vol")


@app.function(gpu="H100:2", timeout=6 * 60 * 60, volumes={"/runs": volume})
def train() -> None:
    pass
'''


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def test_a_real_prometheus_joins_the_run_to_its_app_and_only_the_eta_alert_is_pending(
        tmp_path: Path, isolated_dirs: Path) -> None:
    binary = need_tool("prometheus")
    stand_in = ModalStandIn(tmp_path / "modal", started=iso(time.time() - 3600))
    now = time.time()
    stand_in.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30),
        eta=8 * 3600.0))  # 5 h left of 6: killed 3 h short
    (tmp_path / "train.py").write_text(SCRIPT)
    config = tmp_path / "fleet.toml"
    config.write_text('[[serverless]]\nname = "modal-yolo"\nprovider = "modal"\n'
                      'app = "yolo-train"\nvolume = "runs-vol"\nruns_path = "/runs"\n'
                      'gpu = "H100:2"\nscript = "train.py"\n')
    env = {**stand_in.env, "PYTHONPATH": str(ROOT)}
    env.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})
    with MetricsWatch(str(config), env, str(ROOT)) as watch:
        prom = None
        try:
            prom = Prometheus(binary, tmp_path, f"127.0.0.1:{watch.port}")
            prom.until("the app's run, past its timeout, and the alert pending", lambda: bool(
                prom.query("gpurent_run_eta_past_timeout == 1")
                and prom.query('ALERTS{alertname="GpurentServerlessEtaPastTimeout"}')))
            joined = prom.query("gpurent_run_eta_past_timeout == 1 "
                                "and on (instance, box) gpurent_serverless_up == 1")
            assert joined == {("modal-yolo", "exp1", "", ""): 1.0}, joined
            assert prom.query("gpurent_serverless_timeout_seconds") == {
                ("modal-yolo", "", "", ""): 21600.0}  # 6 * 60 * 60, from the script
            (left,) = prom.query("gpurent_serverless_timeout_seconds_left").values()
            assert 5 * 3600 - 120 < left < 5 * 3600 + 60, left

            alerts = [(a["labels"]["alertname"], a["labels"].get("box"), a["state"])
                      for a in prom.api("alerts")["alerts"]]
            assert alerts == [("GpurentServerlessEtaPastTimeout", "modal-yolo", "pending")], alerts
            rules = prom.api("rules")["groups"][0]["rules"]
            assert all(r["health"] == "ok" for r in rules), rules

            (table,) = [p for p in panels(dashboard()) if p["title"] == "Serverless apps"
                        and p["type"] == "table"]
            for target in table["targets"]:
                result = prom.api("query", query=as_promql(target["expr"]))["result"]
                assert [r["metric"]["box"] for r in result] == ["modal-yolo"], target["expr"]
            log = watch.stop()
            assert watch.proc.returncode == 0, log
        finally:
            if prom is not None:
                prom.close()
