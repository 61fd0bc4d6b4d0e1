"""ETA and cost to finish from the recent epochs: one paused epoch must not poison them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fleets import DATA

from tui.model.cost import run_cost
from tui.model.runs import Health, estimate_pace, fold_run, parse_time

STATUS = json.loads((DATA / "yolox_running" / "status.json").read_text())


def run_with(times: list[float], total: int, eta: float | None) -> Any:
    """A running run whose metrics.jsonl holds one line per epoch with these times."""
    lines = "".join(json.dumps({"epoch": i + 1, "time": t, "train/loss": 1.0}) + "\n"
                    for i, t in enumerate(times))
    status = {**STATUS, "current_epoch": len(times), "completed_epochs": len(times),
              "total_epochs": total, "eta_seconds": eta,
              "mean_epoch_seconds": sum(times) / len(times)}
    raw = {"path": "/r/a", "root": "/r", "name": "a", "s_sig": "s", "status": status,
           "pid_alive": True, "metrics": {"text": lines, "off": len(lines), "id": "1", "head": "h"}}
    box_time = (parse_time(status["updated_at"]) or 0.0) + 5
    return fold_run(None, raw, box_time)


def test_a_twelve_minute_pause_does_not_poison_eta_or_cost_to_finish() -> None:
    # Epochs of 4-10 s, one paused for 12 minutes: LibreYOLO's mean says 1h40m to go.
    times = [4.0, 6.0, 10.0, 5.0, 7.0, 720.0, 8.0, 6.0, 5.0, 9.0, 6.0, 7.0]
    remaining = 200 - len(times)
    libreyolo_eta = sum(times) / len(times) * remaining  # ~1h40m, what was shown
    run = run_with(times, 200, libreyolo_eta)
    assert run.health is Health.RUNNING
    # The last 10 epochs, the paused one (over 3x their median) left out.
    kept = [10.0, 5.0, 7.0, 8.0, 6.0, 5.0, 9.0, 6.0, 7.0]
    assert run.epoch_seconds == pytest.approx(sum(kept) / len(kept))
    assert run.eta_seconds == pytest.approx(run.epoch_seconds * remaining)
    assert run.eta_seconds < 30 * 60 < libreyolo_eta
    assert "1 paused one(s) left out" in run.pace.method
    assert "LibreYOLO says 3h27m" in run.pace.method
    cost = run_cost(3.6, 1, run.epoch_seconds, run.eta_seconds)
    assert cost is not None and cost.to_finish_usd == pytest.approx(
        3.6 * run.epoch_seconds * remaining / 3600)
    assert cost.to_finish_usd < 2.0  # not the $5 the pause made of it


def test_libreyolos_own_eta_is_shown_when_it_agrees() -> None:
    run = run_with([5.0, 5.2, 4.9, 5.1], 30, 26 * 5.05)
    assert run.eta_seconds == pytest.approx(26 * 5.05)
    assert run.pace.method.startswith("LibreYOLO's, agrees with mean of last 4 epochs")


def test_too_few_epochs_use_libreyolos_figure_or_what_there_is() -> None:
    assert estimate_pace((), {"eta_seconds": 90.0}, 10).eta_seconds == 90.0
    assert estimate_pace((), None, 10).eta_seconds is None
    pace = estimate_pace((), {"eta_seconds": -5}, 10)
    assert pace.eta_seconds == 0.0
    run = run_with([8.0], 11, None)
    assert run.eta_seconds == pytest.approx(80.0) and "so far" in run.pace.method


def test_without_a_total_libreyolos_eta_is_all_there_is() -> None:
    status = {"eta_seconds": 120.0}
    history = run_with([5.0, 5.0, 5.0], 3, None).history
    pace = estimate_pace(history, status, None)
    assert pace.eta_seconds == 120.0 and pace.epoch_seconds == 5.0
    assert estimate_pace(history, {}, None).eta_seconds is None
