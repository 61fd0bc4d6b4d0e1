"""SSH sessions against real OpenSSH sshd on 127.0.0.1: hops, host keys, failures, reconnects."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd, make_keypair

from tui.model.box import BoxState, Connection
from tui.model.runs import Health
from tui.remote.watch import BoxWatcher, snapshot_fleet

Factory = Callable[..., Sshd]


def fingerprint_of(key: KeyPair) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", f"{key.private_path}.pub"], check=True,
                         capture_output=True, text=True).stdout
    return out.split()[1]


async def one_box(fleet, name: str = "box") -> BoxState:  # type: ignore[no-untyped-def]
    (state,) = [s for s in await snapshot_fleet(fleet) if s.name == name]
    return state


async def test_direct_box_reports_runs_and_reuses_its_session(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    try:
        state = await watcher.refresh()
        assert state.connection is Connection.OK, state.error
        assert {r.name: r.health for r in state.runs} == {
            "yolox_completed": Health.COMPLETED, "yolox_failed": Health.FAILED}
        assert state.disks and state.disks[0].root == str(root)
        state = await watcher.refresh()
        assert state.connection is Connection.OK
        assert watcher.session.connects == 1
        assert watcher.session.last_bytes_in < 1000  # nothing changed: a small answer
    finally:
        await watcher.close()


async def test_one_jump_host(tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    jump = sshd_factory("jump")
    box = sshd_factory("box", allow_tcp_forwarding=False)
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(
        tmp_path,
        [box_entry(box, client_key, runs_roots=[str(root)], jump=f"root@127.0.0.1:{jump.port}")],
        known_hosts=[jump.known_hosts_line(), box.known_hosts_line()])
    state = await one_box(fleet)
    assert state.connection is Connection.OK, state.error
    assert [r.name for r in state.runs] == ["yolox_completed"]


async def test_chain_of_two_jump_hosts(tmp_path: Path, sshd_factory: Factory,
                                       client_key: KeyPair) -> None:
    first, second = sshd_factory("j1"), sshd_factory("j2")
    box = sshd_factory("box")
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(
        tmp_path,
        [box_entry(box, client_key, runs_roots=[str(root)],
                   jump=f"root@127.0.0.1:{first.port},root@127.0.0.1:{second.port}")],
        known_hosts=[s.known_hosts_line() for s in (first, second, box)])
    state = await one_box(fleet)
    assert state.connection is Connection.OK, state.error
    # Stop the second jump host: the box is unreachable, and the message says which hop.
    second.stop()
    state = await one_box(fleet)
    assert state.connection is Connection.UNREACHABLE
    assert f"jump host root@127.0.0.1:{second.port}" in (state.error or "")


async def test_ssh_config_alias_with_proxyjump(tmp_path: Path, sshd_factory: Factory,
                                               client_key: KeyPair) -> None:
    jump, box = sshd_factory("jump"), sshd_factory("box")
    root = runs_root_with(tmp_path, "yolox_failed")
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {jump.port}\n  User root\n"
        f"  IdentityFile {client_key.private_path}\n\n"
        f"Host trainer\n  HostName 127.0.0.1\n  Port {box.port}\n  User root\n"
        f"  IdentityFile {client_key.private_path}\n  ProxyJump bastion\n")
    fleet = make_fleet(tmp_path, [{"name": "box", "host": "trainer", "runs_roots": [str(root)]}],
                       known_hosts=[jump.known_hosts_line(), box.known_hosts_line()],
                       ssh_config=str(ssh_config))
    state = await one_box(fleet)
    assert state.connection is Connection.OK, state.error
    assert state.runs[0].health is Health.FAILED
    jump.stop()  # proves the route went through the alias's ProxyJump
    state = await one_box(fleet)
    assert state.connection is Connection.UNREACHABLE
    assert "jump host bastion" in (state.error or "")


async def test_wrong_key_is_auth_failed(tmp_path: Path, sshd_factory: Factory,
                                        client_key: KeyPair) -> None:
    server = sshd_factory()
    stranger = make_keypair(tmp_path / "other", "stranger")
    fleet = make_fleet(tmp_path, [box_entry(server, stranger)],
                       known_hosts=[server.known_hosts_line()])
    state = await one_box(fleet)
    assert state.connection is Connection.AUTH_FAILED
    assert f"root@127.0.0.1:{server.port} refused the key ({stranger.private_path})" in state.error
    missing = make_fleet(tmp_path, [box_entry(server, client_key,
                                              identity_file=str(tmp_path / "nope"))],
                         known_hosts=[server.known_hosts_line()])
    state = await one_box(missing)
    assert state.connection is Connection.AUTH_FAILED
    assert "does not exist" in (state.error or "")


async def test_unknown_host_key_is_refused_with_its_fingerprint(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)])
    state = await one_box(fleet)
    assert state.connection is Connection.HOST_KEY_UNKNOWN
    assert fingerprint_of(server.host_key) in (state.error or "")
    assert "accept-new" in (state.error or "")


async def test_unknown_key_on_a_jump_host_names_the_jump_host(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    jump, box = sshd_factory("jump"), sshd_factory("box")
    fleet = make_fleet(tmp_path, [box_entry(box, client_key, jump=f"root@127.0.0.1:{jump.port}")],
                       known_hosts=[box.known_hosts_line()])
    state = await one_box(fleet)
    assert state.connection is Connection.HOST_KEY_UNKNOWN
    assert (state.error or "").startswith(f"host key of jump host root@127.0.0.1:{jump.port}")


async def test_changed_host_key_is_refused_and_explained(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    old = make_keypair(tmp_path / "old", "old_host_key")
    known = f"[127.0.0.1]:{server.port} {old.public_line}"
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=["# a comment", known])
    state = await one_box(fleet)
    assert state.connection is Connection.HOST_KEY_CHANGED
    error = state.error or ""
    assert fingerprint_of(server.host_key) in error
    assert f"{tmp_path / 'known_hosts'}:2" in error
    assert f"ssh-keygen -R '[127.0.0.1]:{server.port}'" in error


async def test_accept_new_pins_first_key_then_refuses_a_changed_one(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)], host_keys="accept-new")
    state = await one_box(fleet)
    assert state.connection is Connection.OK, state.error
    pinned = isolated_dirs / "data" / "gpurent-tui" / "known_hosts"
    assert pinned.read_text() .startswith(f"[127.0.0.1]:{server.port} ssh-ed25519 ")
    assert (await one_box(fleet)).connection is Connection.OK
    server.stop()
    rebuilt = Sshd(server.workdir.with_name("rebuilt"), [client_key.public_line],
                   port=server.port, home=tmp_path / "home-rebuilt")
    rebuilt.start()
    try:
        state = await one_box(fleet)
        assert state.connection is Connection.HOST_KEY_CHANGED
        assert f"{pinned}:1" in (state.error or "")
    finally:
        rebuilt.stop()


async def test_box_without_python3_is_probe_failed(tmp_path: Path, sshd_factory: Factory,
                                                   client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": "/nonexistent"})
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    state = await one_box(fleet)
    assert state.connection is Connection.PROBE_FAILED
    assert "python3 not found on the box" in (state.error or "")


async def test_refused_and_silent_boxes_do_not_hold_up_the_others(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    good = sshd_factory()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts TCP, never speaks SSH
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: connection refused
    try:
        fleet = make_fleet(tmp_path, [
            box_entry(good, client_key, "good"),
            {**box_entry(good, client_key, "silent"), "port": silent.getsockname()[1],
             "timeout_seconds": 1.5},
            {**box_entry(good, client_key, "refused"), "port": closed.getsockname()[1]},
        ], known_hosts=[good.known_hosts_line()])
        states = {s.name: s for s in await snapshot_fleet(fleet)}
    finally:
        silent.close()
        closed.close()
    assert states["good"].connection is Connection.OK
    assert states["silent"].connection is Connection.TIMEOUT
    assert "no SSH login within 1.5 s" in (states["silent"].error or "")
    assert states["refused"].connection is Connection.UNREACHABLE
    assert "refused" in (states["refused"].error or "").lower()


async def test_killed_sshd_marks_box_down_keeps_runs_and_reconnects(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=0.2,
                       timeout_seconds=3)
    watcher = BoxWatcher(fleet.boxes[0], fleet, jitter=lambda: 0.0)
    updates: list[BoxState] = []
    task = asyncio.create_task(watcher.run(updates.append))

    async def until(predicate: Callable[[BoxState], bool], timeout: float = 30) -> BoxState:
        async with asyncio.timeout(timeout):
            while not (updates and predicate(updates[-1])):
                await asyncio.sleep(0.05)
        return updates[-1]

    try:
        await until(lambda s: s.connection is Connection.OK)
        server.stop()
        down = await until(lambda s: s.connection is not Connection.OK)
        assert down.connection in (Connection.UNREACHABLE, Connection.TIMEOUT)
        assert [r.name for r in down.runs] == ["yolox_completed"]  # nothing lost
        assert down.retry_at is not None
        server.restart()
        watcher.poke()
        back = await until(lambda s: s.connection is Connection.OK)
        assert back.runs[0].health is Health.COMPLETED
        assert watcher.session.connects == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
