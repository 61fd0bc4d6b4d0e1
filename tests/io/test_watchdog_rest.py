"""A box its watchdog stopped rests, by its watchdog, in a fresh `status` too.

The on-box watchdog's stop is not ours, so before this nothing journalled it: a box
the watchdog stopped read "unreachable" in `status` (exit 1), and one the panel saw go
silent just after its deadline read "most likely by its watchdog" only in the process
that had seen its guard state. The runtime (over a real sshd, on a fake clock) now
journals both once, across restarts too, and a fresh `status` reads the journal.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.runtime.fleet import Runtime
from tui.store.journal import Journal

Factory = Callable[..., Sshd]


def hhmm(stamp: float) -> str:
    return time.strftime("%H:%M", time.localtime(stamp))


def guard_state(**fields: object) -> dict:
    """A watchdog state as tui/onbox/guard.py writes it: armed, stopping the box."""
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


async def look(fleet: FleetConfig, clock: list[float], looks: int = 1,
               server: Sshd | None = None, after: float = 0.0) -> list[BoxState]:
    """A fresh runtime (a panel or `watch` started again) looks `looks` times, each look
    judged as the runtime does; with `server`, that box goes down after the first look
    and the next comes `after` seconds later."""
    runtime = Runtime(fleet, lambda _: None, journal=Journal(), clock=lambda: clock[0],
                      config_seconds=3600)
    watcher = runtime.watchers[fleet.boxes[0].name]
    states = []
    try:
        for i in range(looks):
            if i == 1 and server is not None:
                server.stop()
                clock[0] += after
            was = watcher.state
            state = await watcher.refresh()
            runtime.guardian.box_updated(was, state)
            states.append(state)
    finally:
        await runtime.aclose()
    return states


def watchdog_entries() -> list[dict]:
    return [e for e in Journal().entries if e.get("by") == "watchdog"]


def status(fleet: FleetConfig, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["status", "--json", "--config", fleet.source])
    doc = json.loads(capsys.readouterr().out)
    assert main(["status", "--config", fleet.source]) == code
    return code, doc["boxes"][0], capsys.readouterr().out


async def test_a_stop_seen_in_the_watchdog_state_is_journalled_once_and_rests_the_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    now = time.time()
    stopped_at = now - 30  # its stop_command answered, and the box is still up a moment
    write_state(tmp_path, guard_state(
        id="g7", armed=False, armed_at=now - 3600, max_hours=0.9, ended="stopped the box",
        fired={"trigger": "timeout", "at": stopped_at - 5, "why": "0.9 h passed"},
        did=[{"action": "fired", "outcome": "fired", "at": stopped_at - 5},
             {"action": "stop", "outcome": "done", "at": stopped_at, "detail": "stopped"}]))
    clock = [now]
    await look(fleet, clock, looks=2)  # read twice: journalled once
    (entry,) = watchdog_entries()
    assert (entry["action"], entry["outcome"], entry["guard_step"]) == (
        "stop", "done", f"g7:stop:{stopped_at:.3f}")
    assert abs(entry["time"] - stopped_at) < 5  # on the panel's clock
    await look(fleet, clock)  # a restart reads the same state: nothing more
    assert len(watchdog_entries()) == 1

    server.stop()
    code, box, table = await asyncio.to_thread(status, fleet, capsys)
    assert code == 0
    assert box["connection"] == "stopped"
    assert (box["rest"]["kind"], box["rest"]["by"], box["rest"]["sure"]) == (
        "stopped", "watchdog", True)
    assert "· stopped (by its watchdog, " in table, table


async def test_a_likely_watchdog_stop_is_journalled_and_a_fresh_status_says_it(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    deadline = time.time() + 20
    write_state(tmp_path, guard_state(id="g8", armed_at=deadline - 180, max_hours=0.05))
    clock = [time.time()]
    answered, silent, again = await look(fleet, clock, looks=3, server=server, after=60)
    assert silent.connection in ("unreachable", "timeout") and again.rest is not None
    offset = (answered.last_ok_at or 0) - (answered.box_time or 0)
    words = f"stopped, most likely by its watchdog (timeout at {hhmm(deadline + offset)})"
    (entry,) = watchdog_entries()  # seen silent twice: journalled once
    assert (entry["action"], entry["outcome"], entry["likely"], entry["trigger"]) == (
        "stop", "unknown", True, "timeout")
    assert entry["message"] == words

    # A fresh process, as cron runs it: it never saw the guard state.
    code, box, table = await asyncio.to_thread(status, fleet, capsys)
    assert code == 0, box  # expected, so not a failure for a cron script
    assert box["connection"] == "stopped"
    assert box["rest"]["by"] == "watchdog" and box["rest"]["sure"] is False
    assert box["rest"]["words"] == words
    assert f"· {words}" in table, table


@pytest.mark.parametrize("did_at, guard_id", [
    (1e10, "g9"),                      # a stop in the year 2286 on a box reading 2026
    (5.0, "g9"),                       # a stop in 1970
    (None, "\x1b]0;pwned\x07" + "x" * 300),  # sane time, an escaped, long id
], ids=["future", "1970", "escaped-id"])
async def test_a_hostile_guard_state_journals_nothing_or_only_clean_bounded_words(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        did_at: float | None, guard_id: str) -> None:
    server = sshd_factory()
    fleet = fleet_of(tmp_path, server, client_key)
    (tmp_path / "runs").mkdir()
    now = time.time()
    at = did_at if did_at is not None else now - 30
    write_state(tmp_path, guard_state(
        id=guard_id, armed=False, armed_at=now - 3600, max_hours=0.9,
        did=[{"action": "stop", "outcome": "done", "at": at, "detail": "\x1b[2J" * 1000}]))
    await look(fleet, [now], looks=2)
    entries = watchdog_entries()
    text = Journal().path.read_text() if Journal().path.exists() else ""
    assert "\x1b" not in text and "pwned" not in text and len(text) < 2000
    if did_at is not None:
        assert entries == []
    else:
        (entry,) = entries
        assert entry["guard_step"] == f"-:stop:{at:.3f}"
