"""A box whose watchdog most likely took it down, over a real sshd.

The watchdog's stop takes the box down before the panel reads that it fired:
its last answer shows a watchdog still armed, then the box is silent. Seen on
real boxes, the header then counted down to "stops in 0s" and later showed a
countdown reset; the box's clock, carried forward on the panel's (fake) clock,
says the trigger held before the silence. The panel, `status` (text and JSON)
and `watch`'s words agree, for the timeout, stall and done triggers; a box that
answers again shows the state its watchdog wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd
from support.stand_in_trainer import EPOCH_TRAINER

from tui.app import GpurentApp
from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.model.status_doc import status_document, status_table
from tui.remote.watch import BoxWatcher
from tui.runtime.events import BoxChanged
from tui.runtime.watch_sink import LogSink
from tui.screens.fleet import FleetScreen
from widgets.fleet_text import BoxView, box_lines

Factory = Callable[..., Sshd]


def hhmm(stamp: float) -> str:
    return time.strftime("%H:%M", time.localtime(stamp))


def guard_state(**fields: object) -> dict:
    """A fresh watchdog state as tui/onbox/guard.py writes it: armed, stopping the box."""
    return {"v": 1, "id": "g1", "armed": True, "dry_run": False, "beat_seconds": 30,
            "actions": {t: ["stop"] for t in ("timeout", "done", "stalled", "idle")},
            "can_stop": "its own stop_command", "did": [], "fired": None, "ended": None,
            **fields}


def write_state(tmp_path: Path, state: dict) -> None:
    folder = tmp_path / "home-box" / ".gpurent-tui" / "guard"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "state.json").write_text(json.dumps(state))  # its mtime: a fresh heartbeat


def fleet_of(tmp_path: Path, server: Sshd, key: KeyPair) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, runs_roots=[str(tmp_path / "runs")])],
                      known_hosts=[server.known_hosts_line()])


def lines_of(state: BoxState, now: float) -> list[str]:
    return [line.text.plain for line in box_lines(BoxView(state), "", now).lines]


async def goes_silent(server: Sshd, fleet: FleetConfig, after: float
                      ) -> tuple[BoxState, BoxState, list[float]]:
    """One answer, then the box goes down and the next refresh comes `after` seconds later
    on the panel's clock: (the last answer, the silent box, the clock)."""
    clock = [time.time()]
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=lambda: clock[0])
    try:
        answered = await watcher.refresh()
        assert answered.connection == "ok", answered.error
        server.stop()
        clock[0] += after
        silent = await watcher.refresh()
    finally:
        await watcher.close()
    assert silent.connection in ("unreachable", "timeout"), silent.error
    return answered, silent, clock


def said_everywhere(state: BoxState, now: float, words: str) -> dict:
    """`words` in the panel's guard line, `status`'s text and `watch`'s log line; the guard
    part of `status --json`, returned."""
    lines = lines_of(state, now)
    assert lines[1].strip() == words, lines
    assert not any("stops in" in line for line in lines), lines
    assert "unreachable" not in lines[0] and "timeout" not in lines[0].split(")")[-1], lines
    assert not any("retry in" in line for line in lines), lines
    assert any(line.strip().startswith("not answering") for line in lines), lines
    table = status_table([state], now)
    assert f"! {words}" in table and "· not answering: box box: " in table, table
    logged: list[str] = []
    LogSink(logged.append)(BoxChanged(state=state))
    assert logged and words in logged[0], logged
    doc = status_document([state], now)["boxes"][0]["guard"]
    assert doc["summary"] == words and doc["level"] == "acted", doc
    return doc


async def test_a_passed_deadline_then_silence_reads_stopped_by_its_watchdog(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    deadline = time.time() + 20  # `--max-hours 0.05`, armed 2m40s ago on the box's clock
    write_state(tmp_path, guard_state(armed_at=deadline - 180, max_hours=0.05,
                                      no_progress_minutes=1))
    answered, silent, clock = await goes_silent(server, fleet, after=60)
    assert lines_of(answered, clock[0] - 60)[1].strip().startswith("guarded: stops in")
    offset = (answered.last_ok_at or 0) - (answered.box_time or 0)
    words = f"stopped, most likely by its watchdog (timeout at {hhmm(deadline + offset)})"
    doc = said_everywhere(silent, clock[0], words)
    assert doc["likely_fired"]["trigger"] == "timeout"
    assert doc["likely_fired"]["at"] == deadline - 180 + 0.05 * 3600
    # An hour on, still silent: no countdown, no countdown started again.
    later = clock[0] + 3600
    assert lines_of(silent, later)[1].strip() == words
    # The panel's header, through Pilot.
    app = GpurentApp(fleet, states=[silent], live=False, clock=lambda: later)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        shown = screen.fleet_list.text(silent.name)
        assert words in shown and "stops in" not in shown and "retry in" not in shown, shown
    # The box answers again: the watchdog's state as it wrote it (here still armed).
    server.start()
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    try:
        back = await watcher.refresh()
    finally:
        await watcher.close()
    assert back.connection == "ok"
    assert lines_of(back, time.time())[1].strip().startswith("guarded: stops in")
    assert status_document([back], time.time())["boxes"][0]["guard"]["likely_fired"] is None


async def test_no_progress_then_silence_reads_stopped_by_its_watchdog(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    now = time.time()
    write_state(tmp_path, guard_state(armed_at=now - 600, max_hours=10,
                                      no_progress_minutes=1, last_progress_at=now - 50))
    answered, silent, clock = await goes_silent(server, fleet, after=30)
    offset = (answered.last_ok_at or 0) - (answered.box_time or 0)
    words = ("stopped, most likely by its watchdog "
             f"(no progress since {hhmm(now - 50 + offset)})")
    doc = said_everywhere(silent, clock[0], words)
    assert doc["likely_fired"]["trigger"] == "stalled"


async def test_every_run_finished_then_silence_reads_stopped_by_its_watchdog(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    write_state(tmp_path, guard_state(armed_at=time.time() - 5, max_hours=10))
    script = tmp_path / "epoch_trainer.py"
    script.write_text(EPOCH_TRAINER)
    subprocess.run([sys.executable, str(script), str(tmp_path / "runs" / "r1"), "2", "0.01"],
                   check=True, timeout=30)
    os.utime(tmp_path / "home-box" / ".gpurent-tui" / "guard" / "state.json")
    answered, silent, clock = await goes_silent(server, fleet, after=5)
    assert [r.health for r in answered.runs] == ["completed"]
    doc = said_everywhere(silent, clock[0],
                          "stopped, most likely by its watchdog (every run finished)")
    assert doc["likely_fired"]["trigger"] == "done"


async def test_silence_before_the_deadline_is_a_countdown_then_no_claim(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A box gone silent an hour before its deadline: the countdown runs on the carried
    clock, and once the deadline passed it is not claimed the watchdog took it down."""
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    now = time.time()
    write_state(tmp_path, guard_state(armed_at=now - 60, max_hours=1.0))
    _, silent, clock = await goes_silent(server, fleet, after=600)
    assert lines_of(silent, clock[0])[1].strip().startswith("guarded: stops in 48m"), \
        lines_of(silent, clock[0])
    later = clock[0] + 3600
    guard = lines_of(silent, later)[1]
    assert "most likely" not in guard and "stops in" not in guard, guard
    assert "whether it fired is not known" in guard
    doc = status_document([silent], later)["boxes"][0]["guard"]
    assert doc["likely_fired"] is None
    assert "unreachable" in lines_of(silent, later)[0]  # an unexplained silence stays loud
