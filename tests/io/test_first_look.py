"""The panel's watcher shows every run after one small answer, then streams the history."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd

from tui.model.box import BoxState, Connection
from tui.remote.watch import STREAM_BUDGET, BoxWatcher

Factory = Callable[..., Sshd]


def long_history(run_dir: Path, epochs: int) -> None:
    line = '{"epoch": %d, "train/loss": %f, "padding": "%s"}\n'
    with (run_dir / "metrics.jsonl").open("w") as f:
        f.writelines(line % (e, 10.0 / e, "x" * 400) for e in range(1, epochs + 1))


async def test_first_answer_has_every_run_and_no_history_then_history_streams(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    long_history(root / "yolox_completed", 6000)  # ~2.6 MB: three answers or more
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    updates: list[BoxState] = []
    task = asyncio.create_task(watcher.run(updates.append))
    try:
        async with asyncio.timeout(60):
            while not updates or updates[-1].loading or updates[-1].connection != "ok":
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    first = updates[0]
    assert first.connection is Connection.OK and first.loading
    assert [r.name for r in first.runs] == ["yolox_completed", "yolox_failed"]
    assert all(r.history == () for r in first.runs)  # states, health and ETA, no history
    assert {r.health for r in first.runs} == {"completed", "failed"}
    done = updates[-1]
    assert len(done.runs[0].history) == 5000 and done.runs[1].history  # HISTORY_LIMIT
    assert len(updates) >= 1 + 2_600_000 // STREAM_BUDGET  # in bounded answers
