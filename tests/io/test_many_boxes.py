"""Many boxes from one machine: one SSH endpoint serving twenty boxes (as a provider's
proxy does, told apart by user or runs root), twenty boxes behind one jump host, a box
whose sshd never sends its banner, a provider API asked about twenty boxes, and the
open-files limit.

Both sshds run with `MaxStartups 3:30:10` (from 3 unauthenticated connections in
flight sshd drops 30% of new ones, all from 10): every box answers on the first round
of `status`, and none reads refused. The fleet's handshake slots (8 per endpoint by
default) keep what the server drops to a few, each tried again soon; with the slots
forced wide ([connect] per_endpoint = 1000) the server drops half the twenty, which
the tests refuse; with the retries off as well, half the boxes read unreachable.
test_a_drop_past_max_startups_is_tried_again shows the retries alone. With
per_endpoint set to the server's start (3), the server drops none at all, round after
round. Silent boxes (an endpoint that never sends a banner) delay nobody, reached
directly or behind the jump host that the answering boxes are behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.provider_servers import Recorded, Reply, VastServer, vast_instance
from support.sshd import KeyPair, Sshd, free_port

from tui.cli.main import main
from tui.model.box import Connection
from tui.model.config import FleetConfig
from tui.providers.meter import CostMeter
from tui.remote.gates import loop_gates
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher
from tui.runtime.events import BoxChanged, Event
from tui.runtime.fleet import Runtime

Factory = Callable[..., Sshd]
STRICT = "3:30:10"
BOXES = 20
RUN = "yolox_completed"


def logins(server: Sshd) -> int:
    """Successful logins the server logged (it runs with LogLevel VERBOSE)."""
    return server.log_path.read_text(errors="replace").count("Accepted publickey")


def drops(server: Sshd) -> int:
    """Connections the server dropped past its MaxStartups."""
    return server.log_path.read_text(errors="replace").count("past MaxStartups")


def twenty_boxes(tmp_path: Path, server: Sshd, key: KeyPair, **extra: Any
                 ) -> list[dict[str, Any]]:
    """Twenty boxes on one host and port, each its own runs root with a run in it."""
    return [box_entry(server, key, f"pod-{i:02d}",
                      runs_roots=[str(runs_root_with(tmp_path, RUN, name=f"runs-{i:02d}"))],
                      **extra)
            for i in range(BOXES)]


def status_json(fleet: FleetConfig, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["status", "--json", "--config", fleet.source])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    errors = {b["name"]: b["error"] for b in doc["boxes"] if b["connection"] != "ok"}
    assert code == 0 and not errors, errors
    return doc


def assert_every_box_answered(doc: dict[str, Any]) -> None:
    boxes = {b["name"]: b for b in doc["boxes"]}
    assert sorted(boxes) == [f"pod-{i:02d}" for i in range(BOXES)]
    for name, box in boxes.items():
        assert box["connection"] == "ok", (name, box["error"])
        assert [(r["name"], r["health"]) for r in box["runs"]] == [(RUN, "completed")], name


def test_twenty_boxes_on_one_strict_endpoint_all_answer_the_first_round(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    proxy = sshd_factory("proxy", max_startups=STRICT)
    fleet = make_fleet(tmp_path, twenty_boxes(tmp_path, proxy, client_key),
                       known_hosts=[proxy.known_hosts_line()])
    assert_every_box_answered(status_json(fleet, capsys))
    assert logins(proxy) == BOXES  # one connection per box
    # Twenty at once would be dropped from the tenth on (10 to 14 drops seen); eight at
    # a time, narrowed at the first drop, stay well under that (3 to 5 seen).
    assert drops(proxy) < BOXES // 2


def test_twenty_boxes_behind_one_strict_jump_host_all_answer_the_first_round(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    jump = sshd_factory("jump", max_startups=STRICT, allow_tcp_forwarding=True)
    inner = sshd_factory("inner", max_startups=STRICT, allow_tcp_forwarding=False)
    fleet = make_fleet(tmp_path, twenty_boxes(tmp_path, inner, client_key,
                                              jump=f"root@127.0.0.1:{jump.port}"),
                       known_hosts=[jump.known_hosts_line(), inner.known_hosts_line()])
    assert_every_box_answered(status_json(fleet, capsys))
    assert logins(jump) == 1        # one connection to the jump host for all twenty
    assert logins(inner) == BOXES   # one per box, through it
    assert drops(inner) < BOXES // 2  # as on one endpoint: no more than a few, tried again


START = 3   # STRICT's start: sshd may drop a new connection from 3 in flight
ROUNDS = 10


@pytest.mark.parametrize("behind_jump_host", [False, True],
                         ids=["one endpoint", "behind one jump host"])
def test_per_endpoint_at_max_startups_start_drops_nothing_round_after_round(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str], behind_jump_host: bool) -> None:
    """The documented recipe: [connect] per_endpoint set to the endpoint's MaxStartups
    start. sshd's log shows no dropped connection at all, in ten rounds of twenty
    handshakes. sshd counts a login until its session process takes over, a moment after
    the client reads it logged in; a slot given back at that word let the next handshake
    in early, and sshd dropped one in about two rounds of five (one of six behind the
    jump host), so each handshake keeps its slot until the server answers on the new
    connection (hops.taken_over)."""
    if behind_jump_host:
        jump = sshd_factory("jump", max_startups=STRICT, allow_tcp_forwarding=True)
        inner = sshd_factory("inner", max_startups=STRICT, allow_tcp_forwarding=False)
        entries = twenty_boxes(tmp_path, inner, client_key, jump=f"root@127.0.0.1:{jump.port}")
        servers, known = [jump, inner], [jump.known_hosts_line(), inner.known_hosts_line()]
    else:
        inner = sshd_factory("proxy", max_startups=STRICT)
        entries = twenty_boxes(tmp_path, inner, client_key)
        servers, known = [inner], [inner.known_hosts_line()]
    fleet = make_fleet(tmp_path, entries, known_hosts=known, connect={"per_endpoint": START})
    for _ in range(ROUNDS):  # each `status` logs every box in anew
        assert_every_box_answered(status_json(fleet, capsys))
    assert logins(inner) == BOXES * ROUNDS
    assert [drops(server) for server in servers] == [0] * len(servers)


async def test_a_drop_past_max_startups_is_tried_again(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """With the slots forced wide, twenty handshakes at once trip the server: the dropped
    ones are tried again (counted as such, apart from failures) and every box answers."""
    proxy = sshd_factory("proxy", max_startups=STRICT)
    fleet = make_fleet(tmp_path, twenty_boxes(tmp_path, proxy, client_key),
                       known_hosts=[proxy.known_hosts_line()], connect={"per_endpoint": 100})
    store = host_key_store(fleet)
    watchers = [BoxWatcher(box, fleet, store=store) for box in fleet.boxes]
    try:
        states = await asyncio.gather(*(w.refresh() for w in watchers))
    finally:
        await asyncio.gather(*(w.close() for w in watchers))
    assert {s.name: s.error for s in states if s.connection is not Connection.OK} == {}
    assert all(s.failures == 0 for s in states)
    refused = sum(w.session.refused for w in watchers)
    assert drops(proxy) > 0 and refused > 0  # the server did drop some; they were retried
    assert loop_gates().refused == refused
    (gate,) = loop_gates().gates.values()
    assert gate.window < 100  # narrowed to what the server takes
    assert logins(proxy) == BOXES


async def test_boxes_whose_sshd_never_sends_a_banner_delay_nobody(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Six boxes behind an endpoint that takes the TCP connection and says nothing (a hung
    sshd, a proxy whose pod is gone), listed first, and three boxes that answer: the three
    answer at once, long before the six time out (each waits out its own)."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # kept open, never a byte sent

    hung = await asyncio.start_server(silent, "127.0.0.1", 0)
    hung_port = hung.sockets[0].getsockname()[1]
    good = sshd_factory("good")
    root = runs_root_with(tmp_path, RUN)
    boxes = [{"name": f"hung-{i}", "host": "127.0.0.1", "port": hung_port, "user": "root",
              "identity_file": str(client_key.private_path)} for i in range(6)]
    boxes += [box_entry(good, client_key, f"ok-{i}", runs_roots=[str(root)]) for i in range(3)]
    fleet = make_fleet(tmp_path, boxes, known_hosts=[good.known_hosts_line()],
                       timeout_seconds=30)
    loop = asyncio.get_running_loop()
    answered: dict[str, float] = {}

    def sink(item: Event) -> None:
        if isinstance(item, BoxChanged) and item.state.connection is Connection.OK:
            answered.setdefault(item.state.name, loop.time())

    runtime = Runtime(fleet, sink)
    started = loop.time()
    runtime.start()
    try:
        for _ in range(400):
            if len(answered) == 3:
                break
            await asyncio.sleep(0.05)
        hung_states = {runtime.states[f"hung-{i}"].connection for i in range(6)}
    finally:
        await runtime.aclose()
        hung.close()
        for writer in held:
            writer.close()
    assert sorted(answered) == ["ok-0", "ok-1", "ok-2"]
    slowest = max(answered.values()) - started
    assert slowest < 10, f"the answering boxes waited {slowest:.1f} s behind the silent ones"
    assert len(held) == 6 and hung_states == {Connection.CONNECTING}  # still waiting, alone


async def test_silent_boxes_behind_a_jump_host_delay_nobody_behind_it(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Sixteen boxes behind one jump host whose sshd takes the connection and never sends
    a banner (two windows' worth of the jump host's slots), listed first, and three good
    boxes behind the same jump host: the three answer long before any silent box times
    out. A handshake gives its jump-host slot back once it has taken
    JUMP_HOLD_SECONDS (its endpoint's it keeps), so the silent ones wait out their
    timeouts alone."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # kept open, never a byte sent

    hung = await asyncio.start_server(silent, "127.0.0.1", 0)
    hung_port = hung.sockets[0].getsockname()[1]
    jump = sshd_factory("jump", allow_tcp_forwarding=True)
    good = sshd_factory("good", allow_tcp_forwarding=False)
    via = f"root@127.0.0.1:{jump.port}"
    root = runs_root_with(tmp_path, RUN)
    boxes = [{"name": f"hung-{i:02d}", "host": "127.0.0.1", "port": hung_port,
              "user": "root", "identity_file": str(client_key.private_path), "jump": via}
             for i in range(16)]
    boxes += [box_entry(good, client_key, f"ok-{i}", runs_roots=[str(root)], jump=via)
              for i in range(3)]
    timeout = 10
    fleet = make_fleet(tmp_path, boxes,
                       known_hosts=[jump.known_hosts_line(), good.known_hosts_line()],
                       timeout_seconds=timeout)
    loop = asyncio.get_running_loop()
    answered: dict[str, float] = {}

    def sink(item: Event) -> None:
        if isinstance(item, BoxChanged) and item.state.connection is Connection.OK:
            answered.setdefault(item.state.name, loop.time())

    runtime = Runtime(fleet, sink)
    started = loop.time()
    runtime.start()
    try:
        while len(answered) < 3 and loop.time() - started < 2 * timeout + 5:
            await asyncio.sleep(0.05)
        hung_states = {runtime.states[f"hung-{i:02d}"].connection for i in range(16)}
    finally:
        await runtime.aclose()
        hung.close()
        for writer in held:
            writer.close()
    assert sorted(answered) == ["ok-0", "ok-1", "ok-2"]
    slowest = max(answered.values()) - started
    print(f"good boxes behind the jump host answered after {slowest:.2f} s")
    # Before: the first eight held the jump host's eight slots for their whole timeout,
    # then the next eight did: the good boxes answered after two timeouts (~20 s).
    assert slowest < timeout / 2, \
        f"the answering boxes waited {slowest:.1f} s behind the silent ones"
    # Still waiting, alone; and the silent endpoint's own bound still holds: eight of
    # them in flight there (per_endpoint), the other eight queued for its slots.
    assert len(held) == 8 and hung_states == {Connection.CONNECTING}


class CountingVast(VastServer):
    """Vast's API, answering each request after 50 ms, counting requests in flight."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = self.most = 0
        self.counting = threading.Lock()

    def respond(self, request: Recorded) -> Reply | None:
        with self.counting:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.05)
            return super().respond(request)
        finally:
            with self.counting:
                self.now -= 1


@pytest.fixture
def counting_vast(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingVast]:
    monkeypatch.setenv("VAST_API_KEY", "vast-key")
    server = CountingVast("vast-key", [vast_instance(1000 + i) for i in range(BOXES)])
    server.start()
    try:
        yield server
    finally:
        server.close()


async def test_provider_requests_in_flight_stay_within_per_provider(
        tmp_path: Path, counting_vast: CountingVast) -> None:
    boxes = [{"name": f"v{i}", "host": "127.0.0.1", "provider": "vast",
              "instance_id": str(1000 + i)} for i in range(BOXES)]
    fleet = make_fleet(tmp_path, boxes, providers={"vast": {"base_url": counting_vast.url}},
                       connect={"per_provider": 3})
    meter = CostMeter(fleet)
    try:
        await meter.poll()
    finally:
        await meter.aclose()
    assert meter.errors == {} and len(meter.facts) == BOXES
    assert counting_vast.most == 3  # all twenty asked, three at a time


# --- the open-files limit ------------------------------------------------------------


def unreachable_fleet(tmp_path: Path, key: KeyPair, boxes: int) -> FleetConfig:
    """Boxes on a port nothing listens on: each reads unreachable at once."""
    port = free_port()
    return make_fleet(tmp_path, [{"name": f"b{i}", "host": "127.0.0.1", "port": port,
                                  "user": "root", "identity_file": str(key.private_path)}
                                 for i in range(boxes)])


def limited(soft: int, hard: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return lower


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui", *args]


def test_status_says_in_one_line_when_the_fleet_needs_more_open_files(
        tmp_path: Path, client_key: KeyPair) -> None:
    fleet = unreachable_fleet(tmp_path, client_key, 40)  # 40 sockets + 64 spare: 104
    done = subprocess.run(cli("status", "--json", "--config", fleet.source),
                          preexec_fn=limited(80, 80), capture_output=True, text=True,
                          timeout=120, env=os.environ)
    warnings = [line for line in done.stderr.splitlines() if "open files" in line]
    assert warnings == [
        "open files: 40 box(es) need about 104 open files, but this process may "
        "open 80 (the hard limit is 80): boxes past it will read unreachable (too many "
        "open files); raise it (`ulimit -Hn 104` as root, LimitNOFILE=104 in a systemd "
        "unit, or nofile in /etc/security/limits.conf) and start again"], done.stderr
    doc = json.loads(done.stdout)
    assert {b["connection"] for b in doc["boxes"]} == {"unreachable"} and done.returncode == 1


def test_the_soft_limit_is_raised_to_the_hard_one_quietly_when_it_fits(
        tmp_path: Path, client_key: KeyPair) -> None:
    fleet = unreachable_fleet(tmp_path, client_key, 3)
    code = ("import resource, sys\n"
            "from tui.cli.fleet import load_fleet\n"
            "from tui.runtime.open_files import raise_open_files\n"
            "print(raise_open_files(load_fleet(sys.argv[1])))\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n")
    done = subprocess.run([sys.executable, "-c", code, fleet.source],
                          preexec_fn=limited(70, 2048), capture_output=True, text=True,
                          timeout=60, env=os.environ, check=True)
    assert done.stdout.split() == ["None", "2048"]


def test_watch_says_it_in_its_log_as_its_runtime_starts(
        tmp_path: Path, client_key: KeyPair) -> None:
    fleet = unreachable_fleet(tmp_path, client_key, 40)
    proc = subprocess.Popen(cli("watch", "--config", fleet.source), preexec_fn=limited(80, 80),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ)
    try:
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "open files:" in line:
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    found = [line for line in seen if "open files:" in line]
    assert len(found) == 1 and "40 box(es) need about 104 open files" in found[0] and \
        "(the hard limit is 80)" in found[0], seen
