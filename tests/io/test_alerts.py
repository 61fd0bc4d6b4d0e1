"""Alerts out of the process, against a loopback webhook and a real shell command; a box
stopped behind our back, against the loopback Vast and RunPod stand-ins."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.provider_servers import RunPodServer, VastServer, runpod_pod, vast_instance
from support.webhook_server import WebhookServer

from tui.actions.alerts import AlertSender
from tui.actions.guardian import Guardian
from tui.model.alerts import PREEMPTED, RUN_DIED, event
from tui.model.config import AlertConfig, parse_config
from tui.providers.meter import CostMeter
from tui.store.journal import Journal
from tui.store.ledger import Ledger

SECRET = "T0KEN-in-the-path"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def fleet_with(alerts: str, tmp_path: Path, boxes: str = '[[box]]\nname = "b"\nhost = "h"\n'
               ) -> object:
    return parse_config(f"[alerts]\n{alerts}\n{boxes}", str(tmp_path / "fleet.toml"))


async def settle(sender: AlertSender) -> None:
    await sender.aclose(grace=10.0)


@pytest.mark.parametrize("fmt", ["json", "ntfy", "slack", "discord"])
async def test_one_post_per_event_and_the_cooldown(tmp_path: Path, fmt: str) -> None:
    with WebhookServer() as hook:
        fleet = fleet_with(f'webhook = "{hook.url}/topic-{SECRET}"\nformat = "{fmt}"\n'
                           "cooldown_minutes = 10", tmp_path)
        logs: list[str] = []
        clock = Clock()
        sender = AlertSender(fleet.alerts, log=logs.append)  # type: ignore[attr-defined]
        guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), sender=sender,  # type: ignore
                            clock=clock)
        died = event(RUN_DIED, "b", "b/r1: dead: pid 4242 gone", clock.now, "r1")
        assert guardian.alert([died, died]) == [died]
        clock.now += 599
        assert guardian.alert([died]) == []  # within the cool-down: not again
        await settle(sender)
        assert len(hook.posts) == 1
        clock.now += 1
        assert guardian.alert([died]) == [died]
        await settle(sender)
        assert len(hook.posts) == 2
    body = hook.posts[0]["body"]
    assert hook.posts[0]["headers"]["Content-Type"] == "application/json"
    if fmt == "json":
        assert body["kind"] == "run_died" and body["box"] == "b" and body["run"] == "r1"
        assert hook.posts[0]["path"] == f"/topic-{SECRET}"
    elif fmt == "ntfy":
        assert hook.posts[0]["path"] == "/"  # JSON publishing: the topic goes in the body
        assert body["topic"] == f"topic-{SECRET}" and "pid 4242" in body["message"]
        assert body["title"] == "gpurent-tui: run died on b"
    elif fmt == "slack":
        assert set(body) == {"text"} and "pid 4242" in body["text"]
    else:
        assert set(body) == {"content"} and "pid 4242" in body["content"]
    assert logs and all(SECRET not in line for line in logs)
    assert all("http://127.0.0.1:" in line for line in logs)


async def test_a_dead_webhook_costs_its_own_task_and_its_url_is_never_logged(
        tmp_path: Path) -> None:
    with WebhookServer(hang=30) as hook:
        logs: list[str] = []
        sender = AlertSender(AlertConfig(webhook=f"{hook.url}/{SECRET}"), log=logs.append,
                             timeout=0.5)
        sender.send([event(RUN_DIED, "b", "dead", 0.0)])
        assert logs == []  # send() returned at once: the POST is still in flight
        await asyncio.sleep(0)
        await settle(sender)
    assert len(logs) == 1 and "no answer within 0.5 s" in logs[0] and SECRET not in logs[0]
    refused = AlertSender(AlertConfig(webhook=f"http://127.0.0.1:1/{SECRET}"),
                          log=logs.append)
    refused.send([event(RUN_DIED, "b", "dead", 0.0)])
    await settle(refused)
    assert "ConnectError" in logs[-1] and SECRET not in logs[-1]


async def test_the_command_reads_the_event_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "event.json"
    logs: list[str] = []
    sender = AlertSender(AlertConfig(command=f"cat > '{out}'; exit 3"), log=logs.append)
    sender.send([event(RUN_DIED, "b", "b/r1: dead", 0.0, "r1")])
    await settle(sender)
    got = json.loads(out.read_text())
    assert got["kind"] == "run_died" and got["run"] == "r1" and got["box"] == "b"
    assert set(got) == {"schema", "kind", "box", "run", "text", "title", "at"}
    assert logs == ["alert command exited 3 (run_died on b)"]


async def test_a_box_its_provider_stopped_without_a_stop_of_ours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", "vast-key")
    monkeypatch.setenv("RUNPOD_API_KEY", "runpod-key")
    with VastServer("vast-key", [vast_instance(111)]) as vast, \
            RunPodServer("runpod-key", [runpod_pod("pod1"), runpod_pod("pod2")]) as runpod, \
            WebhookServer() as hook:
        boxes = "".join(
            f'[[box]]\nname = "{name}"\nhost = "127.0.0.1"\nport = 1\nprovider = "{p}"\n'
            f'instance_id = "{i}"\n'
            for name, p, i in (("v", "vast", "111"), ("p1", "runpod", "pod1"),
                               ("p2", "runpod", "pod2")))
        boxes = (f'[providers.vast]\nbase_url = "{vast.url}"\n[providers.runpod]\n'
                 f'base_url = "{runpod.url}"\n' + boxes)
        fleet = fleet_with(f'webhook = "{hook.url}/x"', tmp_path, boxes)
        journal = Journal(tmp_path / "journal.jsonl")
        sender = AlertSender(fleet.alerts)  # type: ignore[attr-defined]
        guardian = Guardian(fleet, journal, sender=sender)  # type: ignore[arg-type]
        meter = CostMeter(fleet, ledger=Ledger(tmp_path / "ledger.jsonl"))  # type: ignore
        try:
            await meter.poll()
            _, found = guardian.judge_costs(meter.update([]), {}, set())
            assert found == [] and guardian.preempted == frozenset()
            # Outbid on Vast, preempted on RunPod; p2 we stopped ourselves (journalled).
            vast.change("111", {"actual_status": "exited", "cur_state": "stopped"})
            runpod.change("pod1", {"status": "EXITED", "cost": 0.0})
            runpod.change("pod2", {"status": "EXITED", "cost": 0.0})
            journal.record(box="p2", action="stop", outcome="done", message="stopped")
            await meter.poll()
            _, found = guardian.judge_costs(meter.update([]), {}, set())
            assert [(e.kind, e.box) for e in found] == [(PREEMPTED, "p1"), (PREEMPTED, "v")]
            assert "stopped by the provider (outbid / preempted?)" in found[0].text
            assert guardian.preempted == {"v", "p1"}
            await meter.poll()
            _, again = guardian.judge_costs(meter.update([]), {}, set())
            assert again == []  # still stopped: not news
            await settle(sender)
            assert sorted(p["body"]["box"] for p in hook.posts) == ["p1", "v"]
        finally:
            await meter.aclose()


async def test_a_hung_command_is_killed_with_its_children(tmp_path: Path) -> None:
    logs: list[str] = []
    child = tmp_path / "child.pid"
    sender = AlertSender(AlertConfig(command=f"sleep 60 & echo $! > '{child}'; wait"),
                         log=logs.append, command_timeout=0.5)
    sender.send([event(RUN_DIED, "b", "dead", 0.0)])
    await settle(sender)
    assert logs == ["alert command killed after 0.5 s (run_died on b)"]
    pid = int(child.read_text())
    for _ in range(100):  # the kill reaches the child at once; reaping takes a moment
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the command's child outlived the timeout")
    assert SECRET not in repr(AlertConfig(webhook=f"https://h/{SECRET}"))


async def test_the_panel_is_told_only_what_failed(tmp_path: Path) -> None:
    with WebhookServer(status=500) as hook:
        logs: list[str] = []
        failed: list[str] = []
        sender = AlertSender(AlertConfig(webhook=f"{hook.url}/{SECRET}",
                                         command="cat >/dev/null"), log=logs.append,
                             failed=failed.append)
        sender.send([event(RUN_DIED, "b", "dead", 0.0)])
        await settle(sender)
    port = hook.server.server_address[1]
    assert failed == [f"alert webhook http://127.0.0.1:{port}/…: HTTP 500 (run_died on b not "
                      "delivered)"]
    assert logs == failed  # the command succeeded: nothing said
