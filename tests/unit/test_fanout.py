"""Fanning out to many boxes: which slots a handshake waits for, how a refused one is
tried again, the fleet's `[connect]` table and the open files a fleet needs."""

from __future__ import annotations

import asyncio

import pytest

from tui.model.config import ConfigError, parse_config
from tui.model.config_diff import config_changes, needs_restart
from tui.model.fanout import (
    FD_MARGIN,
    JUMP_HOLD_SECONDS,
    REFUSED_CAP_SECONDS,
    BoxRoute,
    ConnectLimits,
    files_needed,
    files_warning,
    gate_hold,
    gate_limit,
    handshake_gates,
    narrowed,
    refused_delay,
    sockets_needed,
    soft_limit_wanted,
)
from tui.remote.gates import Gate, Gates

BOX = '[[box]]\nname = "a"\nhost = "h"\n'


def test_a_direct_handshake_waits_at_its_endpoint_only() -> None:
    assert handshake_gates([("proxy.example", 22)]) == (("endpoint", (("proxy.example", 22),)),)


def test_a_tunnelled_handshake_waits_at_its_endpoint_then_its_jump_host() -> None:
    route = [("bastion", 2222), ("10.0.0.5", 22)]
    assert handshake_gates(route) == (
        ("endpoint", (("bastion", 2222), ("10.0.0.5", 22))),
        ("jump host", (("bastion", 2222),)))
    # The same address behind another jump host is another server: another endpoint.
    other = handshake_gates([("other-bastion", 22), ("10.0.0.5", 22)])
    assert other[0] != handshake_gates(route)[0]
    with pytest.raises(ValueError):
        handshake_gates([])


def test_gate_limits_come_from_the_config() -> None:
    limits = ConnectLimits(per_endpoint=3, per_jump_host=5)
    endpoint, jump = handshake_gates([("j", 22), ("b", 22)])
    assert gate_limit(jump, limits) == 5 and gate_limit(endpoint, limits) == 3


def test_an_endpoint_slot_is_held_to_the_end_a_jump_host_slot_briefly() -> None:
    endpoint, jump = handshake_gates([("j", 22), ("b", 22)])
    assert gate_hold(endpoint) is None  # the server counts the handshake to its end
    assert gate_hold(jump) == JUMP_HOLD_SECONDS and 0 < JUMP_HOLD_SECONDS <= 1


def test_defaults_stay_under_openssh_max_startups() -> None:
    limits = ConnectLimits()
    assert limits.per_endpoint < 10 and limits.per_jump_host < 10 and limits.per_provider >= 1


def test_a_drop_halves_what_was_in_flight() -> None:
    assert narrowed(8, 8) == 4
    assert narrowed(8, 3) == 1
    assert narrowed(2, 9) == 1
    assert narrowed(1, 1) == 1


def test_refused_delay_is_soon_jittered_and_capped() -> None:
    assert refused_delay(1, 0.0) == pytest.approx(0.125)
    assert refused_delay(1, 1.0) == pytest.approx(0.25)
    assert refused_delay(3, 0.5) == pytest.approx(0.75)
    assert refused_delay(50, 1.0) == REFUSED_CAP_SECONDS
    assert refused_delay(50, 0.0) == REFUSED_CAP_SECONDS / 2


def test_connect_table_parses_and_defaults() -> None:
    fleet = parse_config(BOX, "f.toml")
    assert fleet.connect == ConnectLimits()
    fleet = parse_config("[connect]\nper_endpoint = 3\nper_jump_host = 2\nper_provider = 1\n"
                         + BOX, "f.toml")
    assert fleet.connect == ConnectLimits(3, 2, 1)


def test_connect_table_errors_name_file_line_and_key() -> None:
    text = "[connect]\nper_endpoint = 0\nper_jump_host = 2.5\nper_provder = 1\n" + BOX
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "fleet.toml")
    lines = str(caught.value).splitlines()
    assert lines[0] == "fleet.toml:2: key 'connect.per_endpoint': must be >= 1, got 0"
    assert lines[1].startswith("fleet.toml:3: key 'connect.per_jump_host': expected a whole "
                               "number, got a number (2.5)")
    assert lines[2].startswith("fleet.toml:4: key 'connect.per_provder': unknown key (did you "
                               "mean 'per_provider'?)")
    with pytest.raises(ConfigError, match="key 'connect': expected a table"):
        parse_config("connect = 3\n" + BOX, "fleet.toml")


def test_sockets_one_per_direct_box_one_per_first_jump_host() -> None:
    boxes = [BoxRoute(None, "manual"), BoxRoute(None, "vast"),
             *(BoxRoute("me@bastion:2222", "runpod") for _ in range(500)),
             BoxRoute("me@bastion:2222, inner", "manual"), BoxRoute("other", "manual")]
    limits = ConnectLimits(per_provider=4)
    assert sockets_needed(boxes, limits) == (2, 2, 8)  # bastion and other; vast and runpod
    assert files_needed(boxes, limits) == 12 + FD_MARGIN


def test_soft_limit_goes_to_the_hard_one() -> None:
    assert soft_limit_wanted(1024, 4096, 2000) == 4096
    assert soft_limit_wanted(1024, 4096, 100) == 4096
    assert soft_limit_wanted(1024, None, 5000) == 5000  # unlimited: what is needed
    assert soft_limit_wanted(8192, 4096, 100) == 8192   # never lowered


def test_files_warning_only_past_the_limit_in_one_line() -> None:
    assert files_warning(1000, 1024, 1024, 900) is None
    line = files_warning(1064, 1024, 1024, 1000)
    assert line is not None and "\n" not in line
    assert line.startswith("open files: 1000 box(es) need about 1064 open files, but this "
                           "process may open 1024 (the hard limit is 1024)")
    assert "ulimit -Hn 1064" in line
    raised_less = files_warning(20000, 10240, None, 19000)
    assert raised_less is not None and "could be raised to 10240 only" in raised_less


async def test_gate_holds_at_most_its_window_first_come_first_served() -> None:
    gate = Gate(2)
    order: list[int] = []

    async def hold(i: int) -> None:
        await gate.acquire()
        order.append(i)
        assert gate.in_flight <= 2
        await asyncio.sleep(0.01)
        gate.release(logged_in=True)

    await asyncio.gather(*(hold(i) for i in range(7)))
    assert order == list(range(7)) and gate.most == 2 and gate.in_flight == 0


async def test_gate_narrows_on_a_drop_and_widens_slowly_back() -> None:
    gate = Gate(8)
    for _ in range(8):
        await gate.acquire()
    gate.release(refused=True)  # 8 in flight, one dropped: the window is 4
    assert gate.window == 4 and gate.refused == 1
    for _ in range(7):
        gate.release()
    for _ in range(4):  # a window's worth of logins widens it by one
        await gate.acquire()
        gate.release(logged_in=True)
    assert gate.window == 5
    gate.configure(3)  # the config reloaded with less: at once
    assert gate.window == 3 and gate.limit == 3


async def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    gate = Gate(1)
    await gate.acquire()
    waiting = asyncio.ensure_future(gate.acquire())
    third = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    gate.release()
    await asyncio.wait_for(third, 1)
    assert gate.in_flight == 1


async def test_slots_take_the_jump_host_and_the_endpoint() -> None:
    gates = Gates()
    limits = ConnectLimits(per_endpoint=2, per_jump_host=3)
    route = [("j", 22), ("b", 22)]
    async with gates.slots(route, limits) as outcome:
        endpoint, jump = (gates.gates[k] for k in handshake_gates(route))
        assert jump.in_flight == endpoint.in_flight == 1
        assert (jump.limit, endpoint.limit) == (3, 2)
        outcome.refused = True
    assert jump.in_flight == endpoint.in_flight == 0
    assert endpoint.refused == 1 and jump.refused == 0 and gates.refused == 1


async def test_a_long_handshake_gives_its_jump_host_slot_back_and_keeps_its_endpoint() -> None:
    gates = Gates()
    limits = ConnectLimits(per_endpoint=2, per_jump_host=1)
    silent, other = [("j", 22), ("dead", 22)], [("j", 22), ("b", 22)]
    async with gates.slots(silent, limits) as slow:
        endpoint, jump = (gates.gates[k] for k in handshake_gates(silent))
        assert jump.in_flight == endpoint.in_flight == 1
        await asyncio.sleep(JUMP_HOLD_SECONDS + 0.1)
        assert jump.in_flight == 0 and endpoint.in_flight == 1  # the server still counts it
        async with gates.slots(other, limits) as fast:  # not held up behind it
            assert jump.in_flight == 1
            fast.logged_in = True
        assert jump.in_flight == 0
        slow.refused = True
    assert endpoint.in_flight == 0 and endpoint.refused == 1
    assert jump.in_flight == 0 and jump.most == 1  # given back once, not twice


async def test_a_waiter_cancelled_after_it_was_handed_the_slot_passes_it_on() -> None:
    gate = Gate(1)
    await gate.acquire()
    handed = asyncio.ensure_future(gate.acquire())
    third = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # the slot goes to `handed`, which is cancelled before it runs
    handed.cancel()
    await asyncio.wait_for(third, 1)
    assert handed.cancelled() and gate.in_flight == 1


def test_a_connect_change_is_said_and_per_provider_waits_for_a_restart() -> None:
    old = parse_config(BOX, "f.toml")
    new = parse_config("[connect]\nper_endpoint = 3\nper_provider = 2\n" + BOX, "f.toml")
    assert config_changes(old, new) == ["connect per_endpoint 8 → 3",
                                        "connect per_provider 4 → 2"]
    assert needs_restart(old, new) == ["connect.per_provider"]
    assert needs_restart(old, parse_config("[connect]\nper_endpoint = 3\n" + BOX, "f.toml")) == []
