"""The kept probe (one long-lived `python3` per connection) against real sshd: it reports
exactly what the one-shot probe reports, costs a nonce per idle refresh, is started again
when it dies, dropped when it hangs, and given up for one-shot where the box cannot keep it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from support.fleets import DATA, box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd

from tui.demo.servers import BoxServer
from tui.model.box import BoxState, Connection
from tui.model.config import FleetConfig
from tui.remote.watch import BoxWatcher

Factory = Callable[..., Sshd]


def wrapped_python(directory: Path) -> dict[str, str]:
    """A `python3` that notes `<pid> <first arg>` of each start in `pids` (the pid is
    python's: the shell execs it), and refuses `-c` while `nokeep` exists."""
    directory.mkdir()
    exe = directory / "python3"
    exe.write_text(f"#!/bin/sh\necho \"$$ $1\" >> '{directory / 'pids'}'\n"
                   f"if [ \"$1\" = -c ] && [ -e '{directory / 'nokeep'}' ]; then\n"
                   f"  echo 'python3: -c is not allowed on this box' >&2; exit 2\nfi\n"
                   f"exec /usr/bin/python3 \"$@\"\n")
    exe.chmod(0o755)
    return {"PATH": f"{directory}:/usr/bin:/bin"}


def kept_pids(directory: Path) -> list[int]:
    lines = (directory / "pids").read_text().splitlines()
    return [int(line.split()[0]) for line in lines if line.endswith(" -c")]


def same_view(state: BoxState) -> tuple[object, ...]:
    """What a refresh reports, less the clocks (two refreshes read them a moment apart)."""
    runs = tuple(replace(r, box_time=None) for r in state.runs)
    return (state.connection, state.error, runs, state.gpus, state.gpu_note,
            state.root_problems, state.notices, state.truncated, state.python,
            tuple((d.root, d.total) for d in state.disks))


def pair(fleet: FleetConfig) -> tuple[BoxWatcher, BoxWatcher]:
    kept, once = BoxWatcher(fleet.boxes[0], fleet), BoxWatcher(fleet.boxes[0], fleet)
    once.session.keep_probe = False
    return kept, once


async def refresh_both(kept: BoxWatcher, once: BoxWatcher) -> BoxState:
    a, b = await kept.refresh(), await once.refresh()
    assert a.connection is Connection.OK, a.error
    assert same_view(a) == same_view(b)
    return a


async def test_the_kept_probe_reports_what_the_one_shot_probe_reports(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", "yolo9_completed")
    run = root / "live"
    run.mkdir()
    lines = (DATA / "yolox_completed" / "metrics.jsonl").read_text().splitlines(keepends=True)
    status = json.loads((DATA / "yolox_running" / "status.json").read_text())
    (run / "status.json").write_text(json.dumps(status))
    (run / "metrics.jsonl").write_text(lines[0])
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    kept, once = pair(fleet)
    try:
        await refresh_both(kept, once)
        steps: list[Callable[[], object]] = [
            lambda: (run / "metrics.jsonl").open("a").write(lines[1] + lines[2][:30]),
            lambda: (run / "train.log").write_text("epoch 2 done\n"),
            lambda: (run / "status.json").write_text(json.dumps({**status, "current_epoch": 2})),
            lambda: (run / "weights").mkdir(),
            lambda: (run / "weights" / "last.pt").write_bytes(b"w" * 99),
            lambda: shutil.copytree(DATA / "yolox_completed", root / "new-run"),
            lambda: shutil.rmtree(root / "yolox_failed"),
            lambda: (run / "metrics.jsonl").write_text(lines[3]),  # started over
            lambda: (run / "status.json").write_text("{broken"),
            lambda: None,  # nothing changed on the box (the cursor of `live` did)
            lambda: None,  # idle
        ]
        for step in steps:
            step()
            state = await refresh_both(kept, once)
        assert {r.name for r in state.runs} == {"yolox_completed", "yolo9_completed", "live",
                                                "new-run"}
        assert kept.session.probe_mode == "kept" and kept.session.probe_starts == 1
        # An idle refresh: the kept probe is told a nonce; one-shot sends the probe again.
        assert kept.session.last_bytes_out < 100
        assert once.session.last_bytes_out > 3000
        # Bytes down unchanged (the answers differ only in the clocks they carry).
        assert abs(kept.session.last_bytes_in - once.session.last_bytes_in) < 32
    finally:
        await kept.close()
        await once.close()


async def test_a_kept_probe_that_dies_is_started_again(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    bin_dir = tmp_path / "bin"
    server = sshd_factory(env=wrapped_python(bin_dir))
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    kept, once = pair(fleet)
    try:
        await refresh_both(kept, once)
        (pid,) = kept_pids(bin_dir)
        os.kill(pid, signal.SIGKILL)  # the OOM killer, or someone's pkill python
        with (root / "yolox_completed" / "train.log").open("a") as f:
            f.write("one more line\n")
        await refresh_both(kept, once)
        assert kept.session.probe_starts == 2 and len(kept_pids(bin_dir)) == 2
        assert kept.session.connects == 1 and kept.session.probe_mode == "kept"
    finally:
        await kept.close()
        await once.close()


async def test_a_kept_probe_that_hangs_is_dropped_and_the_next_starts_from_scratch(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    bin_dir = tmp_path / "bin"
    server = sshd_factory(env=wrapped_python(bin_dir))
    root = runs_root_with(tmp_path, "yolox_completed")
    metrics = root / "yolox_completed" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:2]))
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], timeout_seconds=2)
    kept, once = pair(fleet)
    try:
        await refresh_both(kept, once)
        (pid,) = kept_pids(bin_dir)
        os.kill(pid, signal.SIGSTOP)  # a box so loaded that the probe does not answer
        try:
            metrics.write_text("".join(lines[:4]))  # the answer it owes is lost with it
            hung = await kept.refresh()
            assert hung.connection is Connection.TIMEOUT, hung.error
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        state = await refresh_both(kept, once)
        assert [p.epoch for p in state.runs[0].history] == [1, 2, 3, 4]
        assert kept.session.probe_starts == 2
    finally:
        await kept.close()
        await once.close()


async def test_a_box_that_cannot_keep_a_probe_is_probed_one_shot(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    bin_dir = tmp_path / "bin"
    server = sshd_factory(env=wrapped_python(bin_dir))
    (bin_dir / "nokeep").touch()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    kept, once = pair(fleet)
    try:
        for _ in range(3):
            await refresh_both(kept, once)
        assert kept.session.probe_mode == "one-shot"
        assert len(kept_pids(bin_dir)) == 1  # tried once per connection, not every refresh
    finally:
        await kept.close()
        await once.close()


async def test_the_demo_boxes_keep_a_probe_and_the_faulty_one_does_not(
        tmp_path: Path, client_key: KeyPair) -> None:
    root = runs_root_with(tmp_path, "yolox_completed")
    states = {}
    for keep in (True, False):
        box = BoxServer(f"keep-{keep}", client_key.public_line, keep_probe=keep)
        await box.start()
        try:
            fleet = make_fleet(tmp_path, [{"name": "box", "host": "127.0.0.1", "port": box.port,
                                           "user": "root",
                                           "identity_file": str(client_key.private_path),
                                           "runs_roots": [str(root)]}],
                               known_hosts=[box.known_hosts_line()])
            watcher = BoxWatcher(fleet.boxes[0], fleet)
            try:
                for _ in range(2):
                    state = await watcher.refresh()
                    assert state.connection is Connection.OK, state.error
                states[keep] = (watcher.session.probe_mode, box.stats.refused_commands,
                                same_view(state))
            finally:
                await watcher.close()
        finally:
            await box.close()
    assert states[True][:2] == ("kept", 0)
    assert states[False][:2] == ("one-shot", 1)  # tried once, then one-shot
    assert states[True][2] == states[False][2]
