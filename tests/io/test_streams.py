"""A box that streams without end cannot grow the client's memory, and a box's claimed
size cannot set how long a push may hold the box: real OpenSSH sshd boxes on 127.0.0.1
whose `python3` floods frames, lies about sizes, or beats while moving nothing.

Memory is the test process's own peak RSS (VmHWM, reset through /proc/self/clear_refs),
so what is measured is the client alone: the box is another process."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.actions import onbox_run
from tui.actions.launch import run_launcher
from tui.actions.onbox_run import run_onbox
from tui.actions.preflight import interpreter_command, params_bytes, program
from tui.actions.push import push_run
from tui.actions.stage import fetch_box
from tui.model.config import FleetConfig
from tui.model.staging import Expected
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

Factory = Callable[..., Sshd]
SYSTEM_PATH = "/usr/bin:/bin"
FLOOD_MIB = 200          # what the box streams: far more than the client may keep
GROWTH_LIMIT_MB = 150    # generous: the client keeps a bounded tail of it, not all
TOKEN = "hf_SeCrEtTokenForTheStreamTest0123456789"


@contextmanager
def peak_rss_growth() -> Iterator[list[float]]:
    """The growth of this process's peak RSS over the block, in MB (into the list)."""
    def kib(field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0

    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    before = kib("VmRSS")
    out: list[float] = []
    yield out
    out.append((kib("VmHWM") - before) / 1000)


def flooding_python(directory: Path, body: str) -> dict[str, str]:
    """An sshd box session env whose `python3 -` finds the nonce it was sent and then runs
    `body` (with `frame(payload)` and `out`), instead of our program."""
    directory.mkdir()
    exe = directory / "python3"
    exe.write_text(f"""#!{sys.executable}
import json, re, sys, time
src = sys.stdin.buffer.read()
m = re.search(rb"NONCE = '([0-9a-f]+)'", src)
nonce = m.group(1)
out = sys.stdout.buffer
def frame(payload):
    return b"\\n--gpurent-" + nonce + b" " + str(len(payload)).encode() + b"\\n" + payload
{body}
""")
    exe.chmod(0o755)
    return {"PATH": f"{directory}:{SYSTEM_PATH}"}


def flood(first: str, last: str) -> str:
    """Stream FLOOD_MIB of distinct JSON frames built by `first` (a format with {n} and
    {pad}), then the frame `last`."""
    return f"""
pad = "x" * (64 << 10)
for n in range({FLOOD_MIB} * 16):
    out.write(frame({first!r}.format(n=n, pad=pad).encode()))
out.write(frame({last!r}.encode()))
out.flush()
"""


def one_box(tmp_path: Path, server: Sshd, key: KeyPair, **extra: object) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, "gpu-1", **extra)],
                      known_hosts=[server.known_hosts_line()])


async def test_a_check_flooded_with_frames_keeps_a_bounded_few(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """`check` kept every frame the box sent, twice (bytes and parsed): 1.33 GB of client
    memory for 600 MiB of progress frames."""
    body = flood('{{"stage": "step {n}", "pad": "{pad}"}}',
                 '{"part": "python", "data": {"version": "3.11"}}')
    body += 'out.write(frame(b\'{"done": true}\')); out.flush()\n'
    server = sshd_factory(env=flooding_python(tmp_path / "bin", body))
    fleet = one_box(tmp_path, server, client_key)
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    stages: list[str] = []
    try:
        with peak_rss_growth() as growth:
            run = await run_onbox(session, interpreter_command("python3"), program("preflight"),
                                  params_bytes({"mode": "check"}), deadline=300, what="check",
                                  on_frame=lambda f: stages.append(str(f.get("stage"))[:12]))
    finally:
        await session.close()
    assert growth[0] < GROWTH_LIMIT_MB, f"the client grew by {growth[0]:.0f} MB"
    assert run.done, run.reason
    assert len(stages) == FLOOD_MIB * 16 + 2  # every frame was seen as it came
    assert len(run.frames) <= onbox_run.KEPT_FRAMES
    assert run.parts() == {"python": {"version": "3.11"}}
    assert run.stage == f"step {FLOOD_MIB * 16 - 1}"


async def test_a_launcher_flooded_with_frames_keeps_a_bounded_few(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """`launch`, guard install and monitor share the launcher: 693 MB for 300 MiB."""
    body = flood('{{"waiting": {n}, "pad": "{pad}"}}',
                 '{"started": {"pid": 4242, "log": "/tmp/x.log"}}')
    server = sshd_factory(env=flooding_python(tmp_path / "bin", body))
    fleet = one_box(tmp_path, server, client_key)
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    try:
        with peak_rss_growth() as growth:
            run = await run_launcher(session, {"mode": "detach"}, deadline=300)
    finally:
        await session.close()
    assert growth[0] < GROWTH_LIMIT_MB, f"the client grew by {growth[0]:.0f} MB"
    assert run.ended == "exited", run.reason
    assert run.first("started") == {"pid": 4242, "log": "/tmp/x.log"}
    assert run.first("waiting") == FLOOD_MIB * 16 - 1  # the latest of its kind is kept
    assert len(run.frames) <= onbox_run.KEPT_FRAMES


async def test_a_fetch_flooded_then_stalled_is_bounded_and_ends_after_the_stall(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A fetch's deadline is 4 h: a box could stream progress the whole time (memory) or
    repeat the same progress without moving a byte (the box read busy for 4 h)."""
    body = flood('{{"progress": {{"step": "download", "done": {n}, "total": 9, '
                 '"pad": "{pad}"}}}}', '{"stage": "download"}')
    body += """
stuck = frame(b'{"progress": {"step": "download", "done": 5, "total": 9}}')
while True:
    out.write(stuck); out.flush(); time.sleep(0.2)
"""
    server = sshd_factory(env=flooding_python(tmp_path / "bin", body))
    fleet = one_box(tmp_path, server, client_key)
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    expected = Expected("me/data", "data.tar", 9, "0" * 64)
    started = asyncio.get_running_loop().time()
    try:
        with peak_rss_growth() as growth:
            report = await asyncio.wait_for(
                fetch_box(session, fleet.boxes[0], expected, dest="~/data", token=None,
                          endpoint=None, deadline=600, stall_seconds=3.0), 200)
    finally:
        await session.close()
    assert growth[0] < GROWTH_LIMIT_MB, f"the client grew by {growth[0]:.0f} MB"
    took = asyncio.get_running_loop().time() - started
    assert not report.verified
    assert "no progress for 3 s" in report.message, report.message
    assert "gpu-1" in report.message
    assert took < 120


def patched_push(tmp_path: Path, patch: str) -> dict[str, str]:
    """A box whose `python3 -` runs our push program with `patch` (functions) put in just
    before it is called: a box that speaks the protocol and lies in it."""
    bindir = tmp_path / "hostile-bin"
    bindir.mkdir()
    (bindir / "patch.py").write_text(patch)
    wrapper = bindir / "python3"
    wrapper.write_text(f"""#!{sys.executable}
import subprocess, sys
real = {sys.executable!r}
src = sys.stdin.buffer.read()
marker = b"\\nPARAMS = "
patch = open({str(bindir / "patch.py")!r}, "rb").read()
src = src.replace(marker, b"\\n" + patch + marker, 1)
sys.exit(subprocess.run([real, "-"], input=src).returncode)
""")
    wrapper.chmod(0o755)
    return {"PATH": f"{bindir}:{SYSTEM_PATH}"}


def claimed_listing(size: str, *, hub: bool = False) -> str:
    """A listing of one weights/best.pt of `size` bytes (an expression on the box)."""
    return f"""
def list_files(params):
    emit({{"done": {{"files": [{{"name": "weights/best.pt", "size": {size}, "mtime": 1.0,
        "mtime_ns": 1000000000, "inode": 1, "sha256": "0" * 64, "steady": True}}],
        "hub": {hub!r}}}}})
"""


async def test_an_exec_pull_of_a_large_stream_keeps_the_client_bounded(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The pull over an exec channel (no SFTP) grew with the stream (312 MB for 300 MiB)."""
    size = FLOOD_MIB << 20
    patch = claimed_listing(str(size)) + """
def read_file(params):
    block = b"D" + b"z" * (CHUNK)
    left = params["size"] - params["offset"]
    while left > 0:
        n = min(CHUNK, left)
        send(block if n == CHUNK else b"D" + b"z" * n)
        left -= n
    emit({"done": {"sent": params["size"] - params["offset"]}})
"""
    server = sshd_factory(sftp=False, env=patched_push(tmp_path, patch))
    root = tmp_path / "ckpt"
    fleet = one_box(tmp_path, server, client_key, push={"local_dir": str(root)})
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    calls = [0]

    def slow_disk(name: str, done: int, total: int) -> None:
        """A destination slower than the box: the client must read no faster than this."""
        calls[0] += 1
        time.sleep(0.01)

    try:
        with peak_rss_growth() as growth:
            (result,) = await push_run(session, box, "/runs/r1", "r1", progress=slow_disk)
    finally:
        await session.close()
    assert growth[0] < GROWTH_LIMIT_MB, f"the client grew by {growth[0]:.0f} MB"
    assert not result.verified and "sha256 never matched" in result.message, result.message
    assert "exec channel" in result.how and calls[0] > 2 * FLOOD_MIB


async def test_a_pull_larger_than_the_free_space_is_refused_up_front(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The pull wrote until the disk was full, and only then failed."""
    root = tmp_path / "ckpt"
    free = shutil.disk_usage(tmp_path).free
    patch = claimed_listing(str(free + (1 << 30))) + """
def read_file(params):
    open(params["run_path"] + "/read-was-asked", "w").close()
    emit({"error": "not sending", "kind": "refused"})
"""
    run = tmp_path / "box-run"
    run.mkdir()
    server = sshd_factory(sftp=False, env=patched_push(tmp_path, patch))
    fleet = one_box(tmp_path, server, client_key, push={"local_dir": str(root)})
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        (result,) = await push_run(session, box, str(run), "r1")
    finally:
        await session.close()
    assert result.outcome == "failed" and not result.verified
    words = result.message
    assert "gpu-1" in words and "weights/best.pt" in words and "free" in words, words
    assert re.search(r"needs [0-9.]+ [KMGT]?i?B", words) and "nothing was" in words, words
    assert not (run / "read-was-asked").exists()
    assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()
                                     and p.name != ".gpurent-run"]


async def test_a_push_of_a_claimed_4_tib_file_that_moves_nothing_ends_after_the_stall(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A 4 TiB-1 best.pt made a 194-day deadline: the box beat and moved nothing, read
    busy, and destroy answered "push still running"."""
    patch = claimed_listing("(1 << 42) - 1", hub=True) + """
def hub_push(params):
    emit({"sending": "weights/best.pt"})
    threading.Event().wait()  # the beats go on, nothing moves
"""
    os.environ.pop("HF_TOKEN", None)
    server = sshd_factory(env=patched_push(tmp_path, patch))
    fleet = one_box(tmp_path, server, client_key, push={"hf_repo": "me/yolo-runs"})
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    started = asyncio.get_running_loop().time()
    try:
        (result,) = await asyncio.wait_for(
            push_run(session, box, "/runs/r1", "r1", token=TOKEN, stall_seconds=4.0), 120)
    finally:
        await session.close()
    took = asyncio.get_running_loop().time() - started
    assert result.outcome == "failed" and not result.verified
    assert "no progress for 4 s" in result.message, result.message
    assert "untouched" in result.message and TOKEN not in result.message
    assert took < 60


async def test_a_slow_push_that_keeps_moving_bytes_is_not_taken_for_a_stall(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """An upload of one big file says nothing between "sending" and "sent": only its
    heartbeat's count of bytes moved tells it from a hung one."""
    patch = claimed_listing("1 << 30", hub=True) + """
import time
def hub_push(params):
    emit({"sending": "weights/best.pt"})
    end = time.time() + 12
    while time.time() < end:  # reading slowly, as an upload on a thin line sends
        with open("/proc/self/status", "rb") as f:
            f.read()
        threading.Event().wait(0.3)
    emit({"error": "the upload ended on its own", "kind": "hub", "stage": "upload"})
"""
    server = sshd_factory(env=patched_push(tmp_path, patch))
    fleet = one_box(tmp_path, server, client_key, push={"hf_repo": "me/yolo-runs"})
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        (result,) = await asyncio.wait_for(
            push_run(session, box, "/runs/r1", "r1", token=TOKEN, stall_seconds=5.0), 120)
    finally:
        await session.close()
    assert "no progress" not in result.message, result.message
    assert "the upload ended on its own" in result.message, result.message


async def test_a_box_flooding_stderr_keeps_the_client_bounded(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """stderr shares the channel's window: its tail is read as fast as stdout is."""
    body = f"""
chunk = b"e" * (1 << 20)
for _ in range({FLOOD_MIB}):
    sys.stderr.buffer.write(chunk)
sys.stderr.buffer.flush()
out.write(frame(b'{{"done": true}}')); out.flush()
"""
    server = sshd_factory(env=flooding_python(tmp_path / "bin", body))
    fleet = one_box(tmp_path, server, client_key)
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    try:
        with peak_rss_growth() as growth:
            run = await run_onbox(session, interpreter_command("python3"), program("preflight"),
                                  params_bytes({"mode": "check"}), deadline=300, what="check")
    finally:
        await session.close()
    assert growth[0] < GROWTH_LIMIT_MB, f"the client grew by {growth[0]:.0f} MB"
    assert run.done, run.reason
    assert run.stderr_tail.endswith("eee")


def test_a_claimed_size_cannot_raise_a_push_deadline_past_the_cap() -> None:
    """The deadline was 600 s + size / 256 KiB/s: 194 days for a claimed 4 TiB-1 file."""
    from tui.actions import push as push_module

    assert push_module.deadline((1 << 42) - 1) == push_module.MAX_DEADLINE_SECONDS <= 12 * 3600
    assert push_module.deadline(1 << 30) < push_module.MAX_DEADLINE_SECONDS  # 1 GB: ~75 min
