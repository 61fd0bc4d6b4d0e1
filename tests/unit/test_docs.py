"""The CLI's JSON documents (`size`, `check`, `doctor`, `fetch` --json): built in
tui/model/*_doc.py from the model's values alone, with the keys scripts read."""

from __future__ import annotations

import json
from typing import Any

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.fetch_doc import fetch_document
from tui.model.preflight import GpuHealth, judge_check, judge_doctor
from tui.model.preflight_doc import check_document, doctor_document, health_document
from tui.model.size_doc import size_document
from tui.model.sizing import GB, plan_disk
from tui.model.staging import FetchReport


def round_trips(doc: dict[str, Any]) -> dict[str, Any]:
    """What a script reads: the document through JSON, as the CLI prints it."""
    back: dict[str, Any] = json.loads(json.dumps(doc))
    assert back == doc
    return back


def test_size_document_prices_the_stopped_disk_only_with_a_rate_and_hours() -> None:
    plan = plan_disk(20 * GB, 50_000_000, 100, 10)
    priced = round_trips(size_document(plan, 0.1, 730.0))
    assert set(priced) == {"schema", "data_bytes", "checkpoint_bytes", "checkpoints",
                           "save_period", "logs_bytes", "system_bytes", "headroom_bytes",
                           "needed_bytes", "fetch_peak_bytes", "allocate_gb",
                           "stopped_usd_per_hr"}
    assert priced["schema"] == "gpurent.size/1"
    assert priced["data_bytes"] == 20 * GB and priced["save_period"] == 10
    assert priced["stopped_usd_per_hr"] == plan.stopped_usd_per_hr(0.1, 730.0) > 0
    assert size_document(plan, None, 730.0)["stopped_usd_per_hr"] is None
    assert size_document(plan, 0.1, None)["stopped_usd_per_hr"] is None


def test_check_document_carries_the_verdict_and_its_exit_code() -> None:
    report = judge_check({}, box="b1", python="python3", checked_at=1.0)
    doc = round_trips(check_document(report))
    assert doc["schema"] == "gpurent.check/1" and doc["box"] == "b1"
    assert doc["python"] == "python3" and doc["checked_at"] == 1.0
    assert doc["exit_code"] == report.exit_code
    assert doc["verdict"] == report.verdict
    assert {"findings", "torch", "gpus", "health", "libreyolo", "places", "notes",
            "complete", "python_version", "executable"} <= set(doc)
    assert len(doc["findings"]) == len(report.findings)


def test_a_gpus_health_names_its_throttle_reasons() -> None:
    hot = GpuHealth(index=0, name="A100", compute_cap=(8, 0), throttle_mask=0x48)
    doc = round_trips(health_document(hot))
    assert doc["compute_cap"] == [8, 0]
    assert doc["throttle_reasons"] == ["hardware slowdown", "hardware thermal slowdown"]
    cool = health_document(GpuHealth(index=1, name="A100"))
    assert cool["compute_cap"] is None and cool["throttle_reasons"] == []


def test_doctor_document_lists_each_finding_and_says_strict() -> None:
    answer = {"installed": True, "rc": 1, "report": {
        "summary": {"errors": 1, "warnings": 0, "infos": 0}, "exit_code": 1,
        "findings": [{"severity": "error", "check_id": "labels.missing",
                      "message": "3 images without labels", "split": "train", "count": 3,
                      "paths": ["a.jpg"]}]}}
    report = judge_doctor(answer, box="b1", data="data.yaml", python="python3", strict=True)
    doc = round_trips(doctor_document(report))
    assert doc["schema"] == "gpurent.doctor/1" and doc["strict"] is True
    assert doc["exit_code"] == EXIT_FAILED == report.exit_code
    assert doc["box"] == "b1" and doc["data"] == "data.yaml"
    assert [set(f) for f in doc["findings"]] == [
        {"severity", "check_id", "message", "split", "count", "paths"}]
    assert doc["findings"][0]["paths"] == ["a.jpg"]


def test_fetch_document_says_what_was_verified_and_refused() -> None:
    report = FetchReport(box="b1", repo="org/data", filename="data.tar", dest="~/data",
                         verified=True, message="fetched", bytes=10, members=2,
                         refused=("../escape",), extra={"not": "printed"})
    doc = round_trips(fetch_document(report))
    assert doc == {"schema": "gpurent.fetch/1", "box": "b1", "repo": "org/data",
                   "file": "data.tar", "dest": "~/data", "verified": True,
                   "message": "fetched", "bytes": 10, "download_seconds": None,
                   "extract_seconds": None, "members": 2, "refused": ["../escape"],
                   "kind": None}
    assert report.exit_code == EXIT_OK
