"""The connection paths of boxes people rent, against real OpenSSH sshd on 127.0.0.1:
shells that print banners, no SFTP, PTY-only endpoints, hostile answers, and the
programs run through BoxSession's public API."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.pty_only_box import PtyOnlyBox
from support.sshd import KeyPair, Sshd

from tui.model.box import BoxState, Connection
from tui.model.runs import Health
from tui.remote.channel import PTY_ONLY_FIX
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxError, BoxSession
from tui.remote.watch import BoxWatcher, snapshot_fleet

Factory = Callable[..., Sshd]

# What a stock Vast image prints around every SSH command, plus a line shaped like a
# frame that is not ours (another nonce): none of it may be taken for the answer.
BANNER_COMMAND = (
    "ForceCommand echo 'Welcome to your vast.ai container! This session is tmux-managed.'; "
    "echo '--gpurent-0123456789abcdef 5'; echo 'hello'; "
    "echo 'have fun (stderr)' >&2; exec sh -c \"$SSH_ORIGINAL_COMMAND\"")


def by_name(states: list[BoxState]) -> dict[str, BoxState]:
    return {s.name: s for s in states}


async def test_a_box_whose_shell_prints_banners_and_has_no_sftp_refreshes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory("vast", sftp=False, extra_config=BANNER_COMMAND)
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    kept = BoxWatcher(fleet.boxes[0], fleet)
    once = BoxWatcher(fleet.boxes[0], fleet)
    once.session.keep_probe = False
    try:
        for _ in range(2):
            for watcher in (kept, once):
                state = await watcher.refresh()
                assert state.connection is Connection.OK, state.error
                assert {r.name: r.health for r in state.runs} == {
                    "yolox_completed": Health.COMPLETED, "yolox_failed": Health.FAILED}
        assert kept.session.probe_mode == "kept" and kept.session.probe_starts == 1
        assert once.session.probe_mode == "one-shot"
        assert "Subsystem sftp" not in server.config_text()
    finally:
        await kept.close()
        await once.close()


def hostile_python(directory: Path, mode: str) -> dict[str, str]:
    """A `python3` for an sshd box that answers the probe's nonce with a hostile frame."""
    directory.mkdir()
    exe = directory / "python3"
    exe.write_text(f"""#!/usr/bin/python3
import re, sys, zlib
nonce = None
for line in sys.stdin.buffer:
    m = re.search(rb"NONCE = '([0-9a-f]+)'|\\"nonce\\":\\"([0-9a-f]+)\\"", line)
    if m:
        nonce = m.group(1) or m.group(2)
        break
if {mode!r} == "bomb":  # 200 MiB of JSON-ish spaces in ~200 KB of zlib
    payload = zlib.compress(b" " * (200 << 20), 9)
    header = b"%d" % len(payload)
elif {mode!r} == "objects":  # 20 MiB of empty objects: ~500 MiB once parsed
    payload = zlib.compress(b'{{"runs":[' + b"{{}}," * (7 << 20) + b'{{}}]}}', 9)
    header = b"%d" % len(payload)
elif {mode!r} == "many":  # 6 MiB, well-formed, but 2 million arrays to build
    payload = zlib.compress(b'{{"v":1,"pad":[' + b"[]," * (2 << 20) + b'[]]}}', 9)
    header = b"%d" % len(payload)
else:  # claims a gigabyte
    payload, header = b"x" * 100, b"1000000000"
if nonce is None:
    sys.stdout.buffer.write(payload)
else:
    sys.stdout.buffer.write(b"\\n--gpurent-" + nonce + b" " + header + b"\\n" + payload)
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
""")
    exe.chmod(0o755)
    return {"PATH": f"{directory}:/usr/bin:/bin"}


@pytest.mark.parametrize("mode", ["bomb", "huge", "objects", "many"])
async def test_a_hostile_answer_is_capped_and_costs_only_its_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, mode: str) -> None:
    """`objects` and `many` passed the old 64 MiB cap: a few KB of zlib became hundreds
    of MiB of Python objects and seconds of a frozen panel, every box's refresh with it."""
    good = sshd_factory("good")
    evil = sshd_factory("evil", env=hostile_python(tmp_path / "bin", mode))
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [
        box_entry(good, client_key, "good", runs_roots=[str(root)]),
        box_entry(evil, client_key, "evil", runs_roots=[str(root)]),
    ], known_hosts=[good.known_hosts_line(), evil.known_hosts_line()])
    for _ in range(2):  # the good box keeps refreshing beside it, round after round
        states = by_name(await snapshot_fleet(fleet))
        assert states["good"].connection is Connection.OK, states["good"].error
        assert [r.name for r in states["good"].runs] == ["yolox_completed"]
        assert states["evil"].connection is Connection.PROBE_FAILED
        assert "over the cap" in (states["evil"].error or ""), states["evil"].error


async def test_an_endpoint_that_refuses_commands_reads_pty_only_with_the_fix(
        tmp_path: Path, client_key: KeyPair) -> None:
    proxy = PtyOnlyBox(client_key.public_line)
    await proxy.start()
    try:
        fleet = make_fleet(tmp_path, [{**box_entry_for(proxy.port, client_key), "name": "pod"}],
                           known_hosts=[proxy.known_hosts_line()])
        (state,) = await snapshot_fleet(fleet)
    finally:
        await proxy.close()
    assert state.connection is Connection.PTY_ONLY, state.error
    assert PTY_ONLY_FIX in (state.error or "")
    assert proxy.refused  # it was asked to run a command and said no


async def test_an_endpoint_that_closes_without_output_reads_pty_only(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory("silent", extra_config="ForceCommand true")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    (state,) = await snapshot_fleet(fleet)
    assert state.connection is Connection.PTY_ONLY, state.error
    assert "use the pod's public IP and TCP port (SSH over exposed TCP)" in (state.error or "")


# What RunPod's basic proxy says to a client that asked for no terminal; some endpoints
# print it on stdout, others on stderr, and then end the session with a failure.
PTY_COMPLAINT = "Error: Your SSH client doesn't support PTY"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_an_endpoint_that_asks_for_a_terminal_reads_pty_only_on_either_stream(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, stream: str) -> None:
    redirect = " >&2" if stream == "stderr" else ""
    server = sshd_factory(f"pty-{stream}",
                          extra_config=f'ForceCommand echo "{PTY_COMPLAINT}"{redirect}; exit 1')
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    (state,) = await snapshot_fleet(fleet)
    assert state.connection is Connection.PTY_ONLY, state.error
    assert "asking for a terminal" in (state.error or "")
    assert PTY_ONLY_FIX in (state.error or "")


def box_entry_for(port: int, key: KeyPair) -> dict[str, object]:
    return {"name": "box", "host": "127.0.0.1", "port": port, "user": "root",
            "identity_file": str(key.private_path)}


# --- BoxSession.run_program: the public way to run an on-box program -------------------

ECHO_PROGRAM = """
import sys
def frame(payload):
    sys.stdout.buffer.write(b"\\n--gpurent-" + NONCE.encode() + b" "
                            + str(len(payload)).encode() + b"\\n" + payload)
    sys.stdout.buffer.flush()
data = sys.stdin.buffer.read()
print("chatter that is not an answer")
frame(data.upper())
frame(b"second")
sys.stderr.write("bye\\n")
sys.exit(4)
"""


TWO_IN_ONE_WRITE = """
import sys
def frame(payload):
    return b"\\n--gpurent-" + NONCE.encode() + b" " + str(len(payload)).encode() + b"\\n" + payload
sys.stdout.buffer.write(frame(b"a") + frame(b"bb"))
"""


async def test_run_program_returns_the_frames_of_an_on_box_program(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory("vast", extra_config=BANNER_COMMAND)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    seen: list[bytes] = []
    try:
        result = await session.run_program(ECHO_PROGRAM, b"secret \x00 input",
                                           max_frames=None, on_frame=seen.append)
        assert result.frames == seen == [b"SECRET \x00 INPUT", b"second"]
        assert result.exit_status == 4 and result.stderr.endswith("bye")
        one = await session.run_program(ECHO_PROGRAM, b"x")
        assert one.frames == [b"X"]
        both = await session.run_program(TWO_IN_ONE_WRITE, max_frames=None)
        assert both.frames == [b"a", b"bb"] and both.exit_status == 0
        with pytest.raises(BoxError) as silent:
            await session.run_program("import sys\nsys.exit(2)\n")
        assert silent.value.connection is Connection.PROBE_FAILED
        assert "exited 2 without a readable answer" in silent.value.message
        with pytest.raises(BoxError) as slow:
            await session.run_program("import time\ntime.sleep(30)\n", timeout=1)
        assert slow.value.connection is Connection.TIMEOUT
        with pytest.raises(BoxError) as big:
            await session.run_program(ECHO_PROGRAM, b"y" * 5000, max_frame=1000)
        assert "over the cap" in big.value.message
        assert session.connects == 1  # one login served every program
        state = await BoxWatcher(fleet.boxes[0], fleet).refresh()
        assert state.connection is Connection.OK
    finally:
        await session.close()


async def test_run_program_on_a_box_without_python3(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": "/nonexistent"})
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    try:
        with pytest.raises(BoxError) as missing:
            await session.run_program("print(1)\n")
    finally:
        await session.close()
    assert missing.value.connection is Connection.PROBE_FAILED
    assert "python3 not found" in missing.value.message
