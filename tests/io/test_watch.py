"""`gpurent-tui watch` as a real process over a real sshd box: it pushes a completed run
unasked (once), alerts a run that dies while it watches, and exits cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd
from support.watch_output import WatchOutput
from support.webhook_server import WebhookServer

from tui.store.jsonl import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def test_watch_pushes_alerts_and_exits_cleanly_on_sigterm(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_running")
    weights = root / "yolox_completed" / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"best" * 1000)
    (weights / "last.pt").write_bytes(b"last" * 1000)
    # A run training under a live pid (this test's own) dies: its status.json is then
    # rewritten with a pid no process has, as after a reboot.
    running = root / "yolox_running" / "status.json"
    status = json.loads(running.read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=os.getpid(), started_at=now, updated_at=now)
    running.write_text(json.dumps(status))
    dest = tmp_path / "pushed"
    with WebhookServer() as hook:
        fleet = make_fleet(tmp_path, [box_entry(server, client_key, "b", runs_roots=[str(root)],
                                                push={"local_dir": str(dest),
                                                      "on_complete": True})],
                           known_hosts=[server.known_hosts_line()],
                           alerts={"webhook": f"{hook.url}/secret-topic", "format": "json"})
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "tui", "watch", "--config", fleet.source],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        out = WatchOutput(proc)
        try:
            out.wait_for("box b: ok")
            done = out.wait_for("milestone push of yolox_completed")
            if "started" in done:
                done = out.wait_for("milestone push of yolox_completed")
            assert "(run completed): done" in done, "".join(out.lines)
            # The trainer "dies": its pid is now one that no process has.
            status.update(pid=2 ** 22 + 17)
            running.write_text(json.dumps(status))
            alert = out.wait_for("alert run_died")
            assert "yolox_running" in alert
            out.wait_for("delivered (HTTP 200)")
            time.sleep(2.5)  # two more looks: nothing is due again
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            text = out.rest()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = text.splitlines()
    assert proc.returncode == 0, text
    assert "watch: stopped, every connection closed" in lines[-1]
    assert "secret-topic" not in text
    assert text.count("milestone push of") == 2  # started, done: once
    assert len(hook.posts) == 1 and hook.posts[0]["body"]["kind"] == "run_died"
    pushed = dest / "b" / "yolox_completed"
    assert (pushed / "weights" / "best.pt").read_bytes() == b"best" * 1000
    assert not list(pushed.rglob("*.part"))
    entries, _ = read_jsonl(isolated_dirs / "state" / "gpurent-tui" / "journal.jsonl")
    pushes = [e for e in entries if e["action"] == "push"]
    assert len(pushes) == 1 and pushes[0]["verified"] is True
    assert pushes[0]["milestone"] == "run completed" and pushes[0]["epoch"] == 6


def test_watch_ends_cleanly_on_sigint_with_a_box_down(tmp_path: Path) -> None:
    """Ctrl+C in its tmux pane: the same clean end as SIGTERM, with a box that never
    answered (its retries cut short)."""
    fleet = make_fleet(tmp_path, [{"name": "down", "host": "127.0.0.1", "port": 1}])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "tui", "watch", "--config", fleet.source],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = WatchOutput(proc)
    try:
        assert "connection refused" in out.wait_for("box down: unreachable")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        text = out.rest()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, text
    assert text.splitlines()[-1].endswith("watch: stopped, every connection closed")
    assert "Traceback" not in text


async def test_watch_applies_on_budget_push_and_stop(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """The budget policy without the screen: a box over its budget is pushed, verified,
    then stopped (its stop_command, its effect observed), once."""
    import asyncio

    from tui.runtime.watch_sink import Watch
    from tui.store.journal import Journal

    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    (root / "yolox_completed" / "weights").mkdir()
    (root / "yolox_completed" / "weights" / "last.pt").write_bytes(b"l" * 2048)
    marker = tmp_path / "stopped"
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "b", runs_roots=[str(root)], budget_usd=0.5,
        stop_command=f"touch {marker}", observe_command=f"test -e {marker}",
        pricing={"running_usd_per_hr": 3600.0}, push={"local_dir": str(tmp_path / "out")})],
        known_hosts=[server.known_hosts_line()], on_budget="push-and-stop")
    journal = Journal(tmp_path / "journal.jsonl")
    logs: list[str] = []
    watch = Watch(fleet, journal=journal, log=logs.append)
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    try:
        async with asyncio.timeout(60):
            while not any("budget: push and stop: done" in line for line in logs):
                await asyncio.sleep(0.1)
    finally:
        stop.set()
        assert await task == 0
    actions = [(e["action"], e["outcome"]) for e in journal.entries]
    assert actions == [("push", "done"), ("stop", "done")], logs
    assert any("b is over its budget" in line for line in logs)
    assert sum("budget: push and stop: started" in line for line in logs) == 1


async def test_watch_never_logs_a_webhook_whose_secret_is_its_host(tmp_path: Path) -> None:
    """`https://SECRET.m.pipedream.net/...`: watch's first line named the webhook by its
    host, and so did every delivery failure after it."""
    import asyncio

    from tui.runtime.watch_sink import Watch
    from tui.store.journal import Journal

    secret = "hostsecret4q8z"
    fleet = make_fleet(tmp_path, [{"name": "down", "host": "127.0.0.1", "port": 1}],
                       alerts={"webhook": f"https://{secret}.m.pipedream.net/hook",
                               "unreachable_minutes": 0.001})
    logs: list[str] = []
    watch = Watch(fleet, journal=Journal(tmp_path / "journal.jsonl"), log=logs.append,
                  retry_seconds=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    try:
        async with asyncio.timeout(60):
            while not any("not delivered" in line for line in logs):
                await asyncio.sleep(0.1)
    finally:
        stop.set()
        await task
    assert any("alert unreachable" in line for line in logs), logs
    assert "alerts to webhook" in logs[0]
    assert not [line for line in logs if secret in line or "pipedream" in line]
