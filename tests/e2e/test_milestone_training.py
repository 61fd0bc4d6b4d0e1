"""End to end: a real LibreYOLO run trains on the CPU behind a real sshd while `watch`
pushes its milestones unasked: every 2nd epoch's checkpoint, an improved best.pt, the
completed run; each to a local folder, verified by sha256, each file once."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import make_dataset, start_training
from support.sshd import KeyPair, Sshd

from tui.model.guard import last_verified_pushes
from tui.runtime.watch_sink import Watch
from tui.store.journal import Journal

if not os.environ.get("CI"):
    pytest.importorskip("libreyolo", reason="needs the train extra (pip install -e '.[train]')")

pytestmark = pytest.mark.training

EPOCHS = 4


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_milestones_of_a_real_run_are_pushed_and_verified_once_each(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    runs = tmp_path / "runs"
    data = make_dataset(tmp_path / "ds")
    dest = tmp_path / "pushed"
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "b", runs_roots=[str(runs)],
        push={"local_dir": str(dest), "every_epochs": 2, "on_best": True,
              "on_complete": True})], known_hosts=[server.known_hosts_line()])
    journal = Journal(tmp_path / "journal.jsonl")
    logs: list[str] = []
    watch = Watch(fleet, journal=journal, log=logs.append, retry_seconds=1.0)
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    trainer = start_training(runs, "run1", data, epochs=EPOCHS, save_period=1,
                             log_path=tmp_path / "train.log")
    run_dir = runs / "run1"

    def settled() -> bool:
        """The run completed and its final weights are the ones last pushed, verified."""
        record = last_verified_pushes(journal.entries, "b").get(str(run_dir))
        if trainer.poll() is None or record is None or "b" in watch.busy:
            return False
        weights = run_dir / "weights"
        return all(record.files.get(f"weights/{n}") is not None and
                   record.files[f"weights/{n}"][0] == (weights / n).stat().st_size and
                   record.files[f"weights/{n}"][1] == (weights / n).stat().st_mtime_ns
                   for n in ("best.pt", "last.pt"))

    try:
        async with asyncio.timeout(240):
            while not settled():
                await asyncio.sleep(0.25)
            await asyncio.sleep(2.5)  # two more looks: nothing more is due
    finally:
        if trainer.poll() is None:
            trainer.kill()
        trainer.wait()
        stop.set()
        assert await task == 0
    assert trainer.returncode == 0, (tmp_path / "train.log").read_text()[-2000:]
    pushes = [e for e in journal.entries if e["action"] == "push"]
    verified = [e for e in pushes if e["outcome"] == "done" and e["verified"]]
    assert verified and pushes[-1] in verified, pushes
    # A push while LibreYOLO rewrites status.json may fail its sha256 check: then it is
    # retried after a backoff, and the failure alerted; never a burst.
    failed = [e for e in pushes if e not in verified]
    assert all("changed on the box during the push" in e["message"] for e in failed), \
        [e["message"] for e in failed]
    assert len(failed) == sum("alert push_failed" in line for line in logs)
    assert len(pushes) <= 6, [e["milestone"] for e in pushes]
    why = [e["milestone"] for e in pushes]
    assert any("best.pt improved at epoch" in w for w in why), why
    assert any("epoch 2" in w for w in why) and any("epoch 4" in w for w in why), why
    # The completed run's final weights are the ones pushed (settled() waited for it): by
    # an `on_complete` push, or by the last epoch's when it already caught them.
    # Each epoch multiple went out verified exactly once; the odd ones never.
    epochs = [f["name"] for e in verified for f in e["files"] if "epoch_" in f["name"]]
    assert sorted(epochs) == ["weights/epoch_2.pt", "weights/epoch_4.pt"], epochs
    landed = dest / "b" / "run1" / "weights"
    assert sorted(p.name for p in landed.iterdir()) == [
        "best.pt", "epoch_2.pt", "epoch_4.pt", "last.pt"]
    for name in ("epoch_2.pt", "epoch_4.pt", "best.pt", "last.pt"):
        assert sha(landed / name) == sha(run_dir / "weights" / name), name
    assert not list(dest.rglob("*.part"))
    assert any("milestone push of run1" in line and ": done" in line for line in logs), logs
    assert pushes[-1]["epoch"] == EPOCHS
