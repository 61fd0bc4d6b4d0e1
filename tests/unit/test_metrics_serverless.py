"""A [[serverless]] entry in `watch --metrics`: its app in the gpurent_serverless_*
families, its runs under gpurent_run_* with box = the entry's name, an ETA past the
timeout as gpurent_run_eta_past_timeout, the figures those of `status --json`, through
prometheus_client's own exposition and parser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tui.model.config import ServerlessConfig
from tui.model.metrics_doc import LABEL_CHARS, Family, metric_families
from tui.model.serverless import AppState
from tui.model.serverless_doc import Entry
from tui.model.serverless_runs import ServerlessState, VolumeRead, fold_runs
from tui.model.status_doc import status_document
from tui.runtime.metrics import _metric

T0 = 1796450400.0  # 2026-12-05 06:00:00 UTC: the runs started
NOW = T0 + 3 * 3600 + 50 * 60  # 3h50m in: 2h10m left of 6 h
ENTRY = ServerlessConfig(name="modal-yolo", provider="modal", app="yolo-train", volume="v",
                         runs_path="/runs", gpu="H100:2", timeout=6 * 3600,
                         timeout_from="config")
APP = AppState(provider="modal", app="yolo-train", state="running", tasks=1,
               started_at=T0 - 60)

Samples = dict[str, list[tuple[dict[str, str], float]]]


class _Fixed:
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return (_metric(f) for f in self.families)


def _status(eta: float, **fields: object) -> bytes:
    doc = {"schema_version": 1, "state": "running", "current_epoch": 3, "total_epochs": 10,
           "started_at": "2026-12-05T06:00:00+00:00", "mean_epoch_seconds": 600.0,
           "updated_at": "2026-12-05T09:48:00+00:00", "train_loss": 1.5, "eta_seconds": eta}
    doc.update(fields)
    return json.dumps(doc).encode()


def _state(*reads: VolumeRead, app: AppState | None = APP) -> ServerlessState:
    return ServerlessState(name=ENTRY.name, provider="modal", app=app,
                           runs=fold_runs((), reads, "/runs", NOW), checked_at=NOW,
                           ok_at=NOW)


def _exposed(entries: list[Entry]) -> tuple[str, Samples]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metric_families([], None, {}, {}, {}, NOW, entries)))
    text = generate_latest(registry).decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return text, samples


def _one(samples: Samples, name: str, **labels: str) -> float:
    found = [v for got, v in samples[name] if all(got.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_the_app_and_its_runs_read_as_status_json_says() -> None:
    late = VolumeRead("runs/late", _status(3 * 3600 + 20 * 60))  # 1h10m short
    fits = VolumeRead("runs/fits", _status(3600.0))
    state = _state(late, fits)
    text, samples = _exposed([(ENTRY, state)])
    (doc,) = status_document([], NOW, serverless=[(ENTRY, state)])["serverless"]
    app = {"box": "modal-yolo", "provider": "modal", "app": "yolo-train"}
    assert _one(samples, "gpurent_serverless_up", **app, state="running") == 1
    assert _one(samples, "gpurent_serverless_tasks", **app) == 1
    assert _one(samples, "gpurent_serverless_timeout_seconds", **app) == 6 * 3600
    left = _one(samples, "gpurent_serverless_timeout_seconds_left", **app)
    assert left == pytest.approx(2 * 3600 + 10 * 60, abs=0.1)
    assert left == min(r["timeout_seconds_left"] for r in doc["runs"])
    assert _one(samples, "gpurent_serverless_estimated_usd", **app) == \
        pytest.approx(doc["estimated_cost_usd"])
    assert _one(samples, "gpurent_serverless_gpu_seconds", **app) == \
        pytest.approx(doc["gpu_seconds"])
    assert "# HELP gpurent_serverless_estimated_usd an ESTIMATE" in text
    run = {"box": "modal-yolo", "provider": "modal"}
    assert _one(samples, "gpurent_run_eta_past_timeout", **run, run="late") == 1
    assert _one(samples, "gpurent_run_eta_past_timeout", **run, run="fits") == 0
    by_path = {r["name"]: r for r in doc["runs"]}
    assert by_path["late"]["timeout_problem"].startswith("ETA 3h20m is past its 6 h timeout")
    assert by_path["fits"]["timeout_problem"] is None
    for name in ("late", "fits"):
        assert _one(samples, "gpurent_run_epoch", **run, run=name) == 3
        assert _one(samples, "gpurent_run_eta_seconds", **run, run=name) == \
            by_path[name]["eta_seconds"]
        assert _one(samples, "gpurent_run_health", **run, run=name, health="running") == 1
    assert "gpurent_serverless_no_timeout" not in samples  # no script named: not known
    assert "gpurent_box_up" not in samples and "gpurent_truncated" not in samples  # no box


def test_a_box_run_has_no_eta_past_timeout_and_a_finished_serverless_run_none() -> None:
    done = VolumeRead("runs/done", _status(0.0, state="completed", current_epoch=10))
    _, samples = _exposed([(ENTRY, _state(done))])
    assert "gpurent_run_eta_past_timeout" not in samples
    assert "gpurent_serverless_timeout_seconds_left" not in samples  # nothing live
    assert _one(samples, "gpurent_run_health", run="done", health="completed") == 1


def test_an_app_not_read_yet_is_down_without_a_state_and_without_made_up_figures() -> None:
    _, samples = _exposed([(ENTRY, ServerlessState(name=ENTRY.name, provider="modal"))])
    ((labels, value),) = samples["gpurent_serverless_up"]
    assert value == 0 and labels.get("state", "") == ""  # "": Prometheus drops the label
    for name in ("gpurent_serverless_tasks", "gpurent_serverless_estimated_usd",
                 "gpurent_serverless_timeout_seconds_left", "gpurent_run_epoch"):
        assert name not in samples


def test_a_stopped_app_reads_down_with_its_state() -> None:
    stopped = replace(APP, state="stopped", tasks=0)
    _, samples = _exposed([(ENTRY, _state(app=stopped))])
    assert _one(samples, "gpurent_serverless_up", state="stopped") == 0


def test_a_script_without_a_timeout_reads_as_no_timeout() -> None:
    bare = replace(ENTRY, script="train.py", script_unbounded=True, timeout=None,
                   timeout_from=None)
    fine = replace(ENTRY, name="other", app="other", script="ok.py", script_timeout=21600.0)
    _, samples = _exposed([(bare, _state()), (fine, replace(_state(), name="other"))])
    assert _one(samples, "gpurent_serverless_no_timeout", box="modal-yolo") == 1
    assert _one(samples, "gpurent_serverless_no_timeout", box="other") == 0
    assert not [s for s in samples["gpurent_serverless_timeout_seconds"]
                if s[0]["box"] == "modal-yolo"]


def test_a_hostile_run_folder_on_the_volume_is_one_bounded_label() -> None:
    hostile = 'ev"il\\n\n} 1\ngpurent_box_up{box="x"} 7\n\x1b[31m' + "Z" * 5000
    text, samples = _exposed([(ENTRY, _state(VolumeRead(f"runs/{hostile}", _status(60.0))))])
    (run,) = [labels["run"] for labels, _ in samples["gpurent_run_epoch"]]
    assert len(run) == LABEL_CHARS and run.endswith("~") and "\x1b" not in run
    assert "\n" not in run and 'gpurent_box_up{box="x"}' not in text
