"""`gpurent-tui demo` in a real terminal (tmux): it draws, its runs advance, and a quit key
(q, or ctrl+c) leaves nothing behind: no process, no temp dir.

The other demo tests drive the fleet and the app headless; only a real pty
shows that the terminal driver, the key bindings and the fleet's teardown
work together in the process a user actually starts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZE = (100, 30)
BOX = "vast-4090x2"  # the demo box pushed, stopped, started and destroyed
RUN = "baseline-yolox-n"
RUNNING_ROW = re.compile(r"^(\S+)\s+▶ running\s+(\d+)/\d+", re.MULTILINE)



def need_tmux() -> None:
    """Skip without tmux, except where it is required (scripts/test-all, CI: the proof that
    the demo's keys work in a real terminal must not vanish as a skip)."""
    if shutil.which("tmux") is not None:
        return
    if os.environ.get("GPURENT_REQUIRE_TMUX") == "1":
        pytest.fail("tmux is not installed, and GPURENT_REQUIRE_TMUX=1 requires this test "
                    "(install Debian's tmux, as scripts/test-all does)", pytrace=False)
    pytest.skip("needs tmux")


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


def wait_for(what: str, check: Callable[[], object], timeout: float,
             shown: Callable[[], str] | None = None) -> object:
    """Poll `check` until it returns something truthy; fail saying what never happened
    (and what `shown` shows then: the pane)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            screen = f"; the screen:\n{shown()}" if shown is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{screen}")
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
    need_tmux()
    session = Tmux(f"gpurent-tty-{os.getpid()}-{uuid.uuid4().hex[:8]}", tmp_path / "tmux.conf")
    try:
        yield session
    finally:
        session.kill()


@dataclass
class Demo:
    """`gpurent-tui demo` started in a tmux pane, exactly as a user starts it."""

    tmux: Tmux
    demo_tmp: Path  # the demo's TMPDIR: its gpurent-demo-* dir goes here
    exit_file: Path
    marker: str

    def screen(self) -> str:
        """The pane now; a demo that died early fails here with what it last showed."""
        text = self.tmux.screen()
        if self.tmux.pane_dead():
            raise AssertionError(f"the demo exited early:\n{text}")
        return text

    def root(self) -> Path:
        (root,) = self.demo_tmp.glob("gpurent-demo-*")
        return root

    def journal(self) -> list[dict[str, Any]]:
        path = self.root() / "xdg" / "state" / "gpurent-tui" / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_demo(tmux: Tmux, tmp_path: Path, size: tuple[int, int]) -> Demo:
    demo_tmp = tmp_path / "tmp"
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
    width, height = size
    tmux("new-session", "-d", "-s", tmux.session, "-x", str(width), "-y", str(height),
         str(wrapper))
    return Demo(tmux, demo_tmp, exit_file, marker)


def wait_drawn(demo: Demo) -> str:
    def drawn() -> str | None:
        text = demo.screen()
        return text if "3/3 boxes up" in text and running_epochs(text) else None

    first = wait_for("the panel to show 3/3 boxes up and a running run", drawn, 30)
    assert isinstance(first, str)
    return first


def quit_clean(demo: Demo, quit_key: str = "q") -> None:
    demo.tmux("send-keys", "-t", demo.tmux.session, quit_key)
    wait_for("the demo to exit", demo.tmux.pane_dead, 20)
    assert demo.exit_file.read_text().strip() == "0", demo.tmux.screen()
    assert leftovers(demo.marker, demo.demo_tmp) == []
    assert list(demo.demo_tmp.iterdir()) == []


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_demo_draws_advances_and_quits_clean(tmux: Tmux, tmp_path: Path, quit_key: str) -> None:
    demo = start_demo(tmux, tmp_path, SIZE)
    first = wait_drawn(demo)
    assert [p.name for p in demo.demo_tmp.glob("gpurent-demo-*")], "the demo ignored TMPDIR"
    assert any(" -m tui demo" in p for p in leftovers(demo.marker, demo.demo_tmp)), \
        "the scan is blind"
    before = running_epochs(first)
    wait_for(f"a running run to pass its epoch (first {before})",
             lambda: any(epoch > before[name] for name, epoch
                         in running_epochs(demo.screen()).items() if name in before), 20)
    quit_clean(demo, quit_key)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_push_stop_start_destroy_each_end_in_a_true_outcome(tmux: Tmux, tmp_path: Path) -> None:
    """The README's keys on the demo, as a newcomer presses them: p pushes a run (verified
    at the local folder and the loopback Hub), s stops its box (it goes down), S starts it
    (it comes back), D refuses over the unpushed runs and p pushes them, verifies, destroys."""
    demo = start_demo(tmux, tmp_path, (120, 40))
    wait_drawn(demo)
    send = functools.partial(demo.tmux, "send-keys", "-t", tmux.session)
    wait = functools.partial(wait_for, shown=demo.tmux.screen)

    def ended(action: str, count: int = 1) -> list[dict[str, Any]]:
        entries = [e for e in demo.journal() if e.get("box") == BOX and e["action"] == action]
        return entries if len(entries) >= count else []

    def wait_ended(action: str, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        found = wait(f"{count} {action} of {BOX} in the journal", lambda: ended(
            action, count), timeout)
        assert isinstance(found, list)
        return found

    # One step at a time: keys in the same burst as "/" can reach the panel before the
    # filter field has focus (an Enter then opens the focused run instead).
    send("/")
    wait("the filter field", lambda: "filter runs by name" in demo.screen(), 10)
    send("-l", RUN)
    wait(f"{RUN} typed into the filter", lambda: RUN in demo.screen().split("3/3 boxes")[0],
         10)
    send("Enter")
    wait(f"only {RUN} on screen", lambda: RUN in demo.screen()
         and "hidden by the filter" in demo.screen(), 10)
    time.sleep(1.0)  # the field gives the focus back to the run's row

    send("p")  # push: verified at both destinations, the same bytes as on the box
    # The first push to the Hub from this box sends it the (demo's) token: asked first.
    wait("the token question", lambda: f"Send your Hub token to {BOX}?" in demo.screen(), 10)
    send("y")
    pushes = wait_ended("push", 2)
    assert [(p["outcome"], p["verified"]) for p in pushes] == [("done", True)] * 2, pushes
    run_dir = demo.root() / BOX / "root" / "runs" / RUN
    local = demo.root() / "pushed" / BOX / RUN
    for name in ("weights/best.pt", "weights/last.pt", "status.json"):
        assert sha256(local / name) == sha256(run_dir / name)
    assert {p["destination"] for p in pushes} == {f"hf://demo/rects-checkpoints/{RUN}/",
                                                  f"{local}/"}

    send("s")
    wait("the stop confirmation", lambda: f"Stop {BOX}?" in demo.screen(), 10)
    send("y")
    (stop,) = wait_ended("stop")
    assert stop["outcome"] == "done" and "it reads stopped" in stop["message"], stop
    wait(f"{BOX} at rest on screen",  # our confirmed stop: at rest, not "unreachable"
         lambda: "stopped (by you" in demo.screen() and "unreachable" not in demo.screen(),
         30)
    time.sleep(1.0)  # its section redrawn, the focus back on the run's row

    send("S")
    wait("the start confirmation", lambda: f"Start {BOX}?" in demo.screen(), 10)
    send("y")
    (start,) = wait_ended("start")
    assert start["outcome"] == "done" and "it reads running" in start["message"], start
    wait(f"{BOX} up again on screen", lambda: "3/3 boxes up" in demo.screen(), 30)
    time.sleep(1.0)

    send("D")  # its other runs were never pushed: refused, and p offered
    wait("the destroy dialog", lambda: "REFUSED" in demo.screen(), 20)
    send("p")
    (destroy,) = wait_ended("destroy", timeout=90)
    assert destroy["outcome"] == "done", destroy
    assert "the provider no longer has it" in destroy["message"]
    pushed = {(p["run"], p["outcome"], p["verified"]) for p in ended("push", 2)}
    assert {(r, "done", True) for r in ("rects-yolox-n", "rects-yolo9-t")} <= pushed
    quit_clean(demo)


def test_a_start_refused_after_our_stop_still_reads_our_stop(tmux: Tmux,
                                                            tmp_path: Path) -> None:
    """s then S on runpod-a100, as the README tells: the marketplace rents its GPU out
    for 90 s after it stops, so RunPod answers the start 409. The screen keeps our stop and
    says the start failed; never "stopped by the provider" (a false preemption)."""
    demo = start_demo(tmux, tmp_path, (120, 40))
    wait_drawn(demo)
    send = functools.partial(demo.tmux, "send-keys", "-t", tmux.session)
    wait = functools.partial(wait_for, shown=demo.tmux.screen)
    box, run = "runpod-a100", "sweep-yolox-n-lr01"  # a run that stays (hung, not replayed)

    def ended(action: str) -> list[dict[str, Any]]:
        return [e for e in demo.journal() if e.get("box") == box and e["action"] == action]

    send("/")
    wait("the filter field", lambda: "filter runs by name" in demo.screen(), 10)
    send("-l", run)
    wait(f"{run} typed into the filter", lambda: run in demo.screen().split("3/3 boxes")[0],
         10)
    send("Enter")
    wait(f"only {run} on screen", lambda: "hidden by the filter" in demo.screen(), 10)
    time.sleep(1.0)  # the field gives the focus back to the run's row

    send("s")
    wait("the stop confirmation", lambda: f"Stop {box}?" in demo.screen(), 10)
    send("y")
    wait(f"{box} stopped, by us, on screen", lambda: ended("stop")
         and "stopped (by you" in demo.screen(), 30)
    time.sleep(1.0)  # its section redrawn, the focus back on the run's row

    send("S")
    wait("the start confirmation", lambda: f"Start {box}?" in demo.screen(), 10)
    send("y")
    start = wait("the start's end in the journal", lambda: ended("start"), 30)
    assert isinstance(start, list)
    assert start[0]["outcome"] == "failed" and "409" in start[0]["message"], start
    assert "not enough free GPUs" in start[0]["message"], start
    wait("the refusal on screen", lambda: "start failed" in demo.screen(), 10)
    deadline = time.monotonic() + 8.0  # the panel judges again each second; money in 5 s
    while time.monotonic() < deadline:
        screen = demo.screen()
        assert "by the provider" not in screen and "preempted" not in screen, screen
        time.sleep(0.25)
    screen = demo.screen()
    section = screen.split(f"■ {box} ", 1)[-1].split("\n■ ", 1)[0]  # its lines only
    assert re.search(r"stopped \(by you, \d\d:\d\d\)", section), screen
    assert "unreachable" not in section and "1 stopped" in screen, screen
    quit_clean(demo)


@pytest.mark.parametrize("required", ["1", ""])
def test_a_missing_tmux_fails_where_it_is_required(tmp_path: Path, required: str) -> None:
    """scripts/test-all (CI) sets GPURENT_REQUIRE_TMUX=1: the proof that the demo's keys
    work in a real terminal cannot vanish as a skip there; elsewhere a missing tmux skips."""
    empty = tmp_path / "bin"  # a PATH where no tmux is found
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "GPURENT_REQUIRE_TMUX": required}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
         "draws_advances and q]", __file__], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120)
    if required:
        assert done.returncode == 1 and "1 error" in done.stdout, done.stdout
        assert "GPURENT_REQUIRE_TMUX" in done.stdout
    else:
        assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout


def test_a_key_typed_right_after_escape_is_kept(tmux: Tmux, tmp_path: Path) -> None:
    """Escape and J sent together: the terminal reads them as Alt+J; the panel takes it as
    the two keys typed (the costs close, the journal opens), as the README promises."""
    demo = start_demo(tmux, tmp_path, SIZE)
    wait_drawn(demo)
    send = functools.partial(demo.tmux, "send-keys", "-t", tmux.session)
    send("c")
    wait_for("the cost screen", lambda: "break-even" in demo.screen(), 20)
    send("Escape", "J")  # one write to the pty: ESC J
    wait_for("the journal", lambda: "no actions yet" in demo.screen(), 20)
    send("Escape")  # the journal closes onto the fleet, not onto the costs
    wait_for("the fleet", lambda: "3/3 boxes up" in demo.screen()
             and "break-even" not in demo.screen(), 20)
    quit_clean(demo)
