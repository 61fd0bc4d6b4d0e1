"""An on-box program whose client is gone ends, over real sshd: a fetch given up while the
box downloads (the panel's fetch screen left, its worker cancelled; Ctrl+C of the
command) must not download on for hours for nobody. (A cancelled push: tests/ui/
test_cancel.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet
from support.libreyolo_train import wait_for
from support.sshd import KeyPair, Sshd

from tui.actions.stage import fetch_box
from tui.model.staging import Expected
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

# Put before every program the box's python runs: the Hub download never ends (a slow
# Hub), while it shows bytes arriving as huggingface_hub's own `.incomplete` file does.
HANGING_DOWNLOAD = """
import os, threading
import huggingface_hub

def _slow_download(repo_id, filename, **kwargs):
    from huggingface_hub import constants
    blobs = os.path.join(constants.HF_HUB_CACHE, "datasets--" + repo_id.replace("/", "--"),
                         "blobs")
    os.makedirs(blobs, exist_ok=True)
    with open(os.path.join(blobs, "part.incomplete"), "wb") as f:
        f.write(b"x" * 100)
    with open(PIDFILE, "w") as f:
        f.write(str(os.getpid()))
    threading.Event().wait()

huggingface_hub.hf_hub_download = _slow_download
"""


def slow_hub_python(tmp_path: Path) -> Path:
    bindir = tmp_path / "slow-hub-bin"
    bindir.mkdir()
    patch = HANGING_DOWNLOAD.replace("PIDFILE", repr(str(bindir / "fetch.pid")))
    wrapper = bindir / "python"
    wrapper.write_text(f"""#!{sys.executable}
import os, subprocess, sys
real = {sys.executable!r}
if sys.argv[1:] != ["-"]:
    os.execv(real, [real, *sys.argv[1:]])
src = {patch.encode()!r} + sys.stdin.buffer.read()
sys.exit(subprocess.run([real, "-"], input=src).returncode)
""")
    wrapper.chmod(0o755)
    return wrapper


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_fetch_given_up_ends_on_the_box(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    python = slow_hub_python(tmp_path)
    server = sshd_factory(env={"HF_HOME": str(tmp_path / "hf")})
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu-1", python=str(python))],
                       known_hosts=[server.known_hosts_line()])
    box = fleet.boxes[0]
    pidfile = python.parent / "fetch.pid"
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        progress: list[tuple[str, int, int]] = []
        task = asyncio.create_task(fetch_box(
            session, box, Expected("me/shapes", "shapes.tar", 10_000, "0" * 64, "ab" * 20),
            dest=str(tmp_path / "data"), token=None, endpoint="http://127.0.0.1:9",
            progress=lambda *a: progress.append(a)))
        pid = await asyncio.to_thread(wait_for, lambda: pidfile.exists() and
                                      pidfile.read_text() and int(pidfile.read_text()), 60, 0.1)
        await asyncio.to_thread(wait_for, lambda: progress, 30, 0.1)  # it reports bytes
        task.cancel()  # the user gave up on it
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(wait_for, lambda: not _alive(pid), 30, 0.1)
    finally:
        await session.close()
