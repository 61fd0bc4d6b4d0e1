"""`gpurent-tui demo` in a real terminal (tmux): it draws, its runs advance, and a quit key
(q, or ctrl+c) leaves nothing behind: no process, no temp dir.

The other demo tests drive the fleet and the app headless; only a real pty
shows that the terminal driver, the key bindings and the fleet's teardown
work together in the process a user actually starts.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZE = (100, 30)
RUNNING_ROW = re.compile(r"^(\S+)\s+▶ running\s+(\d+)/\d+", re.MULTILINE)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


class Tmux:
    """One detached session on a private tmux server, so no user session is touched."""

    def __init__(self, label: str, conf: Path) -> None:
        self.label = label
        self.session = label
        # Our own config, not the user's ~/.tmux.conf: a dead pane stays, to read its end.
        conf.write_text("set -g remain-on-exit on\n")
        self.base = ["tmux", "-u", "-f", str(conf), "-L", label]

    def __call__(self, *args: str, check: bool = True) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True,
                              text=True, timeout=10, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def pane_dead(self) -> bool:
        return self("display-message", "-p", "-t", self.session, "#{pane_dead}").strip() == "1"

    def kill(self) -> None:
        """Stop the server and everything in it; remove its socket (tmux leaves it)."""
        self("kill-server", check=False)
        base = Path(os.environ.get("TMUX_TMPDIR") or "/tmp")
        (base / f"tmux-{os.getuid()}" / self.label).unlink(missing_ok=True)


def wait_for(what: str, check: Callable[[], object], timeout: float) -> object:
    """Poll `check` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.25)


def running_epochs(screen: str) -> dict[str, int]:
    return {name: int(epoch) for name, epoch in RUNNING_ROW.findall(screen)}


def leftovers(marker: str, demo_tmp: Path) -> list[str]:
    """Processes of this test's demo still alive: the demo's temp dir in their command line
    or working dir, or this test's marker in their environment (the `tui demo` process and
    all it started carry it; someone else's `gpurent-tui demo` does not)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        if int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        ours = f"GPURENT_TTY_TEST={marker}".encode() in environ
        if ours or str(demo_tmp) in cmdline or cwd.startswith(str(demo_tmp)):
            found.append(f"{proc.name}: {cmdline.strip()} (cwd {cwd})")
    return found


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(f"gpurent-tty-{os.getpid()}-{uuid.uuid4().hex[:8]}", tmp_path / "tmux.conf")
    try:
        yield session
    finally:
        session.kill()


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_demo_draws_advances_and_quits_clean(tmux: Tmux, tmp_path: Path, quit_key: str) -> None:
    demo_tmp = tmp_path / "tmp"  # TMPDIR of the demo: its gpurent-demo-* dir goes here
    demo_tmp.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    exit_file = tmp_path / "exit-code"
    marker = uuid.uuid4().hex
    # Exactly this environment (env -i): the test's XDG dirs, a HOME and TMPDIR of its
    # own, and a marker that every process the demo starts inherits.
    env = {"TMPDIR": str(demo_tmp), "HOME": str(home), "LANG": "C.UTF-8",
           "TERM": "tmux-256color", "GPURENT_TTY_TEST": marker}
    env.update({var: os.environ[var] for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                                 "XDG_STATE_HOME", "PATH")})
    command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m",
               "tui", "demo"]
    wrapper = tmp_path / "run-demo.sh"
    wrapper.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\n{shlex.join(command)}\n"
                       f"echo $? > {shlex.quote(str(exit_file))}\n")
    wrapper.chmod(0o755)

    width, height = SIZE
    tmux("new-session", "-d", "-s", tmux.session, "-x", str(width), "-y", str(height),
         str(wrapper))

    def screen() -> str:
        """The pane now; a demo that died early fails here with what it last showed."""
        text = tmux.screen()
        if tmux.pane_dead():
            raise AssertionError(f"the demo exited early:\n{text}")
        return text

    def drawn() -> str | None:
        text = screen()
        return text if "3/3 boxes up" in text and running_epochs(text) else None

    first = wait_for("the panel to show 3/3 boxes up and a running run", drawn, 30)
    assert isinstance(first, str)
    assert [p.name for p in demo_tmp.glob("gpurent-demo-*")], "the demo ignored TMPDIR"
    assert any(" -m tui demo" in p for p in leftovers(marker, demo_tmp)), "the scan is blind"
    before = running_epochs(first)
    wait_for(f"a running run to pass its epoch (first {before})",
             lambda: any(epoch > before[name] for name, epoch
                         in running_epochs(screen()).items() if name in before), 20)

    tmux("send-keys", "-t", tmux.session, quit_key)
    wait_for("the demo to exit", tmux.pane_dead, 20)
    assert exit_file.read_text().strip() == "0", tmux.screen()
    assert leftovers(marker, demo_tmp) == []
    assert list(demo_tmp.iterdir()) == []
