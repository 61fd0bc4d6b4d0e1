"""Host keys against real sshd: accept-new never cries wolf, @revoked is honoured for
boxes and jump hosts in both policies, and the advice names the real host and port."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.sshd import KeyPair, Sshd, make_keypair

from tui.model.box import BoxState, Connection
from tui.remote.hostkeys import HostKeyStore
from tui.remote.watch import snapshot_fleet

Factory = Callable[..., Sshd]


def pinned_file(isolated_dirs: Path) -> Path:
    return isolated_dirs / "data" / "gpurent-tui" / "known_hosts"


def by_name(states: list[BoxState]) -> dict[str, BoxState]:
    return {s.name: s for s in states}


def public_key(server: Sshd) -> asyncssh.SSHKey:
    return asyncssh.import_public_key(server.host_key.public_line)


async def test_accept_new_does_not_cry_wolf_when_one_host_is_reached_twice_at_once(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path
) -> None:
    """One machine is a box and the jump host of two others; all first contacts happen at
    once. Each connection read the pins before another wrote them: none may read
    host_key_changed, and each host is pinned once."""
    shared = sshd_factory("shared")
    inner = sshd_factory("inner")
    root = runs_root_with(tmp_path, "yolox_completed")
    jump = f"root@127.0.0.1:{shared.port}"
    fleet = make_fleet(tmp_path, [
        box_entry(shared, client_key, "direct", runs_roots=[str(root)]),
        box_entry(shared, client_key, "direct-too", runs_roots=[str(root)]),
        box_entry(inner, client_key, "behind", runs_roots=[str(root)], jump=jump),
        box_entry(inner, client_key, "behind-too", runs_roots=[str(root)], jump=jump),
    ], host_keys="accept-new")
    states = by_name(await snapshot_fleet(fleet))
    for name, state in states.items():
        assert state.connection is Connection.OK, (name, state.error)
    lines = pinned_file(isolated_dirs).read_text().splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(
        [f"[127.0.0.1]:{shared.port}", f"[127.0.0.1]:{inner.port}"])


def test_a_key_pinned_meanwhile_is_accepted_and_a_different_one_refused(
        tmp_path: Path) -> None:
    store = HostKeyStore(tmp_path / "known_hosts", tmp_path / "pins", accept_new=True)
    key = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()
    other = asyncssh.generate_private_key("ssh-ed25519").convert_to_public()
    # Two connections that both found no entry: both offer the same key.
    assert store.decide("h", 2222, key) == "ok"
    assert store.decide("h", 2222, key) == "ok"
    assert store.decide("h", 2222, other) == "changed"
    assert len((tmp_path / "pins").read_text().splitlines()) == 1
    strict = HostKeyStore(tmp_path / "known_hosts", tmp_path / "none", accept_new=False)
    assert strict.decide("h", 2222, key) == "unknown"


@pytest.mark.parametrize("policy", ["strict", "accept-new"])
@pytest.mark.parametrize("where", ["box", "jump"])
@pytest.mark.parametrize("spelling", ["port", "star"])
async def test_a_revoked_key_is_refused_before_anything_is_pinned(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, isolated_dirs: Path,
        policy: str, where: str, spelling: str) -> None:
    jump, box = sshd_factory("jump"), sshd_factory("box")
    revoked = jump if where == "jump" else box
    pattern = f"[127.0.0.1]:{revoked.port}" if spelling == "port" else "*"
    key_type, key_b64 = revoked.host_key.public_line.split()[:2]
    known = [f"@revoked {pattern} {key_type} {key_b64}"]
    if policy == "strict":  # the key is also listed as trusted: revoked still wins
        known += [jump.known_hosts_line(), box.known_hosts_line()]
    fleet = make_fleet(tmp_path, [box_entry(box, client_key,
                                            jump=f"root@127.0.0.1:{jump.port}")],
                       known_hosts=known, host_keys=policy)
    (state,) = await snapshot_fleet(fleet)
    assert state.connection is Connection.HOST_KEY_REVOKED, state.error
    who = f"jump host root@127.0.0.1:{jump.port}" if where == "jump" else "box box"
    assert (state.error or "").startswith(f"HOST KEY REVOKED for {who}")
    assert f"{tmp_path / 'known_hosts'}:1" in (state.error or "")
    pins = pinned_file(isolated_dirs)
    pinned = pins.read_text() if pins.exists() else ""
    assert key_b64 not in pinned


async def test_unknown_key_advice_names_the_real_host_and_port(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    jump, box = sshd_factory("jump"), sshd_factory("box")
    known = tmp_path / "known_hosts"
    fleet = make_fleet(tmp_path, [box_entry(box, client_key, "direct"),
                                  box_entry(box, client_key, "behind",
                                            jump=f"root@127.0.0.1:{jump.port}")],
                       known_hosts=[jump.known_hosts_line()])
    states = by_name(await snapshot_fleet(fleet))
    direct, behind = states["direct"].error or "", states["behind"].error or ""
    assert f"`ssh-keyscan -p {box.port} 127.0.0.1 >> {known}`" in direct
    # Behind a jump host the key is fetched from there: the panel may not reach the box.
    assert (f"`ssh -p {jump.port} root@127.0.0.1 ssh-keyscan -p {box.port} 127.0.0.1 "
            f">> {known}`") in behind
    assert "PORT" not in direct + behind and "HOST" not in direct.replace("host", "")


async def test_changed_key_advice_under_strict_says_to_add_the_new_key(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    old = make_keypair(tmp_path / "old", "old_host_key")
    known = tmp_path / "known_hosts"
    for policy in ("strict", "accept-new"):
        fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                           known_hosts=[f"[127.0.0.1]:{server.port} {old.public_line}"],
                           host_keys=policy)
        (state,) = await snapshot_fleet(fleet)
        assert state.connection is Connection.HOST_KEY_CHANGED
        error = state.error or ""
        assert f"ssh-keygen -R '[127.0.0.1]:{server.port}' -f {known}" in error
        assert "someone may be intercepting" in error
        if policy == "strict":
            assert f"`ssh-keyscan -p {server.port} 127.0.0.1 >> {known}`" in error
            assert 'host_keys = "strict"' in error
        else:
            assert "ssh-keyscan" not in error and "accept-new pins the new key" in error


async def test_a_garbled_known_hosts_line_is_skipped_not_fatal(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=["garbage", "@bogus x y", server.known_hosts_line()])
    (state,) = await snapshot_fleet(fleet)
    assert state.connection is Connection.OK, state.error


def _hashed(name: str, key: str) -> str:
    import base64
    import hashlib
    import hmac
    import os

    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()} {key}"


def test_the_host_index_finds_what_a_scan_of_every_line_finds(tmp_path: Path) -> None:
    """A lookup reads the lines naming its host (an index of plain names, the hashed lines
    whose HMAC matches, every pattern line) instead of every line: at 1,000 boxes the scan
    was half the fleet's start. It must judge exactly as asyncssh's own reading of the
    whole file does, for every spelling ssh writes."""
    keys = [asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
            for _ in range(8)]
    lines = [
        f"[127.0.0.1]:2201 {keys[0]}",
        f"127.0.0.1 {keys[1]}",                              # bare: any port without its own
        f"Box.Example.ORG,[10.0.0.2]:2202 {keys[2]}",        # two names, odd case
        _hashed("[10.0.0.3]:2203", keys[3]),                 # HashKnownHosts yes
        _hashed("10.0.0.4", keys[4]),
        f"*.pods.example.net {keys[5]}",                     # a wildcard
        f"10.0.0.* !10.0.0.9 {keys[6]}".replace(" !", ",!"),  # a negated pattern
        f"@revoked [127.0.0.1]:2201 {keys[0]}",
        f"@cert-authority *.ca.example.com {keys[7]}",
        "garbage line that is no key",
        f"[127.0.0.1]:2201 {keys[7]}",
    ]
    known = tmp_path / "known_hosts"
    known.write_text("\n".join(lines) + "\n")
    store = HostKeyStore(known, tmp_path / "pinned", accept_new=False)
    whole = asyncssh.import_known_hosts("\n".join(ln for ln in lines if "garbage" not in ln))
    queries = [("127.0.0.1", 2201), ("127.0.0.1", 2299), ("127.0.0.1", 22),
               ("box.example.org", 22), ("BOX.example.org", 22), ("10.0.0.2", 2202),
               ("10.0.0.3", 2203), ("10.0.0.3", 22), ("10.0.0.4", 22), ("10.0.0.4", 2204),
               ("gpu-1.pods.example.net", 22), ("10.0.0.7", 22), ("10.0.0.9", 22),
               ("x.ca.example.com", 22), ("nowhere", 22)]
    for host, port in queries:
        trusted, cas, revoked = whole.match(host, "", port)[:3]
        want = ({k.export_public_key() for k in trusted if k not in revoked},
                {k.export_public_key() for k in cas},
                {k.export_public_key() for k in revoked})
        got = store.judge(host, port)
        assert tuple({k.export_public_key() for k in part} for part in got) == want, \
            (host, port)
