"""One runtime under both front ends: the panel and `watch` are two sinks of it.

A scripted fleet (a provider box whose poller crashes once; a manual box over its
budget whose stop is sent but never read back, so its outcome is "unknown") is
watched once by `watch` (its log sink) and once by the panel under Pilot. A tee on
the runtime's sink records every event: both runs give the same events, and the
same alerts reach the loopback webhook. The three ways the two loops had drifted
apart are tested here and in test_poller_crash.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.pilot import box_text, until
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd
from support.webhook_server import WebhookServer
from textual.widgets import Input, Static

from tui.app import GpurentApp
from tui.model.alerts import OVER_BUDGET, PUSH_FAILED
from tui.model.config import FleetConfig
from tui.providers.meter import CostMeter
from tui.runtime import events as ev
from tui.runtime.fleet import push_failed
from tui.runtime.watch_sink import Watch
from tui.screens.doctor import DoctorScreen
from tui.screens.fetch import FetchScreen
from tui.store.journal import Journal
from tui.store.ledger import Ledger

BUDGET_WHAT = "budget: push and stop"


class FlakyMeter(CostMeter):
    """The real meter, whose first poll raises inside the runtime's poller."""

    polls = 0

    async def poll(self) -> None:
        self.polls += 1
        if self.polls == 1:
            raise RuntimeError("the rates broke")
        await super().poll()


@pytest.fixture
def vast(monkeypatch: pytest.MonkeyPatch) -> Iterator[VastServer]:
    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    server = VastServer("vast-secret-key", [vast_instance(12345678)])
    server.start()
    try:
        yield server
    finally:
        server.close()


def scripted_fleet(where: Path, server: Sshd, key: KeyPair, vast: VastServer,
                   hook: WebhookServer) -> FleetConfig:
    """A provider box and a manual box over its budget, whose stop is never seen."""
    where.mkdir()
    root = runs_root_with(where, "yolox_completed")
    (root / "yolox_completed" / "weights").mkdir()
    (root / "yolox_completed" / "weights" / "last.pt").write_bytes(b"l" * 2048)
    return make_fleet(where, [
        box_entry(server, key, "vast-box", runs_roots=[str(where / "none")], provider="vast",
                  instance_id="12345678"),
        box_entry(server, key, "b", runs_roots=[str(root)], budget_usd=0.5,
                  stop_command="true", observe_command="false",
                  pricing={"running_usd_per_hr": 3600.0},
                  push={"local_dir": str(where / "out")})],
        known_hosts=[server.known_hosts_line()], on_budget="push-and-stop",
        providers={"vast": {"base_url": vast.url}}, alerts={"webhook": hook.url})


def gist(item: ev.Event) -> tuple[object, ...] | None:
    """What an event says, without the times and figures that differ from run to run."""
    if isinstance(item, ev.ActionStarted):
        return ("started", item.box, item.what)
    if isinstance(item, ev.ActionEnded):
        return ("ended", item.box, item.what, item.code, item.outcome)
    if isinstance(item, ev.Alarm):
        return ("alarm", tuple((n.box, n.text) for n in item.notices),
                tuple((a.kind, a.box) for a in item.alerts))
    if isinstance(item, ev.Crashed):
        return ("crashed", item.who, item.error)
    if isinstance(item, ev.Notice):
        return ("notice", item.text)
    return None  # snapshots, money pictures, progress: drawn, not decided


def done(seen: list[ev.Event], meter: FlakyMeter) -> bool:
    return meter.polls >= 2 and any(isinstance(e, ev.ActionEnded) and e.what == BUDGET_WHAT
                                    for e in seen)


def tee(sink: ev.Sink, seen: list[ev.Event]) -> ev.Sink:
    def both(item: ev.Event) -> None:
        seen.append(item)
        sink(item)
    return both


async def test_the_panel_and_watch_run_the_same_runtime(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        vast: VastServer, isolated_dirs: Path) -> None:
    server = sshd_factory()
    seen: dict[str, list[ev.Event]] = {"watch": [], "panel": []}
    posts: dict[str, list[str]] = {}
    with WebhookServer() as hook:
        fleet = scripted_fleet(tmp_path / "watch", server, client_key, vast, hook)
        meter = FlakyMeter(fleet, ledger=Ledger(tmp_path / "watch" / "ledger.jsonl"))
        logs: list[str] = []
        watch = Watch(fleet, journal=Journal(tmp_path / "watch" / "journal.jsonl"),
                      meter=meter, log=logs.append)
        watch.runtime.board.observe_timeout, watch.runtime.board.poll_interval = 1.0, 0.2
        watch.runtime.sink = tee(watch.runtime.sink, seen["watch"])
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            async with asyncio.timeout(90):
                while not done(seen["watch"], meter):
                    await asyncio.sleep(0.1)
        finally:
            stop.set()
            assert await task == 0
        posts["watch"] = [p["body"]["kind"] for p in hook.posts]
        assert any("budget: push and stop: FAILED" in line for line in logs), logs
        assert any(line.startswith("providers: poll failed (RuntimeError: the rates "
                                   "broke); restarted in") for line in logs), logs

    with WebhookServer() as hook:
        fleet = scripted_fleet(tmp_path / "panel", server, client_key, vast, hook)
        meter = FlakyMeter(fleet, ledger=Ledger(tmp_path / "panel" / "ledger.jsonl"))
        app = GpurentApp(fleet, meter=meter,
                         journal=Journal(tmp_path / "panel" / "journal.jsonl"))
        app.runtime.board.observe_timeout, app.runtime.board.poll_interval = 1.0, 0.2
        app.runtime.sink = tee(app.runtime.sink, seen["panel"])
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: done(seen["panel"], meter), timeout=90)
            await until(pilot, lambda: "unknown" in box_text(app, "b"))
            await app.runtime.sender.aclose()  # type: ignore[union-attr]
        posts["panel"] = [p["body"]["kind"] for p in hook.posts]

    said = {name: [g for g in map(gist, events) if g is not None]
            for name, events in seen.items()}
    assert said["panel"] == said["watch"], said
    ended = [g for g in said["watch"] if g[0] == "ended"]
    assert ended == [("ended", "b", BUDGET_WHAT, 1, "unknown")], said
    # One PUSH_FAILED rule: a stop not read back is "unknown", never alerted as failed.
    assert posts["panel"] == posts["watch"] == [OVER_BUDGET], posts
    assert PUSH_FAILED not in posts["watch"]


def test_one_push_failed_rule() -> None:
    """A failed push or budget push-and-stop is alerted; a stop whose effect was not seen,
    a cancel, or any other action's failure is not (its line and toast say it)."""
    assert push_failed("push", 1, None)
    assert push_failed(BUDGET_WHAT, 1, "failed")
    assert not push_failed(BUDGET_WHAT, 1, "unknown")
    assert not push_failed("push", 1, "cancelled")
    assert not push_failed("push", 0, None)
    assert not push_failed("stop", 1, "failed")


async def test_a_failed_push_on_a_box_is_one_toast(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path) -> None:
    """The push-failed alarm's toast says it, with why; the action's own short toast is
    not shown beside it (the box's line keeps the outcome)."""
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the push wants a folder")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu-1", runs_roots=[str(root)],
                                            push={"local_dir": str(blocked)})],
                       known_hosts=[server.known_hosts_line()])
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        app.push("gpu-1", None)
        await until(pilot, lambda: "push failed" in box_text(app, "gpu-1"))
        await until(pilot, lambda: any("push failed" in f"{n.title} {n.message}"
                                       for n in app._notifications))
        await pilot.pause(0.3)
        toasts = [f"{n.title}: {n.message}" for n in app._notifications
                  if "push" in f"{n.title} {n.message}"]
        assert len(toasts) == 1, toasts
        assert toasts[0].startswith("push failed on gpu-1: gpu-1: push failed: ")


async def test_a_fetch_holds_its_box_as_a_push_does(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch and doctor screens run through the runtime under the box's lock: a push
    or a doctor asked for while the fetch waits on the Hub is refused, not sent alongside;
    leaving the fetch's screen gives it up and frees the box."""
    silent = socket.socket()  # a Hub that takes the connection and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("HF_TOKEN", "hf_FetchHoldsTheBox0123456789abcdef")
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu-1", runs_roots=[str(root)],
                                            push={"local_dir": str(tmp_path / "out")})],
                       known_hosts=[server.known_hosts_line()])
    app = GpurentApp(fleet)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
            app.open_fetch("gpu-1")
            await until(pilot, lambda: isinstance(app.screen, FetchScreen)
                        and bool(app.screen.query("#repo")))
            screen = app.screen
            assert isinstance(screen, FetchScreen)
            screen.query_one("#repo", Input).value = "org/shapes"
            await pilot.press("enter")
            await until(pilot, lambda: app.busy.get("gpu-1") == "fetch")
            app.push("gpu-1", None)
            await until(pilot, lambda: "fetch on gpu-1 is still running" in [
                n.message for n in app._notifications])
            assert app.busy == {"gpu-1": "fetch"} and Journal().entries == []
            app.open_doctor("gpu-1")  # the doctor waits its turn too
            await until(pilot, lambda: isinstance(app.screen, DoctorScreen)
                        and bool(app.screen.query("#data")))
            doctor = app.screen
            doctor.query_one("#data", Input).value = str(tmp_path / "data.yaml")
            await pilot.press("enter")
            await until(pilot, lambda: "fetch on gpu-1 is still running" in str(
                doctor.query_one("#body", Static).render()))
            assert app.busy == {"gpu-1": "fetch"}
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen)
            await pilot.press("escape")  # the fetch is given up with its screen
            await until(pilot, lambda: not app.busy)
            assert "fetch" not in box_text(app, "gpu-1")  # its screen showed it, not the line
    finally:
        silent.close()
