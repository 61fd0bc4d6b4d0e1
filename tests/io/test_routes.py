"""Routes as OpenSSH would take them, against real sshd: one login per jump host however
many boxes sit behind it, the ssh config (Include, patterns, IdentitiesOnly,
IdentityAgent, ServerAlive*), and keys that live only in an ssh-agent."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd, _descendants, _pids_from_ssh_port, make_keypair

from tui.model.box import BoxState, Connection
from tui.remote.hostkeys import host_key_store
from tui.remote.watch import BoxWatcher, snapshot_fleet

Factory = Callable[..., Sshd]


def logins(server: Sshd) -> int:
    """Successful logins the server logged (it runs with LogLevel VERBOSE)."""
    return server.log_path.read_text(errors="replace").count("Accepted publickey")


def by_name(states: list[BoxState]) -> dict[str, BoxState]:
    return {s.name: s for s in states}


@pytest.fixture
def agent() -> Iterator[Callable[..., str]]:
    """Start ssh-agents holding the given keys; each is ended at teardown."""
    procs: list[subprocess.Popen[bytes]] = []
    folder = Path(tempfile.mkdtemp(prefix="gpa"))  # a socket path must stay short

    def start(*keys: KeyPair) -> str:
        sock = folder / f"a{len(procs)}"
        proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "ssh-agent did not start"
            time.sleep(0.02)
        for key in keys:
            subprocess.run(["ssh-add", "-q", str(key.private_path)], check=True,
                           capture_output=True, env={**os.environ, "SSH_AUTH_SOCK": str(sock)})
        return str(sock)

    yield start
    for proc in procs:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    shutil.rmtree(folder, ignore_errors=True)


def strangers(directory: Path, count: int) -> list[KeyPair]:
    return [make_keypair(directory, f"stranger{i}") for i in range(count)]


async def test_boxes_behind_one_jump_host_share_one_login_and_reconnect_once(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    jump, box = sshd_factory("jump"), sshd_factory("box", allow_tcp_forwarding=False)
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [
        box_entry(box, client_key, name, runs_roots=[str(root)],
                  jump=f"root@127.0.0.1:{jump.port}") for name in ("a", "b", "c")],
        known_hosts=[jump.known_hosts_line(), box.known_hosts_line()])
    store = host_key_store(fleet)
    watchers = [BoxWatcher(b, fleet, store=store) for b in fleet.boxes]
    try:
        for state in await asyncio.gather(*(w.refresh() for w in watchers)):
            assert state.connection is Connection.OK, state.error
        assert logins(jump) == 1 and logins(box) == 3
        jump.restart()  # the bastion drops every connection through it
        for _ in range(6):
            states = await asyncio.gather(*(w.refresh() for w in watchers))
            if all(s.connection is Connection.OK for s in states):
                break
            await asyncio.sleep(0.2)
        assert all(s.connection is Connection.OK for s in states), [s.error for s in states]
        assert logins(jump) == 2  # one login again, for all three boxes
    finally:
        await asyncio.gather(*(w.close() for w in watchers))


async def test_ssh_config_include_patterns_identities_only_and_keepalives(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        agent: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    # An agent full of other keys, and a box that allows 3 tries: a key offered after
    # them never gets its turn unless IdentitiesOnly keeps the agent's keys out.
    monkeypatch.setenv("SSH_AUTH_SOCK", agent(*strangers(tmp_path / "s", 5)))
    box = sshd_factory("box", extra_config="MaxAuthTries 3")
    root = runs_root_with(tmp_path, "yolox_completed")
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "10-boxes.conf").write_text(
        f"Host train-* !train-nokey\n  HostName 127.0.0.1\n"
        f"  IdentityFile {client_key.private_path}\n"
        f"  IdentitiesOnly yes\n  ServerAliveInterval 1\n  ServerAliveCountMax 1\n\n"
        f"Host train-nokey\n  HostName 127.0.0.1\n  IdentityFile {tmp_path / 'missing_key'}\n\n"
        f"Host loose-*\n  HostName 127.0.0.1\n  IdentityFile {client_key.private_path}\n")
    config = tmp_path / "ssh_config"
    config.write_text(f"Include {conf_d}/*.conf\n\nHost *\n  User root\n")
    fleet = make_fleet(tmp_path, [
        {"name": name, "host": name, "port": box.port, "runs_roots": [str(root)]}
        for name in ("train-a", "train-nokey", "loose-a")],
        known_hosts=[box.known_hosts_line()], ssh_config=str(config))
    watchers = {b.name: BoxWatcher(b, fleet) for b in fleet.boxes}
    try:
        states = {n: await w.refresh() for n, w in watchers.items()}
        assert states["train-a"].connection is Connection.OK, states["train-a"].error
        assert [r.name for r in states["train-a"].runs] == ["yolox_completed"]
        # Negated out of the pattern: its own (missing) key, nothing else.
        assert states["train-nokey"].connection is Connection.AUTH_FAILED
        assert f"identity file {tmp_path / 'missing_key'} does not exist" in (
            states["train-nokey"].error or "")
        # Without IdentitiesOnly the agent's keys go first, as with ssh: refused.
        assert states["loose-a"].connection is Connection.AUTH_FAILED
        assert "5 key(s) from the agent" in (states["loose-a"].error or "")
        # ServerAliveInterval 1 / CountMax 1: a box that stops answering is noticed in
        # seconds (the default keepalive would take 45 s).
        session = watchers["train-a"].session
        assert session.connected
        frozen = _descendants(box._proc.pid) if box._proc else set()
        for pid in frozen:
            # A child from the refused logins above may exit between listing and here.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 10
            while session.connected and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert not session.connected
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
    finally:
        for watcher in watchers.values():
            await watcher.close()


async def test_identity_agent_from_the_ssh_config(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        agent: Callable[..., str]) -> None:
    sock = agent(client_key)  # SSH_AUTH_SOCK is unset: only the config names this agent
    box = sshd_factory("box")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host trainer\n  HostName 127.0.0.1\n  User root\n  Port {box.port}\n"
                      f"  IdentityAgent {sock}\n\nHost no-agent\n  HostName 127.0.0.1\n"
                      f"  User root\n  Port {box.port}\n  IdentityAgent none\n")
    fleet = make_fleet(tmp_path, [{"name": "box", "host": "trainer"},
                                  {"name": "none", "host": "no-agent"}],
                       known_hosts=[box.known_hosts_line()], ssh_config=str(config))
    states = by_name(await snapshot_fleet(fleet))
    assert states["box"].connection is Connection.OK, states["box"].error
    assert states["none"].connection is Connection.AUTH_FAILED


async def test_keys_only_in_a_forwarded_agent_serve_every_hop(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        agent: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a jump host reached with `ssh -A`, the config names the laptop's key files,
    which are not there; the forwarded agent holds the keys."""
    others = strangers(tmp_path / "s", 4)
    monkeypatch.setenv("SSH_AUTH_SOCK", agent(*others, client_key))
    bastion = sshd_factory("bastion", extra_config="MaxAuthTries 3")
    box = sshd_factory("box", extra_config="MaxAuthTries 3")
    root = runs_root_with(tmp_path, "yolox_failed")
    laptop_key = tmp_path / "laptop" / "id_ed25519"  # absent here
    pub_only = tmp_path / "pub" / "id_ed25519.pub"   # the public half only
    pub_only.parent.mkdir()
    pub_only.write_text(client_key.public_line + "\n")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host bastion\n  HostName 127.0.0.1\n  Port {bastion.port}\n  User root\n"
        f"  IdentityFile {pub_only}\n  IdentitiesOnly yes\n\n"
        f"Host trainer\n  HostName 127.0.0.1\n  Port {box.port}\n  User root\n"
        f"  IdentityFile {laptop_key}\n  IdentityFile {pub_only}\n  IdentitiesOnly yes\n"
        f"  ProxyJump bastion\n")
    fleet = make_fleet(tmp_path, [{"name": "box", "host": "trainer", "runs_roots": [str(root)]}],
                       known_hosts=[bastion.known_hosts_line(), box.known_hosts_line()],
                       ssh_config=str(config))
    (state,) = await snapshot_fleet(fleet)
    assert state.connection is Connection.OK, state.error
    assert [r.name for r in state.runs] == ["yolox_failed"]
    assert logins(bastion) == 1 and logins(box) == 1


async def test_a_proxy_command_in_the_ssh_config_is_refused_in_words(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """`ProxyCommand` is not run: the box used to be dialled directly instead, behind the
    user's back (here that even worked, since the box is on loopback). Now the box reads
    as not reachable, with what to use instead; `ProxyCommand none` and a fleet `jump`
    (which replaces the config's proxy, like `ssh -J`) still connect."""
    jump, box = sshd_factory("jump"), sshd_factory("box")
    host = (f"  HostName 127.0.0.1\n  Port {box.port}\n  User root\n"
            f"  IdentityFile {client_key.private_path}\n")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host behind overridden\n{host}  ProxyCommand ssh -W %h:%p bastion\n\n"
        f"Host plain\n{host}  ProxyCommand none\n\n"
        f"Host via-bastion\n  HostName 127.0.0.1\n  Port {jump.port}\n  User root\n"
        f"  ProxyCommand nc %h %p\n")
    fleet = make_fleet(tmp_path, [
        {"name": "behind", "host": "behind"},
        {"name": "plain", "host": "plain"},
        {"name": "overridden", "host": "overridden", "jump": f"root@127.0.0.1:{jump.port}",
         "identity_file": str(client_key.private_path)},
        {"name": "jump-has-one", "host": "plain", "jump": "via-bastion"}],
        known_hosts=[jump.known_hosts_line(), box.known_hosts_line()], ssh_config=str(config))
    states = by_name(await snapshot_fleet(fleet))
    behind = states["behind"]
    assert behind.connection is Connection.UNREACHABLE, behind.error
    assert "ProxyCommand is not supported; use ProxyJump or the box's `jump` key" in (
        behind.error or "")
    assert "ssh -W" not in (behind.error or "")  # the user's command line is not echoed
    assert states["plain"].connection is Connection.OK, states["plain"].error
    assert states["overridden"].connection is Connection.OK, states["overridden"].error
    assert logins(jump) == 1
    hop = states["jump-has-one"]
    assert hop.connection is Connection.UNREACHABLE and "ProxyCommand" in (hop.error or "")
    assert "via-bastion" in (hop.error or "")
    assert logins(box) == 2  # plain, and overridden through the jump: never `behind`


async def test_match_host_and_match_user_in_the_ssh_config(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """`Match host` picks the port by the name the fleet uses; `Match user` the key by the
    login name, whether the fleet sets it or an earlier `User` line does (as with ssh)."""
    box = sshd_factory("box")
    root = runs_root_with(tmp_path, "yolox_completed")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host gpu-b\n  User root\n\n"
        f"Match host gpu-*\n  Port {box.port}\n\n"
        f"Match user root\n  IdentityFile {client_key.private_path}\n\n"
        f"Host *\n  HostName 127.0.0.1\n  Port 1\n  IdentitiesOnly yes\n"
        f"  IdentityFile {tmp_path / 'not_root_key'}\n")
    fleet = make_fleet(tmp_path, [
        {"name": "a", "host": "gpu-a", "user": "root", "runs_roots": [str(root)]},
        {"name": "b", "host": "gpu-b", "runs_roots": [str(root)]},
        {"name": "other-user", "host": "gpu-c", "user": "nobody"},
        {"name": "other-host", "host": "cpu-a", "user": "root"}],
        known_hosts=[box.known_hosts_line()], ssh_config=str(config))
    states = by_name(await snapshot_fleet(fleet))
    for name in ("a", "b"):
        assert states[name].connection is Connection.OK, (name, states[name].error)
        assert [r.name for r in states[name].runs] == ["yolox_completed"]
    other = states["other-user"]  # the right port, but not root: only the other key
    assert other.connection is Connection.AUTH_FAILED, other.error
    assert f"identity file {tmp_path / 'not_root_key'} does not exist" in (other.error or "")
    assert str(client_key.private_path) not in (other.error or "")  # root's key: not tried
    assert states["other-host"].connection is Connection.UNREACHABLE  # Port 1: not gpu-*
    assert logins(box) == 2


async def test_the_agent_is_never_forwarded_to_a_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        agent: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`ForwardAgent yes` in the ssh config is ignored: whoever controls a rented box
    could use a forwarded agent to log in wherever its keys open. OpenSSH's `ssh -A` to
    the same sshd does get an agent on the box (so the look below could see one); the
    panel's kept probe there holds no SSH_AUTH_SOCK."""
    monkeypatch.setenv("SSH_AUTH_SOCK", agent(client_key))
    box = sshd_factory("box")
    root = runs_root_with(tmp_path, "yolox_failed")
    known = tmp_path / "known_hosts_ssh"
    known.write_text(box.known_hosts_line() + "\n")
    config = tmp_path / "ssh_config"
    config.write_text("Host 127.0.0.1\n  ForwardAgent yes\n")
    forwarded = await asyncio.to_thread(subprocess.run, [
        "ssh", "-F", str(config), "-A", "-p", str(box.port), "-i", str(client_key.private_path),
        "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes", "root@127.0.0.1",
        "printenv SSH_AUTH_SOCK"], capture_output=True, text=True, timeout=30)
    assert forwarded.returncode == 0 and forwarded.stdout.strip(), forwarded

    fleet = make_fleet(tmp_path, [box_entry(box, client_key, "box", runs_roots=[str(root)])],
                       known_hosts=[box.known_hosts_line()], ssh_config=str(config))
    watcher = BoxWatcher(fleet.boxes[0], fleet, store=host_key_store(fleet))
    try:
        state = await watcher.refresh()
        assert state.connection is Connection.OK, state.error
        sessions = _pids_from_ssh_port(box.port)
        assert sessions, "the kept probe runs in a session on the box"
        environs = [Path(f"/proc/{pid}/environ").read_bytes() for pid in sessions]
        assert not any(b"SSH_AUTH_SOCK=" in env for env in environs)
    finally:
        await watcher.close()
