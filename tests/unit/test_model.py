"""The pure core on real LibreYOLO files (tests/data/libreyolo) and on broken ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fleets import DATA

from tui.model import runs
from tui.model.box import (
    BadAnswer,
    BoxState,
    Connection,
    fold_answer,
    fold_failure,
    parse_gpu_rows,
    probe_request,
)
from tui.model.retry import backoff_delay
from tui.model.runs import Health, fold_run, parse_time
from tui.model.status_doc import status_document, status_table


def status_of(name: str) -> dict[str, Any]:
    return json.loads((DATA / name / "status.json").read_text())


def metrics_of(name: str) -> str:
    return (DATA / name / "metrics.jsonl").read_text()


def raw_run(status: object = None, metrics: str | None = None, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"path": "/root/runs/r1", "root": "/root/runs", "name": "r1",
                           "s_sig": "1:1:1", "w_sig": "w"}
    if status is not None:
        raw["status"] = status
    if metrics is not None:
        raw["metrics"] = {"text": metrics, "off": len(metrics.encode()), "id": "1:2", "head": "h"}
    raw.update(extra)
    return raw


def box_clock(status: dict[str, Any], after: float) -> float:
    stamp = parse_time(status["updated_at"])
    assert stamp is not None
    return stamp + after


def test_running_run_reads_epoch_eta_and_best() -> None:
    status = status_of("yolox_running")
    run = fold_run(None, raw_run(status, pid_alive=True), box_clock(status, 5))
    assert run.health is Health.RUNNING
    assert (run.current_epoch, run.total_epochs) == (7, 30)
    assert run.reason == "epoch 7/30"
    assert run.eta_seconds == pytest.approx(status["eta_seconds"])
    assert run.best_metric_name == "mAP50-95"
    assert run.best_epoch == status["best_epoch"]
    assert run.cursor.pid == status["pid"]


def test_stalled_after_three_mean_epochs_but_never_under_ten_minutes() -> None:
    status = status_of("yolox_running")
    assert status["mean_epoch_seconds"] * 3 < 600
    fresh = fold_run(None, raw_run(status, pid_alive=True), box_clock(status, 590))
    assert fresh.health is Health.RUNNING
    stalled = fold_run(None, raw_run(status, pid_alive=True), box_clock(status, 660))
    assert stalled.health is Health.STALLED
    assert "no update for 11m" in stalled.reason and "limit 10m" in stalled.reason
    slow = dict(status, mean_epoch_seconds=400.0)
    assert fold_run(None, raw_run(slow, pid_alive=True), box_clock(slow, 1100)).health \
        is Health.RUNNING
    assert fold_run(None, raw_run(slow, pid_alive=True), box_clock(slow, 1300)).health \
        is Health.STALLED


def test_dead_when_pid_is_gone_even_if_recent() -> None:
    status = status_of("yolox_running")
    run = fold_run(None, raw_run(status, pid_alive=False), box_clock(status, 1))
    assert run.health is Health.DEAD
    assert f"pid {status['pid']} is gone" in run.reason
    assert run.eta_seconds is None


def test_started_run_has_no_epoch_yet() -> None:
    status = status_of("yolox_started")
    assert status["current_epoch"] is None
    run = fold_run(None, raw_run(status, pid_alive=True), box_clock(status, 1))
    assert run.health is Health.RUNNING
    assert run.history == () and run.best_metric is None


def test_completed_takes_last_values_from_metrics() -> None:
    status = status_of("yolox_completed")
    assert "current_epoch" not in status and "metrics" not in status
    run = fold_run(None, raw_run(status, metrics_of("yolox_completed")), box_clock(status, 99))
    assert run.health is Health.COMPLETED
    assert run.current_epoch == 6 and run.total_epochs == 6
    assert len(run.loss_history) == 6
    assert run.train_loss == pytest.approx(status["train_loss"])
    assert run.best_metric_name == "mAP50-95"
    assert run.eta_seconds is None


def test_yolo9_completed() -> None:
    status = status_of("yolo9_completed")
    run = fold_run(None, raw_run(status, metrics_of("yolo9_completed")), box_clock(status, 9))
    assert run.health is Health.COMPLETED
    assert [p.epoch for p in run.history] == [1, 2, 3, 4]


def test_failed_shows_error_and_epoch() -> None:
    status = status_of("yolox_failed")
    run = fold_run(None, raw_run(status, metrics_of("yolox_failed")), box_clock(status, 9))
    assert run.health is Health.FAILED
    assert run.error == {"type": "RuntimeError", "message": "injected failure at epoch 3"}
    assert run.current_epoch == 3
    assert "RuntimeError: injected failure at epoch 3" in run.reason
    assert len(run.history) == 2


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ([1, 2], "not a JSON object"),
        ("running", "not a JSON object"),
        ({"schema_version": 2, "state": "running"}, "schema_version 2 is not supported"),
        ({"schema_version": 1, "state": "paused"}, "unknown state 'paused'"),
    ],
)
def test_unusable_status_marks_only_that_run(status: object, words: str) -> None:
    run = fold_run(None, raw_run(status), 0.0)
    assert run.health is Health.UNREADABLE
    assert words in run.reason
    assert run.cursor.status_sig is None  # asked for again next refresh


def test_status_error_keeps_last_good_status_and_history() -> None:
    status = status_of("yolox_running")
    good = fold_run(None, raw_run(status, metrics_of("yolox_completed"), pid_alive=True),
                    box_clock(status, 1))
    broken = fold_run(good, {"path": good.path, "status_error": "JSONDecodeError: x"},
                      box_clock(status, 2))
    assert broken.health is Health.UNREADABLE
    assert "could not be read: JSONDecodeError" in broken.reason
    assert broken.status == status and len(broken.history) == 6
    fixed = fold_run(broken, raw_run(status, pid_alive=True), box_clock(status, 3))
    assert fixed.health is Health.RUNNING


def test_non_finite_huge_and_negative_numbers_do_not_crash() -> None:
    status = dict(status_of("yolox_running"), train_loss=float("nan"),
                  eta_seconds=-40.0, total_epochs=10**400, best_metric=float("inf"),
                  current_epoch=-3, mean_epoch_seconds=None, pid="12")
    run = fold_run(None, raw_run(status), box_clock(status, 1))
    assert run.train_loss is None and run.best_metric is None
    assert run.eta_seconds == 0.0
    assert run.total_epochs is None and run.current_epoch == -3
    assert run.pid is None
    status_document([BoxState(name="b", runs=(run,))], 0.0)


def test_bad_metrics_lines_are_reported_and_skipped() -> None:
    lines = metrics_of("yolox_completed").splitlines()
    text = "\n".join([lines[0], "{not json", "[1, 2]", *lines[1:]]) + "\n"
    run = fold_run(None, raw_run(status_of("yolox_completed"), text), 0.0)
    assert len(run.history) == 6
    assert any("line 2 of this read is not JSON" in p for p in run.problems)
    assert any("line 3 of this read has no epoch" in p for p in run.problems)


def test_metrics_accumulate_then_reset_when_file_started_over() -> None:
    lines = metrics_of("yolox_completed").splitlines(keepends=True)
    status = status_of("yolox_running")
    run = fold_run(None, raw_run(status, "".join(lines[:3])), 0.0)
    run = fold_run(run, {"path": run.path, "metrics": {"text": "".join(lines[3:]), "off": 9}}, 0.0)
    assert [p.epoch for p in run.history] == [1, 2, 3, 4, 5, 6]
    assert run.cursor.metrics_offset == 9
    run = fold_run(run, {"path": run.path,
                         "metrics": {"text": lines[0], "off": 1, "reset": True}}, 0.0)
    assert [p.epoch for p in run.history] == [1]
    assert run.restarts == 1


def test_history_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 200  # the bound, not its size, is under test (5000 lines cost half a second)
    monkeypatch.setattr(runs, "HISTORY_LIMIT", limit)
    line = json.loads(metrics_of("yolox_completed").splitlines()[0])
    text = "".join(json.dumps(dict(line, epoch=i)) + "\n" for i in range(1, limit + 51))
    run = fold_run(None, raw_run(status_of("yolox_running"), text), 0.0)
    assert len(run.history) == limit
    assert run.history[0].epoch == 51


def test_log_tail_and_skipped_bytes() -> None:
    run = fold_run(None, raw_run(log={"text": "a\nb\n", "off": 4, "skipped": 100}), 0.0)
    assert run.log_tail == ("[... 100 bytes of train.log not shown ...]", "a", "b")
    run = fold_run(run, {"path": run.path, "log": {"text": "c\n", "off": 6}}, 0.0)
    assert run.log_tail[-1] == "c" and run.cursor.log_offset == 6


def answer(*runs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"v": 1, "time": 1000.0, "runs": list(runs), "roots": [], "disks": [], **extra}


def test_box_fold_keeps_runs_through_failures_and_drops_gone_runs() -> None:
    box = fold_answer(BoxState(name="b"), answer(raw_run(status_of("yolox_completed"))), 50.0)
    assert box.connection is Connection.OK and box.last_ok_at == 50.0
    down = fold_failure(box, Connection.TIMEOUT, "box b: probe did not answer", 60.0, 70.0)
    assert down.runs == box.runs and down.failures == 1 and down.data_age(65.0) == 15.0
    again = fold_failure(down, Connection.UNREACHABLE, "refused", 80.0)
    assert again.failed_since == 60.0 and again.failures == 2
    back = fold_answer(again, answer(gone=["/root/runs/r1"]), 90.0)
    assert back.runs == () and back.failures == 0
    assert back.notices == ("run 'r1' is gone from the box",)
    req = probe_request(box, ("/root/runs",))
    assert req["runs"]["/root/runs/r1"]["s_sig"] == "1:1:1"


@pytest.mark.parametrize(
    ("bad", "words"),
    [([], "not a JSON object"), ({"v": 2}, "version 2"), ({"fatal": "boom"}, "crashed"),
     ({"v": 1, "time": "x", "runs": []}, "lacks the box clock")],
)
def test_bad_answers_are_refused(bad: Any, words: str) -> None:
    with pytest.raises(BadAnswer, match=words):
        fold_answer(BoxState(name="b"), bad, 0.0)


def test_gpu_rows_from_nvidia_smi() -> None:
    rows, note = parse_gpu_rows([
        "0, NVIDIA H200, 97, 81234, 143771, 61, 612.33",
        "1, NVIDIA GeForce RTX 4090, [N/A], 10, 24564, [Not Supported], [N/A]",
        "2, Weird, GPU, Inc., 5, 1, 2, 3, 4",
        "garbage",
    ])
    assert rows[0].name == "NVIDIA H200" and rows[0].util_pct == 97.0
    assert rows[0].power_w == pytest.approx(612.33)
    assert rows[1].util_pct is None and rows[1].temp_c is None and rows[1].mem_used_mib == 10
    assert rows[2].name == "Weird, GPU, Inc." and rows[2].util_pct == 5
    assert note == "1 nvidia-smi line(s) could not be read"


def test_gpu_absent_and_failing() -> None:
    box = fold_answer(BoxState(name="b"), answer(gpus={"absent": True}), 0.0)
    assert box.gpus == () and box.gpu_note == "no nvidia-smi on this box"
    box = fold_answer(box, answer(gpus={"error": "nvidia-smi exited 9: NVML failed"}), 0.0)
    assert box.gpu_note == "nvidia-smi exited 9: NVML failed"


def test_status_document_shape_and_table() -> None:
    status = status_of("yolox_failed")
    box = fold_answer(BoxState(name="gpu-a"),
                      answer(raw_run(status, metrics_of("yolox_failed"),
                                     weights=[["best.pt", 11463045, 1.5]])), 10.0)
    doc = json.loads(json.dumps(status_document([box], 20.0)))
    assert doc["schema"] == "gpurent.status/1"
    (b,) = doc["boxes"]
    assert b["connection"] == "ok" and b["box_time"] == "1970-01-01T00:16:40+00:00"
    (r,) = b["runs"]
    for key in ("path", "name", "health", "reason", "current_epoch", "total_epochs",
                "eta_seconds", "train_loss", "loss_history", "best_metric", "best_metric_name",
                "best_epoch", "updated_at", "error", "weights"):
        assert key in r
    assert r["health"] == "failed" and r["weights"][0]["name"] == "best.pt"
    assert r["error"]["message"] == "injected failure at epoch 3"
    table = status_table([box], 20.0)
    assert "gpu-a  [ok]" in table and "RuntimeError: injected failure at epoch 3" in table


def test_backoff_grows_caps_and_jitters() -> None:
    assert backoff_delay(0, 0.5) == 0.0
    assert backoff_delay(1, 0.0) == 1.0 and backoff_delay(1, 1.0) == 2.0
    assert backoff_delay(4, 1.0) == 16.0
    assert backoff_delay(50, 1.0) == 300.0 and backoff_delay(50, 0.0) == 150.0


def test_disks_on_one_filesystem_are_shown_once() -> None:
    disks = [{"root": "/root/runs", "fs": "7", "total": 100, "used": 25, "free": 75},
             {"root": "/root/more", "fs": "7", "total": 100, "used": 25, "free": 75},
             {"root": "/data", "fs": "9", "total": 10, "used": 9, "free": 1}]
    box = fold_answer(BoxState(name="b"), answer(disks=disks), 0.0)
    assert [(d.root, d.used_pct) for d in box.disks] == [("/root/runs", 25.0), ("/data", 90.0)]
