"""`monitor` interrupted while LibreYOLO's monitor starts, over real sshd.

The box's `libreyolo` is a stand-in beside its python whose `monitor` never
gets to serving: the start is still waiting for its URL when the user gives
up (the panel's task cancelled, Ctrl+C or a hangup of the command). Whatever
was started on the box for that look must not be left running there with
nobody to stop it. tests/e2e/test_launch_training.py opens the real monitor.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.box_python import make_venv
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import wait_for
from support.sshd import KeyPair, Sshd

from tui.actions.monitor import MonitorError, close_monitor, open_monitor
from tui.model.config import FleetConfig
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

ROOT = Path(__file__).resolve().parents[2]
RUN = "slow run"

# `libreyolo monitor RUN --no-browser --json ...` that never prints its URL (slow to
# start), unless a `serve` file beside it says to print it after a few seconds of loading
# (with the port the file names, when it names one: a box that picks its own).
SLOW_MONITOR = """#!PYTHON
import json
import os
import sys
import time

assert sys.argv[1] == "monitor", sys.argv
print("stand-in monitor: loading", flush=True)
if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve")):
    time.sleep(3)  # the box's launcher beats meanwhile
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve")) as f:
        port = f.read().strip() or sys.argv[sys.argv.index("--port") + 1]
    print(json.dumps({"url": "http://127.0.0.1:" + port}), flush=True)
while True:
    time.sleep(1)
"""


@pytest.fixture
def slow_box(tmp_path: Path, sshd_factory: Callable[..., Sshd],
             client_key: KeyPair) -> tuple[FleetConfig, Path]:
    """A box whose python has the slow stand-in `libreyolo` beside it, and one run."""
    bin_dir = tmp_path / "box-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    stand_in = bin_dir / "libreyolo"
    stand_in.write_text(SLOW_MONITOR.replace("PYTHON", sys.executable, 1))
    stand_in.chmod(0o755)
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "tests" / "data" / "libreyolo" / "yolox_completed", runs / RUN)
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)],
                                            python=str(bin_dir / "python"))],
                       known_hosts=[server.known_hosts_line()])
    return fleet, runs / RUN


async def test_a_box_without_libreyolo_says_so_in_one_line_not_a_traceback(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    python = make_venv(tmp_path / "bare")
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "tests" / "data" / "libreyolo" / "yolox_completed", runs / RUN)
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)],
                                            python=str(python))],
                       known_hosts=[server.known_hosts_line()])
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        with pytest.raises(MonitorError) as info:
            await open_monitor(session, box, str(runs / RUN))
    finally:
        await session.close()
    assert info.value.message == (f"box box: LibreYOLO is not installed in {python} there: pip "
                                  "install libreyolo (or set `python` for this box to the "
                                  "interpreter that has it)")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _monitors_of(run_dir: Path) -> list[int]:
    """Live processes of the stand-in `libreyolo monitor` for this run."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"monitor" in argv and str(run_dir).encode() in argv and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


async def test_a_look_cancelled_while_the_monitor_starts_stops_it_on_the_box(
        slow_box: tuple[FleetConfig, Path]) -> None:
    fleet, run_dir = slow_box
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        said: list[str] = []
        task = asyncio.create_task(open_monitor(session, box, RUN, on_cancel=said.append))
        monitors = await asyncio.to_thread(wait_for, lambda: _monitors_of(run_dir), 60, 0.1)
        assert not task.done()  # still waiting for the monitor's URL
        task.cancel()  # the panel gave up on it (`w` again, or quit)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert said == ["monitor stopped"]  # by its pid, told before the URL came
        await asyncio.to_thread(wait_for, lambda: not any(_alive(p) for p in monitors), 30,
                                0.1)
    finally:
        await session.close()


async def test_a_monitor_that_comes_up_is_forwarded_and_closing_stops_it(
        slow_box: tuple[FleetConfig, Path]) -> None:
    fleet, run_dir = slow_box
    (Path(fleet.boxes[0].python or "").parent / "serve").write_text("")
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        handle = await open_monitor(session, box, RUN, local_port=0)
        assert handle.started and handle.forwarding and handle.run_id == RUN
        assert _monitors_of(run_dir) == [handle.pid]
        assert await close_monitor(session, handle) == "monitor stopped"
        assert handle.pid is not None and not _alive(handle.pid)
    finally:
        await session.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_local_port_is_ours_not_the_boxs(slow_box: tuple[FleetConfig, Path]) -> None:
    """The box says its monitor is on port P (11434, say: another local service's
    default); a free port P here is still not the panel's to take unasked."""
    fleet, _ = slow_box
    port = _free_port()  # free here, so only the choice decides which port is bound
    (Path(fleet.boxes[0].python or "").parent / "serve").write_text(str(port))
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        handle = await open_monitor(session, box, RUN)
        try:
            assert handle.remote_port == port and handle.forwarding
            assert handle.local_port != port and handle.url.endswith(f":{handle.local_port}/")
            with socket.socket() as s:  # the box's port number is still free here
                s.bind(("127.0.0.1", port))
        finally:
            assert await close_monitor(session, handle) == "monitor stopped"
    finally:
        await session.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_ctrl_c_or_a_hangup_while_the_monitor_starts_stops_it_on_the_box(
        slow_box: tuple[FleetConfig, Path], sig: signal.Signals) -> None:
    fleet, run_dir = slow_box
    proc = subprocess.Popen([sys.executable, "-m", "tui", "monitor", "box", RUN, "--config",
                             fleet.source], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        monitors = wait_for(lambda: _monitors_of(run_dir), timeout=60, interval=0.1)
        assert proc.poll() is None
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == ""  # no URL: it never served
    assert "interrupted while the monitor started" in err
    # Either the client had the monitor's pid and stopped it, or the signal came between the
    # monitor's start on the box and the answer naming it: then the box stops it (a loaded
    # machine makes that window wide). Both are told; the monitor dies either way, below.
    assert "monitor stopped" in err or "the box stops one it starts for nobody" in err, err
    wait_for(lambda: not any(_alive(p) for p in monitors), timeout=10, interval=0.1)
