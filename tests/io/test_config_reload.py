"""A config edit while the fleet is watched: applied live and journaled, or refused with
the loader's own words while the config in force keeps working; never silently ignored.

A runtime over a real sshd box reads the fleet.toml the test rewrites on disk: a rate
change, a typo, an editor's half-written save, a box added and removed, a box moved to
another port.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with, toml_value
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.box import Connection
from tui.model.config import FleetConfig
from tui.model.cost import Event
from tui.runtime import events as ev
from tui.runtime.fleet import Runtime
from tui.runtime.watch_sink import LogSink
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal
from tui.store.ledger import Ledger


def fleet_text(boxes: list[dict[str, Any]], known_hosts: Path) -> str:
    lines = [f"known_hosts = {toml_value(str(known_hosts))}", 'ssh_config = ""',
             "refresh_seconds = 1", "timeout_seconds = 10"]
    for box in boxes:
        lines.append("[[box]]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in box.items())
    return "\n".join(lines) + "\n"


class Setup:
    """A fleet.toml with box-c at $1.20/hr over a real sshd, and a way to rewrite it."""

    def __init__(self, tmp_path: Path, server: Sshd, key: KeyPair) -> None:
        root = runs_root_with(tmp_path, "yolox_completed")
        self.box = box_entry(server, key, "box-c", runs_roots=[str(root)], budget_usd=10.0,
                             pricing={"running_usd_per_hr": 1.20})
        self.fleet: FleetConfig = make_fleet(tmp_path, [self.box],
                                             known_hosts=[server.known_hosts_line()])
        self.path = Path(self.fleet.source)
        self.known_hosts = tmp_path / "known_hosts"
        self._tick = 0

    def write(self, text: str) -> None:
        """Rewrite the file as an editor would; each write a later mtime (a coarse clock
        on some filesystems must not hide an edit from this test)."""
        self.path.write_text(text)
        self._tick += 1
        stamp = os.stat(self.path).st_mtime_ns + self._tick * 10**9
        os.utime(self.path, ns=(stamp, stamp))

    def boxes(self, *boxes: dict[str, Any]) -> None:
        self.write(fleet_text(list(boxes), self.known_hosts))


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def listed(app: GpurentApp) -> str:
    """Every line of the fleet list."""
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen.fleet_list.text()


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, ev.Notice)]


async def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


def test_a_valid_edit_applies_live_and_is_journaled(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    setup = Setup(tmp_path, server, client_key)
    journal = Journal(tmp_path / "journal.jsonl")
    events: list[Any] = []
    lines: list[str] = []
    sink = LogSink(lines.append)

    def both(item: Any) -> None:
        events.append(item)
        sink(item)

    async def scenario() -> None:
        runtime = Runtime(setup.fleet, both, journal=journal, config_seconds=0.05)
        runtime.start()
        try:
            await wait_for(lambda: runtime.states["box-c"].connection is Connection.OK)
            setup.boxes({**setup.box, "budget_usd": 20.0,
                         "pricing": {"running_usd_per_hr": 1.50}})
            # the runtime's own poll of the file picks it up: nobody calls it here
            await wait_for(lambda: any(isinstance(e, ev.ConfigReloaded) for e in events))
            said = "config reloaded: box-c rate 1.20 → 1.50; box-c budget 10.00 → 20.00"
            assert [e.get("message") for e in journal.entries
                    if e.get("action") == "config"] == [said]
            assert said in notices(events) and said in lines  # the panel and watch's log
            assert runtime.fleet.box("box-c").pricing.running_usd_per_hr == 1.50
            assert runtime.meter is not None
            assert runtime.meter.fleet is runtime.fleet
            assert runtime.guardian.fleet is runtime.fleet
            # the money follows: the ledger bills the new rate from the next look on
            await wait_for(lambda: runtime.meter is not None and any(
                e.box == "box-c" and e.usd_per_hr == 1.50 for e in runtime.meter.ledger.events))
            assert runtime.watching("box-c")
        finally:
            await runtime.aclose()

    asyncio.run(scenario())


def test_an_invalid_or_half_written_edit_is_said_once_and_the_old_config_kept(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    setup = Setup(tmp_path, server, client_key)
    journal = Journal(tmp_path / "journal.jsonl")
    events: list[Any] = []

    async def scenario() -> None:
        runtime = Runtime(setup.fleet, events.append, journal=journal, config_seconds=3600)
        runtime.start()
        try:
            await wait_for(lambda: runtime.states["box-c"].connection is Connection.OK)
            watcher = runtime.watchers["box-c"]
            setup.boxes({**setup.box, "pricing": {"running_usd_per_hr": "1.50"}})
            assert runtime.check_config() is None
            said = notices(events)
            assert len(said) == 1
            assert str(setup.path) in said[0] and "box 'box-c'" in said[0]
            assert "running_usd_per_hr" in said[0] and "kept" in said[0]
            assert runtime.fleet is setup.fleet and runtime.watchers["box-c"] is watcher
            # the same bad content again, touched or not: nothing more is said
            assert runtime.check_config() is None
            setup.boxes({**setup.box, "pricing": {"running_usd_per_hr": "1.50"}})
            assert runtime.check_config() is None
            assert len(notices(events)) == 1
            # an editor's save caught half-written: one word for it, however often looked at
            whole = fleet_text([{**setup.box, "pricing": {"running_usd_per_hr": 1.5}}],
                               setup.known_hosts)
            setup.write(whole[: whole.index("pricing = {") + 15])
            for _ in range(3):
                assert runtime.check_config() is None
            assert len(notices(events)) == 2
            assert runtime.fleet is setup.fleet
            # the box is still watched under the old config meanwhile
            before = runtime.states["box-c"].last_ok_at
            runtime.poke()
            await wait_for(lambda: runtime.states["box-c"].last_ok_at != before)
            # the save completes: applied
            setup.write(whole)
            assert runtime.check_config() == ["box-c rate 1.20 → 1.50"]
            assert [e.get("action") for e in journal.entries] == ["config"]
        finally:
            await runtime.aclose()

    asyncio.run(scenario())


def test_boxes_added_removed_and_moved_are_watched_as_the_config_says(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    other = sshd_factory("other")
    setup = Setup(tmp_path, server, client_key)
    (tmp_path / "known_hosts").write_text(server.known_hosts_line() + "\n"
                                          + other.known_hosts_line() + "\n")
    journal = Journal(tmp_path / "journal.jsonl")
    events: list[Any] = []
    box_d = box_entry(server, client_key, "box-d", runs_roots=[str(tmp_path / "none")])

    async def scenario() -> None:
        runtime = Runtime(setup.fleet, events.append, journal=journal, config_seconds=3600)
        runtime.start()
        try:
            await wait_for(lambda: runtime.states["box-c"].connection is Connection.OK)
            setup.boxes(setup.box, box_d)
            assert runtime.check_config() == ["box box-d added (127.0.0.1)"]
            await wait_for(lambda: runtime.states["box-d"].connection is Connection.OK)
            assert runtime.watching("box-d")
            setup.boxes(setup.box)
            assert runtime.check_config() == ["box box-d removed"]
            assert "box-d" not in runtime.states and not runtime.watching("box-d")
            # box-c moved to another sshd: a new watcher, and it answers there
            watcher = runtime.watchers["box-c"]
            setup.boxes({**setup.box, "port": other.port})
            assert runtime.check_config() == [f"box-c port {server.port} → {other.port}"]
            assert runtime.watchers["box-c"] is not watcher
            assert runtime.watchers["box-c"].session.box.port == other.port
            await wait_for(lambda: runtime.states["box-c"].connection is Connection.OK)
            assert runtime.watching("box-c")
            assert [e.get("message") for e in journal.entries] == [
                "config reloaded: box box-d added (127.0.0.1)",
                "config reloaded: box box-d removed",
                f"config reloaded: box-c port {server.port} → {other.port}"]
        finally:
            await runtime.aclose()

    asyncio.run(scenario())


def test_the_panel_shows_a_reload_and_a_refused_edit(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """Under Pilot: the reload and a refused edit are toasts on screen; an added box is
    drawn in the list, a removed one goes from it."""
    server = sshd_factory()
    setup = Setup(tmp_path, server, client_key)
    box_d = box_entry(server, client_key, "box-d", runs_roots=[str(tmp_path / "none")])

    async def scenario() -> None:
        app = GpurentApp(setup.fleet, journal=Journal(tmp_path / "journal.jsonl"))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.states["box-c"].connection is Connection.OK)
            setup.boxes({**setup.box, "pricing": {"running_usd_per_hr": 1.50}}, box_d)
            app.runtime.check_config()
            await pilot.pause()
            toasts = [str(n.message) for n in app._notifications]
            assert any("config reloaded: box box-d added (127.0.0.1); box-c rate 1.20 → 1.50"
                       in t for t in toasts)
            assert app.fleet.box("box-c").pricing.running_usd_per_hr == 1.50
            await until(pilot, lambda: "box-d" in listed(app))
            setup.write("[[box]]\nname = 'box-c'\nhost = ")
            app.runtime.check_config()
            await pilot.pause()
            toasts = [str(n.message) for n in app._notifications]
            assert any(str(setup.path) in t and "kept" in t for t in toasts)
            assert app.fleet.box("box-d")  # the config in force is kept
            setup.boxes({**setup.box, "pricing": {"running_usd_per_hr": 1.50}})
            app.runtime.check_config()
            await pilot.pause()
            assert [b.name for b in app.fleet.boxes] == ["box-c"]
            assert "box-d" not in listed(app) and "box-c" in box_text(app, "box-c")
            await until(pilot, lambda: app.states["box-c"].connection is Connection.OK)

    asyncio.run(scenario())


def test_status_after_a_restart_prices_past_epochs_at_the_rate_billed_then(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Three epochs ran at $1.20/hr; the rate was then edited to $1.50 (the ledger holds
    both). A fresh `status --json` (a restart: nothing but the ledger remembers) still says
    the three epochs cost an hour at $1.20, not $1.50."""
    server = sshd_factory()
    setup = Setup(tmp_path, server, client_key)
    run = Path(setup.box["runs_roots"][0]) / "yolox_completed"
    now = time.time()
    status = json.loads((run / "status.json").read_text())
    status.update(state="completed", started_at=iso(now - 3 * 3600),
                  updated_at=iso(now - 2 * 3600), current_epoch=3, completed_epochs=3,
                  total_epochs=3, start_epoch=1)
    (run / "status.json").write_text(json.dumps(status))
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": e, "time": 1200.0, "train/loss": 1.0}) + "\n" for e in (1, 2, 3)))
    ledger = Ledger()
    ledger.record(Event(now - 4 * 3600, "box-c", "running", 1.20, "config"))
    ledger.record(Event(now - 3600, "box-c", "running", 1.50, "config"))
    setup.boxes({**setup.box, "pricing": {"running_usd_per_hr": 1.50}})
    assert main(["status", "--json", "--config", str(setup.path)]) == 0
    (box,) = json.loads(capsys.readouterr().out)["boxes"]
    (shown,) = box["runs"]
    assert shown["unpushed_epochs"] == 3
    assert shown["unpushed_usd"] == pytest.approx(1.20, abs=0.005)
