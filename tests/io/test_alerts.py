"""Alerts out of the process, against a loopback webhook and a real shell command; a box
stopped behind our back, against the loopback Vast and RunPod stand-ins."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.provider_servers import RunPodServer, VastServer, runpod_pod, vast_instance
from support.webhook_server import WebhookServer

from tui.actions.alerts import AlertSender
from tui.actions.guardian import Guardian
from tui.model.alerts import (
    BOX_IDLE,
    OVER_BUDGET,
    PREEMPTED,
    RUN_DIED,
    RUN_STALLED,
    UNREACHABLE,
    WATCHDOG_ACTED,
    AlertEvent,
    event,
)
from tui.model.box import BoxState, Connection
from tui.model.config import AlertConfig, parse_config
from tui.model.cost import BoxRates
from tui.model.meter import BoxCost, FleetCost
from tui.model.runs import Health, RunState
from tui.model.watchdog import GuardStep, GuardView
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
    assert all("webhook (127.0.0.1)" in line for line in logs)


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



async def test_a_start_the_provider_refused_does_not_erase_our_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """We stop the pod (seen EXITED), then start it; RunPod answers 409 (its GPUs were
    rented out). The pod stays stopped by us: no PREEMPTED alert, no "stopped by the
    provider" header, and the watchdog's/our stop still explains its silence."""
    from tui.actions.flows import power
    monkeypatch.setenv("RUNPOD_API_KEY", "runpod-key")
    with RunPodServer("runpod-key", [runpod_pod("pod1")]) as runpod, WebhookServer() as hook:
        boxes = (f'[providers.runpod]\nbase_url = "{runpod.url}"\n[[box]]\nname = "p"\n'
                 'host = "127.0.0.1"\nport = 1\nprovider = "runpod"\ninstance_id = "pod1"\n')
        fleet = fleet_with(f'webhook = "{hook.url}/x"', tmp_path, boxes)
        journal = Journal(tmp_path / "journal.jsonl")
        sender = AlertSender(fleet.alerts)  # type: ignore[attr-defined]
        guardian = Guardian(fleet, journal, sender=sender)  # type: ignore[arg-type]
        ledger = Ledger(tmp_path / "ledger.jsonl")
        meter = CostMeter(fleet, ledger=ledger)  # type: ignore[arg-type]
        box = fleet.box("p")  # type: ignore[attr-defined]
        try:
            stopped = await power(fleet, box, "stop", journal, ledger=ledger,  # type: ignore
                                  observe_timeout=5.0, poll_interval=0.01)
            assert stopped.code == 0, stopped.lines
            runpod.free_gpus["pod1"] = 0  # rented out meanwhile
            refused = await power(fleet, box, "start", journal, ledger=ledger,  # type: ignore
                                  observe_timeout=5.0, poll_interval=0.01)
            assert refused.code != 0 and "free GPUs" in " ".join(refused.lines), refused.lines
            assert [(e["action"], e["outcome"]) for e in journal.entries] == [
                ("stop", "done"), ("start", "failed")]
            await meter.poll()
            _, found = guardian.judge_costs(meter.update([]), {}, set())
            assert found == [] and guardian.preempted == frozenset()
            assert guardian.stopped_words("p") is None
            down = BoxState(name="p", connection=Connection.UNREACHABLE, failed_since=0.0,
                            error="connection refused")
            assert guardian.box_updated(None, down) == []  # stopped on purpose: no outage
            await settle(sender)
            assert hook.posts == []
        finally:
            await meter.aclose()


def box_at(clock: Clock, kind: str, bad: bool, step: int = 0) -> BoxState:
    """Box "b" as a look sees it, in the state that makes `kind` (bad) or not."""
    ok = BoxState(name="b", connection=Connection.OK, last_ok_at=clock.now - 1,
                  runs=(RunState(path="/r/r1", name="r1", root="/r", health=Health.RUNNING,
                                 reason="epoch 3"),),
                  guard=GuardView(armed=True))
    if not bad:
        return ok
    if kind == RUN_STALLED:
        return replace(ok, runs=(replace(ok.runs[0], health=Health.STALLED,
                                         reason="no epoch for 31 min"),))
    if kind == UNREACHABLE:
        return replace(ok, connection=Connection.TIMEOUT, failed_since=clock.now - 120,
                       error="timed out")
    assert kind == WATCHDOG_ACTED  # a new step each time it acts
    return replace(ok, guard=GuardView(did=(GuardStep("push", "verified", 1000.0 + step,
                                                      "r1: verified on the Hub"),)))


def cost_at(kind: str, bad: bool) -> FleetCost:
    flags = {"idle_alarm": True} if kind == BOX_IDLE else {"budget_level": "alarm"}
    box = BoxCost("b", BoxRates("running", None, None, 720.0, "config", None), 0.0, 0.0,
                  **(flags if bad else {}))  # type: ignore[arg-type]
    return FleetCost({"b": box}, 0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("kind", [RUN_STALLED, BOX_IDLE, OVER_BUDGET, UNREACHABLE,
                                  WATCHDOG_ACTED])
async def test_each_kind_reaches_the_webhook_once_per_cooldown(tmp_path: Path,
                                                               kind: str) -> None:
    """Driven through the Guardian as the panel and `watch` drive it: the state entered,
    seen again, left and entered again within the cool-down is one POST; once the
    cool-down has passed, entering it again is a second."""
    with WebhookServer() as hook:
        fleet = fleet_with(f'webhook = "{hook.url}/x"\ncooldown_minutes = 10\n'
                           "unreachable_minutes = 1", tmp_path)
        clock = Clock()
        sender = AlertSender(fleet.alerts)  # type: ignore[attr-defined]
        guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), sender=sender,  # type: ignore
                            clock=clock)
        steps = iter(range(100))

        def look(bad: bool) -> list[AlertEvent]:
            """One look (a box refresh, or a money picture) entering, keeping or leaving."""
            if kind in (BOX_IDLE, OVER_BUDGET):
                return guardian.judge_costs(cost_at(kind, bad), {}, set())[1]
            now = box_at(clock, kind, bad, next(steps))
            before, guardian_last[0] = guardian_last[0], now
            return guardian.box_updated(before, now)

        guardian_last = [box_at(clock, kind, False)]
        guardian.box_updated(None, guardian_last[0])  # the first look: history
        look(False)
        (first,) = look(True)
        assert first.kind == kind and first.box == "b"
        assert look(True) == []  # still so: not news
        look(False)
        assert look(True) == []  # entered again within the cool-down: not sent again
        await settle(sender)
        assert [p["body"]["kind"] for p in hook.posts] == [kind]
        clock.now += 10 * 60
        look(False)
        (again,) = look(True)
        assert again.kind == kind
        await settle(sender)
        assert [p["body"]["kind"] for p in hook.posts] == [kind, kind]
        assert hook.posts[0]["body"]["box"] == "b"


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
    assert port and failed == ["alert webhook (127.0.0.1): HTTP 500 (run_died on b not "
                               "delivered)"]
    assert logs == failed  # the command succeeded: nothing said


HOST_SECRET = "hooksecret9f3k2"


async def test_a_webhook_whose_secret_is_its_host_name_is_never_logged(tmp_path: Path) -> None:
    """Pipedream-style URLs keep the secret in the host name: the log named the webhook by
    scheme and host. It names it by what the config says is safe: a known public
    service's host, the config's own `webhook_name`, else just "webhook"."""
    logs: list[str] = []
    failed: list[str] = []
    sender = AlertSender(AlertConfig(webhook=f"https://{HOST_SECRET}.m.pipedream.net/p/q"),
                         log=logs.append, failed=failed.append, timeout=2.0)
    sender.send([event(RUN_DIED, "b", "dead", 0.0)])
    await settle(sender)
    assert failed and all(HOST_SECRET not in line and "pipedream" not in line
                          for line in logs + failed), logs
    assert failed[0].startswith("alert webhook: ")
    named = AlertSender(AlertConfig(webhook=f"https://{HOST_SECRET}.m.pipedream.net/p",
                                    webhook_name="ops pager"))
    assert named.where == "webhook 'ops pager'"
    assert AlertSender(AlertConfig(webhook=f"https://ntfy.sh/{SECRET}")).where == \
        "webhook (ntfy.sh)"
    assert AlertSender(AlertConfig(webhook=f"https://u:{SECRET}@hooks.slack.com/s")).where == \
        "webhook (hooks.slack.com)"


async def test_an_alert_carries_no_secret_a_box_echoed(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's failure words come from the box: a key it echoes (the panel's own, or one
    named by its option) reaches neither the webhook nor the log."""
    monkeypatch.setenv("WANDB_API_KEY", "wandbHeldByThePanel77")
    with WebhookServer() as hook:
        logs: list[str] = []
        sender = AlertSender(AlertConfig(webhook=f"{hook.url}/t"), log=logs.append)
        said = "b/r1: failed: bad key wandbHeldByThePanel77; argv --hf-token tokenNamed88"
        item = event(RUN_DIED, "b", said, 0.0, "r1")
        sender.send([item])
        await settle(sender)
    assert "tokenNamed88" not in item.log_line()  # option-named: gone in the model already
    sent = json.dumps(hook.posts)
    for secret in ("wandbHeldByThePanel77", "tokenNamed88"):
        assert secret not in sent and all(secret not in line for line in logs)
    assert "bad key ***" in sent
