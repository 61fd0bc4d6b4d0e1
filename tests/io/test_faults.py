"""Faults and bad input: every other box keeps being served, the hurt one says what is wrong,
nothing already gathered is lost, nothing a run name holds is executed, no watcher dies.

Real OpenSSH boxes (tests/support/sshd.py) and an in-process asyncssh box that misbehaves on cue
(tests/support/asyncssh_box.py), all on 127.0.0.1, with short timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.asyncssh_box import FaultyBox
from support.fleets import DATA, box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd
from textual.pilot import Pilot

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.box import BoxState, Connection, fold_answer, probe_request
from tui.model.config import FleetConfig
from tui.model.runs import HISTORY_LIMIT, Health
from tui.model.text import clean
from tui.onbox import probe as probe_script
from tui.remote.watch import BoxWatcher, snapshot_fleet
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from tui.screens.run_detail import RunDetail

Factory = Callable[..., Sshd]


class Watch:
    """A BoxWatcher's endless loop in a task (as the panel's worker runs it), and its updates."""

    def __init__(self, watcher: BoxWatcher) -> None:
        self.watcher = watcher
        self.updates: list[BoxState] = []
        self.task = asyncio.create_task(watcher.run(self.updates.append))

    @property
    def state(self) -> BoxState:
        return self.updates[-1]

    async def until(self, predicate: Callable[[BoxState], bool], timeout: float = 20,
                    after: int = 0) -> BoxState:
        """The first update from index `after` on that satisfies `predicate`."""
        async with asyncio.timeout(timeout):
            while True:
                for state in self.updates[after:]:
                    if predicate(state):
                        return state
                assert not self.task.done(), f"the watcher died: {self.task!r}"
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@contextlib.asynccontextmanager
async def watching(fleet: FleetConfig) -> AsyncIterator[dict[str, Watch]]:
    """Every box's watcher running (backoff without jitter); each must still run at the end."""
    watches = {box.name: Watch(BoxWatcher(box, fleet, jitter=lambda: 0.0))
               for box in fleet.boxes}
    try:
        yield watches
        for name, watch in watches.items():
            assert not watch.task.done(), f"the watcher of {name} died: {watch.task!r}"
    finally:
        for watch in watches.values():
            await watch.stop()


def is_ok(state: BoxState) -> bool:
    """Answered, with every run's history in (a first look answers without it)."""
    return state.connection is Connection.OK and not state.loading


def run_names(state: BoxState) -> list[str]:
    return [r.name for r in state.runs]


def recorded(state: BoxState) -> dict[str, Any]:
    """What a refresh must never lose: per run its status, history, log and weights."""
    return {r.name: (r.status, r.history, r.log_tail, r.weights) for r in state.runs}


@pytest.fixture
async def faulty(tmp_path: Path, client_key: KeyPair) -> AsyncIterator[FaultyBox]:
    box = FaultyBox(client_key.public_line, cwd=tmp_path)
    await box.start()
    try:
        yield box
    finally:
        await box.close()


def two_boxes(tmp_path: Path, good: Sshd, hurt: FaultyBox, key: KeyPair,
              hurt_timeout: float = 1.5) -> FleetConfig:
    """`good` (real sshd) and `hurt` (in-process), each with its own recorded runs. Only
    the hurt box has a short timeout: a loaded machine must not time out the good one."""
    good_root = runs_root_with(tmp_path, "yolox_completed", name="good-runs")
    hurt_root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", name="hurt-runs")
    return make_fleet(tmp_path, [
        box_entry(good, key, "good", runs_roots=[str(good_root)]),
        {**box_entry(good, key, "hurt", runs_roots=[str(hurt_root)]), "port": hurt.port,
         "timeout_seconds": hurt_timeout},
    ], known_hosts=[good.known_hosts_line(), hurt.known_hosts_line()], refresh_seconds=0.3,
        timeout_seconds=10)


# --- the connection -----------------------------------------------------------------------


async def test_slow_box_times_out_alone_then_recovers_by_itself(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    fleet = two_boxes(tmp_path, sshd_factory(), faulty, client_key)
    async with watching(fleet) as w:
        first = await w["hurt"].until(is_ok)
        assert run_names(first) == ["yolox_completed", "yolox_failed"]
        faulty.delay = 4.0  # longer than the box's 1.5 s timeout
        mark = len(w["good"].updates)
        slow = await w["hurt"].until(lambda s: s.connection is not Connection.OK, timeout=10)
        assert slow.connection is Connection.TIMEOUT
        assert "probe did not answer within 1.5 s" in (slow.error or "")
        assert slow.runs == first.runs  # nothing gathered is lost
        assert slow.retry_at is not None
        # The good box kept refreshing while the slow one hung.
        assert len(w["good"].updates) > mark
        assert all(s.connection is Connection.OK for s in w["good"].updates)
        faulty.delay = 0.0
        back = await w["hurt"].until(is_ok, after=len(w["hurt"].updates), timeout=15)
        assert recorded(back) == recorded(first) and back.failures == 0


async def test_connection_dropped_mid_probe_is_unreachable_then_recovers(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    fleet = two_boxes(tmp_path, sshd_factory(), faulty, client_key, hurt_timeout=5)
    async with watching(fleet) as w:
        first = await w["hurt"].until(is_ok)
        faulty.drop = True
        dropped = await w["hurt"].until(lambda s: s.connection is not Connection.OK, timeout=10)
        assert dropped.connection is Connection.UNREACHABLE, dropped.error
        assert "connection lost during the probe" in (dropped.error or "")
        assert dropped.runs == first.runs
        assert is_ok(w["good"].state)
        faulty.drop = False
        back = await w["hurt"].until(is_ok, after=len(w["hurt"].updates), timeout=15)
        assert recorded(back) == recorded(first)


def slow_python(directory: Path) -> tuple[dict[str, str], Path, Path]:
    """A `python3` for an sshd box that sleeps 5 s while the `slow` flag file exists, and
    touches `started` when a probe begins: a probe made slow, as a loaded box makes it.
    Each one's pid goes to `pids` (the kept probe must be killed for a new one to start)."""
    directory.mkdir()
    slow, started = directory / "slow", directory / "started"
    exe = directory / "python3"
    exe.write_text(f"#!/bin/sh\necho $$ >> '{directory / 'pids'}'\ntouch '{started}'\n"
                   f"[ -e '{slow}' ] && sleep 5\nexec /usr/bin/python3 \"$@\"\n")
    exe.chmod(0o755)
    return {"PATH": f"{directory}:/usr/bin:/bin"}, slow, started


async def test_sshd_killed_mid_probe_then_back_without_a_poke(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    env, slow, started = slow_python(tmp_path / "bin")
    server = sshd_factory("slow", env=env)
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "box", runs_roots=[str(root)]),
        {**box_entry(server, client_key, "other", runs_roots=[str(root)]), "port": faulty.port},
    ], known_hosts=[server.known_hosts_line(), faulty.known_hosts_line()],
        refresh_seconds=0.3, timeout_seconds=15)
    async with watching(fleet) as w:
        first = await w["box"].until(is_ok)
        slow.touch()
        started.unlink()
        for pid in (tmp_path / "bin" / "pids").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)  # the kept probe dies: the next one is slow
        async with asyncio.timeout(10):
            while not started.exists():
                await asyncio.sleep(0.02)
        killed_at = time.monotonic()
        server.stop()  # mid-probe: the probe sleeps on the box
        down = await w["box"].until(lambda s: s.connection is not Connection.OK)
        # Noticed when the connection dropped, not after the 15 s timeout.
        assert time.monotonic() - killed_at < 8
        # The session may die a moment before its connection does: sshd then reports the
        # probe killed by SIGKILL first. Either way the next refresh finds the box gone.
        assert ("connection lost during the probe" in (down.error or "")
                or "probe killed by signal KILL" in (down.error or "")), down.error
        gone = await w["box"].until(lambda s: "connection refused" in (s.error or ""))
        assert gone.connection is Connection.UNREACHABLE
        assert recorded(down) == recorded(gone) == recorded(first)
        slow.unlink()
        server.start()  # same port, same host key: the network is back
        back = await w["box"].until(is_ok, after=len(w["box"].updates))
        assert recorded(back) == recorded(first)
        assert w["box"].watcher.session.connects == 2
        assert is_ok(w["other"].state)


async def test_network_cut_and_restored_reconnects_by_itself(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    fleet = two_boxes(tmp_path, sshd_factory(), faulty, client_key, hurt_timeout=5)
    async with watching(fleet) as w:
        first = await w["hurt"].until(is_ok)
        await faulty.cut()
        down = await w["hurt"].until(lambda s: s.connection is not Connection.OK)
        assert down.connection is Connection.UNREACHABLE, down.error
        again = await w["hurt"].until(lambda s: "connection refused" in (s.error or ""))
        assert recorded(again) == recorded(first) and again.failures >= 1
        await faulty.restore()
        back = await w["hurt"].until(is_ok, after=len(w["hurt"].updates))
        assert recorded(back) == recorded(first)
        assert all(s.connection is Connection.OK for s in w["good"].updates)


async def test_jump_host_killed_then_back_while_the_box_is_fine(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    jump = sshd_factory("jump")
    box = sshd_factory("box", allow_tcp_forwarding=False)
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(
        tmp_path,
        [box_entry(box, client_key, "behind", runs_roots=[str(root)],
                   jump=f"root@127.0.0.1:{jump.port}"),
         box_entry(box, client_key, "direct", runs_roots=[str(root)])],
        known_hosts=[jump.known_hosts_line(), box.known_hosts_line()],
        refresh_seconds=0.3, timeout_seconds=10)
    async with watching(fleet) as w:
        first = await w["behind"].until(is_ok)
        jump.stop()
        down = await w["behind"].until(lambda s: f"jump host root@127.0.0.1:{jump.port}"
                                       in (s.error or ""))
        assert down.connection is Connection.UNREACHABLE
        assert "connection refused" in (down.error or "")
        assert recorded(down) == recorded(first)
        jump.start()
        back = await w["behind"].until(is_ok, after=len(w["behind"].updates))
        assert recorded(back) == recorded(first)
        # The box itself never went down.
        assert all(s.connection is Connection.OK for s in w["direct"].updates)


# --- host keys and identities -------------------------------------------------------------


async def refresh_until(watcher: BoxWatcher, predicate: Callable[[BoxState], bool],
                        tries: int = 4) -> BoxState:
    """Refresh until `predicate` holds: the first refresh after a server went away may
    only find the kept connection dead."""
    for _ in range(tries):
        state = await watcher.refresh()
        if predicate(state):
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"never reached: {state.connection}: {state.error}")


async def test_host_key_changed_between_refreshes_is_refused_until_known_hosts_is_fixed(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], timeout_seconds=10)
    watcher = BoxWatcher(fleet.boxes[0], fleet, jitter=lambda: 0.0)
    try:
        first = await watcher.refresh()
        assert is_ok(first), first.error
        server.stop()  # the box is rebuilt: same address, a new host key
        rebuilt = sshd_factory("rebuilt", port=server.port)
        changed = await refresh_until(
            watcher, lambda s: s.connection is Connection.HOST_KEY_CHANGED)
        assert f"{tmp_path / 'known_hosts'}:1" in (changed.error or "")
        assert f"ssh-keygen -R '[127.0.0.1]:{server.port}'" in (changed.error or "")
        assert recorded(changed) == recorded(first)
        for _ in range(2):  # refused at every later refresh, never silently accepted
            again = await watcher.refresh()
            assert again.connection is Connection.HOST_KEY_CHANGED
            assert recorded(again) == recorded(first)
        (tmp_path / "known_hosts").write_text(rebuilt.known_hosts_line() + "\n")
        fixed = await watcher.refresh()
        assert is_ok(fixed), fixed.error
        assert recorded(fixed) == recorded(first) and fixed.failures == 0
    finally:
        await watcher.close()


async def test_identity_removed_after_connect_keeps_the_session_then_fails_clearly(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    key_copy = tmp_path / "id_copy"
    shutil.copy(client_key.private_path, key_copy)
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            identity_file=str(key_copy))],
                       known_hosts=[server.known_hosts_line()], timeout_seconds=10)
    watcher = BoxWatcher(fleet.boxes[0], fleet, jitter=lambda: 0.0)
    try:
        first = await watcher.refresh()
        assert is_ok(first), first.error
        key_copy.unlink()
        kept = await watcher.refresh()
        assert is_ok(kept) and watcher.session.connects == 1  # the open session needs no key
        server.restart()  # the next login needs the key
        failed = await refresh_until(watcher, lambda s: s.connection is Connection.AUTH_FAILED)
        assert f"identity file {key_copy} does not exist" in (failed.error or "")
        assert recorded(failed) == recorded(first)
    finally:
        await watcher.close()


def unusable_identities(directory: Path) -> dict[str, tuple[Path, str]]:
    """Identity files a person can end up pointing at, and words the refusal must carry."""
    directory.mkdir()
    garbage = directory / "garbage"
    garbage.write_bytes(os.urandom(300))
    encrypted = directory / "encrypted"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(encrypted)],
                   check=True, capture_output=True)
    folder = directory / "folder"
    folder.mkdir()
    return {
        "garbage": (garbage, "cannot load identity file"),
        "encrypted": (encrypted, "Passphrase must be specified"),
        "public": (encrypted.with_name("encrypted.pub"), "cannot load identity file"),
        "folder": (folder, "is not a file"),
        "unreadable": (Path("/proc/self/mem"), "cannot load identity file"),
    }


async def test_unusable_identity_files_are_auth_failed_with_words(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    bad = unusable_identities(tmp_path / "keys")
    fleet = make_fleet(
        tmp_path,
        [box_entry(server, client_key, "good", runs_roots=[str(root)]),
         *(box_entry(server, client_key, name, identity_file=str(path))
           for name, (path, _) in bad.items())],
        known_hosts=[server.known_hosts_line()], timeout_seconds=10)
    states = {s.name: s for s in await snapshot_fleet(fleet)}
    assert is_ok(states["good"]) and run_names(states["good"]) == ["yolox_completed"]
    for name, (path, words) in bad.items():
        state = states[name]
        assert state.connection is Connection.AUTH_FAILED, (name, state.error)
        assert words in (state.error or "") and str(path) in (state.error or ""), state.error


# --- bad files on the box, through the real probe over sshd --------------------------------


def status_text(fixture: str, **changes: Any) -> str:
    status = json.loads((DATA / fixture / "status.json").read_text())
    status.update(changes)
    return json.dumps(status)


def hostile_names(tmp_path: Path) -> list[str]:
    """Run names that a shell would run; each would create a file in tmp_path if executed."""
    return ["with space", "quo'te\"s", "new\nline", f"$(touch {tmp_path}/pwned1)",
            f"`touch {tmp_path}/pwned2`", f"x; touch {tmp_path}/pwned3 #", "[/] [bold]markup"]


def bad_runs_root(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """One runs root: healthy runs next to every kind of bad file. Returns the root and
    each run's expected health (with words its reason or problems must hold, after `:`)."""
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", name="bad-runs")
    expect = {"yolox_completed": "completed", "yolox_failed": "failed"}

    def run(name: str, status: str | None, health: str, **files: str | bytes) -> Path:
        run_dir = root / name
        shutil.copytree(DATA / "yolox_completed", run_dir)
        if status is not None:
            (run_dir / "status.json").write_text(status)
        for file, content in files.items():
            path = run_dir / file.replace("_", ".")
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        expect[clean(name)] = health  # the name as shown: control characters replaced
        return run_dir

    completed = (DATA / "yolox_completed" / "status.json").read_text()
    run("empty", "", "unreadable:could not be read")
    run("truncated", completed[:40], "unreadable:could not be read")
    run("not-object", "[1, 2]", "unreadable:not a JSON object")
    run("schema-2", status_text("yolox_completed", schema_version=2),
        "unreadable:schema_version 2 is not supported")
    run("nan", completed.replace('"train_loss": ', '"a": NaN, "b": -Infinity, "train_loss": ')
        .replace('"best_metric": 0.0', '"best_metric": Infinity'), "completed")
    run("huge", status_text("yolox_running", eta_seconds=1e308, mean_epoch_seconds=1e308,
                            current_epoch=10**30, total_epochs=10**40, best_metric=-1e308,
                            pid=10**18).replace("1e+308", "1e999", 1),
        # 1e308 s epochs are no duration: the claim no longer lifts the stall limit to
        # infinity, so two days without an update read stalled (and no ETA is made up)
        "stalled:no update for")
    run("negative", status_text("yolox_running", eta_seconds=-5, current_epoch=-5,
                                total_epochs=-1, pid=-1, mean_epoch_seconds=-3), "stalled")
    run("digits", completed.replace('"best_epoch": 1', '"best_epoch": ' + "9" * 5000),
        "completed")
    run("deep", "[" * 100_000, "unreadable:could not be read")
    run("nested", status_text("yolox_completed", model_family="N").replace(
        '"N"', "[" * 950 + "]" * 950), "unreadable:nested deeper than 32 levels")
    run("year-1", status_text("yolox_running", updated_at="0001-01-01T00:00:00+05:00",
                              started_at="0001-01-01T00:00:00+05:00", pid=None), "stalled")
    lines = (DATA / "yolox_completed" / "metrics.jsonl").read_text().splitlines(keepends=True)
    run("metrics-partial", None, "completed", metrics_jsonl="".join(lines[:5]) + lines[5][:99])
    run("metrics-bad-middle", None, "completed:line 3 of this read is not JSON",
        metrics_jsonl="".join([*lines[:2], "{not json\n", *lines[2:]]))
    run("metrics-deep", None, "completed:line 2 of this read is not JSON",
        metrics_jsonl="".join([lines[0], "[" * 100_000 + "\n", *lines[1:]]))
    log = run("log-bad", None, "completed") / "train.log"
    with log.open("ab") as f:
        f.write(b"bad bytes \xff\xfe here\n")
        f.truncate(2 * 1024**3)  # 2 GB, sparse: only the tail may be read
        f.seek(0, 2)
        f.write(b"\nthe last line\n")
    for name in hostile_names(tmp_path):
        run(name, None, "completed")
    return root, expect


def strict_json(text: str) -> Any:
    def refuse(word: str) -> None:
        raise AssertionError(f"status --json holds {word}, which is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_bad_status_metrics_and_log_files_mark_only_their_runs(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, expect = bad_runs_root(tmp_path)
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    new = sshd_factory("new")
    # A box whose python3 has no int-digits limit (before 3.11 none had one).
    old = sshd_factory("old", env={"PYTHONINTMAXSTRDIGITS": "0"})
    fleet = make_fleet(tmp_path, [
        box_entry(new, client_key, "new", runs_roots=[str(root), str(loop)]),
        box_entry(old, client_key, "old", runs_roots=[str(root)]),
    ], known_hosts=[new.known_hosts_line(), old.known_hosts_line()], timeout_seconds=20)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = strict_json(capsys.readouterr().out)
    assert not list(tmp_path.glob("pwned*"))  # no run name was executed
    for box in doc["boxes"]:
        assert box["connection"] == "ok", box["error"]
        runs = {r["name"]: r for r in box["runs"]}
        assert sorted(runs) == sorted(expect)
        for name, want in expect.items():
            health, _, words = want.partition(":")
            run = runs[name]
            assert run["health"] == health, (box["name"], name, run["reason"])
            said = " ".join([run["reason"], *run["problems"]])
            assert words in said, (box["name"], name, said)
        assert len(runs["yolox_completed"]["loss_history"]) == 6
        assert len(runs["metrics-partial"]["loss_history"]) == 5
        assert len(runs["metrics-bad-middle"]["loss_history"]) == 6
        assert len(runs["metrics-deep"]["loss_history"]) == 6
        assert runs["huge"]["eta_seconds"] is None and runs["huge"]["total_epochs"] is None
    new_box = next(b for b in doc["boxes"] if b["name"] == "new")
    assert any("Too many levels of symbolic links" in p for p in new_box["problems"])


# --- long histories, many runs, vanishing runs ----------------------------------------------


def long_metrics(run_dir: Path, lines: int) -> None:
    """`lines` epochs of metrics.jsonl (compact records: the count is what is under test)."""
    with (run_dir / "metrics.jsonl").open("w") as f:
        for epoch in range(1, lines + 1):
            f.write(json.dumps({"epoch": epoch, "time": 0.5, "train/loss": 10 / epoch,
                                "current_metric": epoch / lines,
                                "current_metric_name": "metrics/mAP50-95"}) + "\n")


async def max_loop_lag(stop: asyncio.Event) -> float:
    """The longest the event loop went without running this task (the panel's frame)."""
    worst = 0.0
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(0.01)
        worst = max(worst, time.monotonic() - before - 0.01)
    return worst


async def test_fifty_thousand_metrics_lines_catch_up_bounded_and_responsive(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    long_metrics(root / "yolox_completed", 50_000)
    await faulty.cut()  # the box is down when the panel starts
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "long", runs_roots=[str(root)]),
        {**box_entry(server, client_key, "late", runs_roots=[str(root)]), "port": faulty.port},
    ], known_hosts=[server.known_hosts_line(), faulty.known_hosts_line()],
        refresh_seconds=0.3, timeout_seconds=10)
    stop = asyncio.Event()
    lag = asyncio.create_task(max_loop_lag(stop))
    started = time.monotonic()

    def caught_up(state: BoxState) -> bool:
        return is_ok(state) and bool(state.runs) and bool(state.runs[0].history) \
            and state.runs[0].history[-1].epoch == 50_000

    async with watching(fleet) as w:
        full = await w["long"].until(caught_up, timeout=60)
        took = time.monotonic() - started
        stop.set()
        (run,) = full.runs
        # The whole history arrived (a capped read at a time), bounded to HISTORY_LIMIT.
        assert len(run.history) == HISTORY_LIMIT and run.history[0].epoch == 45_001
        assert all(len(s.runs[0].history) <= HISTORY_LIMIT for s in w["long"].updates if s.runs)
        assert w["long"].watcher.session.last_bytes_in < 2_000_000
        assert took < 30, took
        worst = await lag
        # ~0.1 s per 1 MB read on an idle 2-core machine (compact lines: 9,000 a read).
        assert worst < 1.5, f"the event loop stalled {worst:.2f} s while the history was read"
        # A box that was down at the start catches up the same way once it answers.
        await w["late"].until(lambda s: s.connection is not Connection.OK)
        await faulty.restore()
        late = await w["late"].until(caught_up, timeout=30)
        assert late.runs[0].history == run.history
        # After the catch-up only what is new travels.
        with (root / "yolox_completed" / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({"epoch": 50_001, "train/loss": 0.1}) + "\n")
        more = await w["long"].until(lambda s: bool(s.runs and s.runs[0].history)
                                     and s.runs[0].history[-1].epoch == 50_001)
        assert len(more.runs[0].history) == HISTORY_LIMIT
        assert w["long"].watcher.session.last_bytes_in < 2000


async def test_run_directory_deleted_between_refreshes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], timeout_seconds=10)
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    try:
        first = await watcher.refresh()
        assert run_names(first) == ["yolox_completed", "yolox_failed"]
        shutil.rmtree(root / "yolox_failed")
        after = await watcher.refresh()
        assert is_ok(after) and run_names(after) == ["yolox_completed"]
        assert after.notices == ("run 'yolox_failed' is gone from the box",)
        assert recorded(after)["yolox_completed"] == recorded(first)["yolox_completed"]
    finally:
        await watcher.close()


def test_run_directory_deleted_mid_probe_keeps_what_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    roots = (str(root),)
    first = fold_answer(BoxState(name="b"),
                        probe_script.build_answer(probe_request(BoxState(name="b"), roots)), 0)
    (root / "yolox_failed" / "metrics.jsonl").open("a").write("{}\n")  # something to re-read
    found = probe_script.find_runs

    def find_then_delete(*args: Any, **kwargs: Any) -> Any:
        result = found(*args, **kwargs)
        shutil.rmtree(root / "yolox_failed")  # after the walk saw it, before it is read
        return result

    monkeypatch.setattr(probe_script, "find_runs", find_then_delete)
    answer = json.loads(json.dumps(probe_script.build_answer(probe_request(first, roots))))
    state = fold_answer(first, answer, 1)
    failed = next(r for r in state.runs if r.name == "yolox_failed")
    assert failed.health is Health.UNREADABLE
    assert "vanished while it was being read" in failed.reason
    assert recorded(state) == recorded(first)  # the last good status and history stay
    monkeypatch.setattr(probe_script, "find_runs", found)
    later = fold_answer(state, probe_script.build_answer(probe_request(state, roots)), 2)
    assert run_names(later) == ["yolox_completed"]
    assert later.notices == ("run 'yolox_failed' is gone from the box",)


async def test_three_hundred_runs_on_one_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = tmp_path / "runs"
    for i in range(300):
        shutil.copytree(DATA / ("yolox_completed" if i % 2 else "yolox_failed"),
                        root / f"exp{i // 50}" / f"run {i:03d}")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], timeout_seconds=20)
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    try:
        started = time.monotonic()
        state = await watcher.refresh(catch_up=True)
        cold = time.monotonic() - started
        assert is_ok(state), state.error
        assert len(state.runs) == 300 and not state.truncated
        assert state.counts()[Health.COMPLETED] == 150 and state.counts()[Health.FAILED] == 150
        started = time.monotonic()
        again = await watcher.refresh()
        idle = time.monotonic() - started
        assert recorded(again) == recorded(state)
        assert watcher.session.last_bytes_in < 300 * 200  # unchanged runs cost a few bytes
        assert cold < 15 and idle < 5, (cold, idle)
    finally:
        await watcher.close()


def fake_nvidia_smi(directory: Path, script: str) -> dict[str, str]:
    directory.mkdir()
    exe = directory / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return {"PATH": f"{directory}:/usr/bin:/bin"}


async def test_failing_and_hanging_nvidia_smi_leave_the_box_ok(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    root = runs_root_with(tmp_path, "yolox_completed")
    failing = sshd_factory("failing", env=fake_nvidia_smi(
        tmp_path / "failing", "echo 'NVML: Driver/library version mismatch' >&2; exit 9\n"))
    hanging = sshd_factory("hanging", env=fake_nvidia_smi(tmp_path / "hanging", "sleep 30\n"))
    absent = sshd_factory("absent", env={"PATH": "/usr/bin:/bin"})
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, name, runs_roots=[str(root)])
        for name, server in (("failing", failing), ("hanging", hanging), ("absent", absent))],
        known_hosts=[s.known_hosts_line() for s in (failing, hanging, absent)],
        timeout_seconds=6)
    started = time.monotonic()
    states = {s.name: s for s in await snapshot_fleet(fleet)}
    assert time.monotonic() - started < 12  # the hanging one gives up after 2 s
    for state in states.values():
        assert is_ok(state), state.error
        assert run_names(state) == ["yolox_completed"] and state.gpus == ()
    assert states["failing"].gpu_note == \
        "nvidia-smi exited 9: NVML: Driver/library version mismatch"
    assert "nvidia-smi did not answer within" in (states["hanging"].gpu_note or "")
    assert states["absent"].gpu_note == "no nvidia-smi on this box"


# --- the panel ------------------------------------------------------------------------------


async def until(pilot: Pilot, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the panel never showed the expected state"
        await pilot.pause(0.05)


@dataclass
class Shown:
    """One box as the fleet screen shows it."""

    app: GpurentApp
    name: str

    @property
    def box(self) -> BoxState:
        return self.app.states[self.name]


def section(app: GpurentApp, name: str) -> Shown:
    return Shown(app, name)


def rows(app: GpurentApp) -> int:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return len(screen.fleet_list.order)


def box_worker_running(app: GpurentApp, box: str) -> bool:
    return app.runtime.watching(box)


def said(app: GpurentApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_panel_keeps_every_worker_through_faults_and_shows_hostile_runs(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    server = sshd_factory()
    root, expect = bad_runs_root(tmp_path)
    hurt_root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", name="hurt-runs")
    fleet = make_fleet(tmp_path, [
        box_entry(server, client_key, "good", runs_roots=[str(root)]),
        {**box_entry(server, client_key, "hurt", runs_roots=[str(hurt_root)]),
         "port": faulty.port, "timeout_seconds": 1.5},
    ], known_hosts=[server.known_hosts_line(), faulty.known_hosts_line()],
        refresh_seconds=1, timeout_seconds=10)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        good, hurt = section(app, "good"), section(app, "hurt")
        await until(pilot, lambda: good.box.connection == "ok" and hurt.box.connection == "ok"
                    and rows(app) == len(expect) + 2)
        # The rows drew every run; the hardest ones also open: names with markup, a newline
        # and $(...), numbers near 1e308, a 2 GB log, a metrics line nested 100,000 deep.
        paths = {r.name: r.path for r in good.box.runs}
        for name in ("huge", "[/] [bold]markup", "new\nline", "log-bad", "metrics-deep",
                     hostile_names(tmp_path)[3]):
            app.open_run("good", paths[clean(name)])
            await until(pilot, lambda: isinstance(app.screen, RunDetail))
            await pilot.pause()
            await pilot.press("m", "escape")
        await pilot.press("ctrl+p", *"open good")
        await pilot.pause(0.3)
        await pilot.press("escape", "escape")
        before = recorded(hurt.box)

        async def hurt_shows(state: str, words: str) -> None:
            await until(pilot, lambda: hurt.box.connection == state
                        and words in (hurt.box.error or ""))
            assert recorded(hurt.box) == before  # still on screen, nothing lost
            assert box_worker_running(app, "hurt") and box_worker_running(app, "good")
            assert good.box.connection == "ok"

        faulty.delay = 4.0
        await hurt_shows("timeout", "did not answer within 1.5 s")
        faulty.delay, faulty.drop = 0.0, True
        await hurt_shows("unreachable", "connection lost during the probe")
        faulty.drop = False
        await faulty.cut()
        await hurt_shows("unreachable", "connection refused")
        await faulty.restore()
        await pilot.press("r")  # cut the backoff short (the core test waits it out)
        await until(pilot, lambda: hurt.box.connection == "ok")
        assert box_worker_running(app, "hurt") and box_worker_running(app, "good")
        # The strip follows within a quarter second (it counts the whole fleet).
        await until(pilot, lambda: "2/2 boxes up" in str(app.query_one("#fleet-head").render()))
    assert not list(tmp_path.glob("pwned*"))


async def test_panel_says_once_that_the_ledger_and_journal_cannot_be_used(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path) -> None:
    state_dir = isolated_dirs / "state" / "gpurent-tui"
    (state_dir / "ledger.jsonl").mkdir(parents=True)  # a directory where the file belongs
    journal = state_dir / "journal.jsonl"
    journal.write_text('{"v": 1, "time": 1.0, "box": "box", "action": "stop", '
                       '"outcome": "done"}\n' + "[" * 100_000 + '\n'  # nested past the stack
                       '{"v": 1, "time": 2.0, "bo')  # and a torn last line
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)],
                                            pricing={"running_usd_per_hr": 1.5},
                                            stop_command="true", observe_command="true")],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=0.2)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 40)) as pilot:
        box = section(app, "box")
        await until(pilot, lambda: box.box.connection == "ok")
        updates = box.box.last_ok_at
        await until(pilot, lambda: box.box.last_ok_at != updates)  # a few refreshes later
        # The money picture follows box updates within a quarter second.
        await until(pilot, lambda: any("cannot be written" in w for w in said(app)))
        words = said(app)
        assert sum("cost ledger" in w and "cannot be read" in w for w in words) == 1, words
        assert sum("cost ledger" in w and "cannot be written" in w for w in words) == 1, words
        assert sum("2 unreadable line(s) skipped" in w for w in words) == 1, words
        assert len(app.journal.entries) == 1
        # Now the journal cannot be written either: an action still ends, and says so.
        journal.unlink()
        journal.mkdir()
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: any("journal" in w and "cannot be written" in w
                                       for w in said(app)))
        assert box_worker_running(app, "box") and box.box.connection == "ok"
        assert app.journal.entries[-1]["action"] == "stop"  # kept in memory
