"""End to end: real LibreYOLO runs train on the CPU behind a real sshd while the core polls.

One run completes, one fails inside LibreYOLO's trainer, one is SIGKILLed the
way the OOM killer or a preempted box would; the core must tell all three
apart from the files and the box alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import make_dataset, read_status, start_training
from support.sshd import KeyPair, Sshd

from tui.model.box import BoxState, Connection
from tui.model.runs import Health, RunState
from tui.remote.watch import BoxWatcher

if not os.environ.get("CI"):
    pytest.importorskip("libreyolo", reason="needs the train extra (pip install -e '.[train]')")

pytestmark = pytest.mark.training

GOOD = "yolox run $(touch pwned)"  # hostile on purpose: never reaches a shell


async def test_real_runs_advance_complete_fail_and_die(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    runs = tmp_path / "runs"
    data = make_dataset(tmp_path / "ds")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)])],
                       known_hosts=[server.known_hosts_line()])
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    logs = tmp_path / "train-logs"
    logs.mkdir()
    good = start_training(runs, GOOD, data, epochs=10, log_path=logs / "good.log")
    bad = start_training(runs, "bad", data, epochs=6, fail_at_epoch=3, log_path=logs / "bad.log")
    doomed = start_training(runs, "doomed", data, epochs=500, log_path=logs / "doomed.log")
    seen: dict[int, RunState] = {}  # the good run, by epoch, as the core saw it
    killed = False

    def run(state: BoxState, name: str) -> RunState | None:
        return next((r for r in state.runs if r.name == name), None)

    try:
        async with asyncio.timeout(300):
            while True:
                state = await watcher.refresh()
                assert state.connection is Connection.OK, state.error
                current = run(state, GOOD)
                if current is not None and current.current_epoch:
                    seen.setdefault(current.current_epoch, current)
                status = read_status(runs / "doomed")
                if not killed and status and (status.get("completed_epochs") or 0) >= 2:
                    os.kill(doomed.pid, signal.SIGKILL)
                    doomed.wait()
                    killed = True
                done = {r.name: r.health for r in state.runs}
                if (killed and done.get(GOOD) is Health.COMPLETED
                        and done.get("bad") is Health.FAILED and done.get("doomed") is Health.DEAD):
                    break
                await asyncio.sleep(0.25)
    finally:
        for proc in (good, bad, doomed):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        await watcher.close()

    final = run(state, GOOD)
    assert final is not None and final.health is Health.COMPLETED
    assert final.current_epoch == 10 and final.total_epochs == 10
    assert len(final.loss_history) == 10 and final.reason == "finished epoch 10/10"
    assert {"best.pt", "last.pt"} <= {w.name for w in final.weights}
    assert final.best_metric_name == "mAP50-95"
    assert not list(tmp_path.rglob("pwned"))

    # While it ran, the core watched it advance: epochs, a falling ETA, a growing history.
    running = [seen[e] for e in sorted(seen) if seen[e].health is Health.RUNNING]
    assert len(running) >= 3, f"saw only epochs {sorted(seen)}"
    assert [len(r.loss_history) for r in running] == sorted(len(r.loss_history) for r in running)
    assert len(running[-1].loss_history) > len(running[0].loss_history)
    etas = [r.eta_seconds for r in running if r.eta_seconds is not None]
    assert etas[-1] < etas[0]

    failed = run(state, "bad")
    assert failed is not None and failed.error == {
        "type": "RuntimeError", "message": "injected failure at epoch 3"}
    assert failed.current_epoch == 3
    assert "RuntimeError: injected failure at epoch 3" in failed.reason

    dead = run(state, "doomed")
    assert dead is not None and dead.pid == doomed.pid and dead.pid_alive is False
    assert f"pid {doomed.pid} is gone" in dead.reason
    assert dead.eta_seconds is None
