"""Cancelling a running action from the panel (`x`, or ctrl+p "Cancel push on BOX"), over
a real sshd box whose push program hangs: the user confirms, the box is free again, the
journal says `cancelled`, the program on the box ends, and a new action can start."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from support.fleets import box_entry, make_fleet, runs_root_with
from support.libreyolo_train import wait_for
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd
from textual.command import CommandList, CommandPalette

from tui.actions.flows import Report
from tui.app import GpurentApp
from tui.model.cancel import cancel_words
from tui.model.config import FleetConfig
from tui.screens.confirm import ConfirmScreen

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

# Put in the push program before it runs: listing the run's files never ends (a box
# stuck on a slow disk), while the program's own heartbeat keeps saying "still here".
HANGING_LIST = """
def list_files(params):
    with open(PIDFILE, "w") as f:
        f.write(str(os.getpid()))
    threading.Event().wait()
"""


def hanging_python(tmp_path: Path) -> Path:
    """A directory whose `python3` runs everything unchanged but the push program, whose
    listing hangs (and which writes its pid to `push.pid` there first)."""
    bindir = tmp_path / "hanging-bin"
    bindir.mkdir()
    patch = HANGING_LIST.replace("PIDFILE", repr(str(bindir / "push.pid")))
    wrapper = bindir / "python3"
    wrapper.write_text(f"""#!{sys.executable}
import os, subprocess, sys
real = {sys.executable!r}
if sys.argv[1:] != ["-"]:
    os.execv(real, [real, *sys.argv[1:]])
src = sys.stdin.buffer.read()
marker = b"\\nPARAMS = "
if marker in src and b"def list_files" in src:
    src = src.replace(marker, {patch.encode()!r} + marker, 1)
sys.exit(subprocess.run([real, "-"], input=src).returncode)
""")
    wrapper.chmod(0o755)
    return bindir


def fleet_with_hanging_push(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                            client_key: KeyPair) -> tuple[FleetConfig, Path]:
    bindir = hanging_python(tmp_path)
    server = sshd_factory(env={"PATH": f"{bindir}:{SYSTEM_PATH}"})
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "gpu-1", runs_roots=[str(root)],
        push={"local_dir": str(tmp_path / "pushed")})], known_hosts=[server.known_hosts_line()])
    return fleet, bindir / "push.pid"


def painted(app: GpurentApp) -> str:
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_x_cancels_a_hanging_push_journals_it_and_frees_the_box(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    fleet, pidfile = fleet_with_hanging_push(tmp_path, sshd_factory, client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("p")
        await until(pilot, lambda: pidfile.exists() and pidfile.read_text() != "")
        pid = int(pidfile.read_text())
        assert app.busy == {"gpu-1": "push"}
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        assert "verified stay verified" in app.screen.body  # what is still safe, before
        await pilot.press("y")
        await until(pilot, lambda: "gpu-1" not in app.busy)
        await until(pilot, lambda: "push cancelled by you" in box_text(app, "gpu-1"))
        assert "nothing verified by this push" in box_text(app, "gpu-1")
        entry = app.journal.entries[-1]
        assert (entry["box"], entry["action"], entry["outcome"]) == ("gpu-1", "push",
                                                                     "cancelled")
        assert "cancelled by you" in entry["message"]
        # The push program on the box ends once it finds the panel gone (its next beat).
        await asyncio.to_thread(wait_for, lambda: not _alive(pid), 30, 0.1)
        assert not (tmp_path / "pushed").exists() or not any(
            p.is_file() for p in (tmp_path / "pushed").rglob("*"))

        async def fine() -> Report:
            return Report(0, ["checked"])

        assert app.start_action("gpu-1", "check", fine)  # the box takes a new action
        await until(pilot, lambda: "check done" in box_text(app, "gpu-1"))


async def test_the_palette_offers_cancel_while_an_action_runs(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    fleet, pidfile = fleet_with_hanging_push(tmp_path, sshd_factory, client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"cancel push")
        await pilot.pause(0.5)
        offered = str(app.screen.query_one(CommandList).get_option_at_index(0).prompt) \
            if app.screen.query_one(CommandList).option_count else ""
        assert "Cancel push on gpu-1" not in offered  # nothing runs yet
        await pilot.press("escape")
        await pilot.press("p")
        await until(pilot, lambda: pidfile.exists() and pidfile.read_text() != "")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"cancel push on")
        palette = app.screen
        await until(pilot, lambda: palette.query_one(CommandList).option_count > 0 and
                    "Cancel push on gpu-1" in str(palette.query_one(CommandList)
                                                   .get_option_at_index(0).prompt))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: "gpu-1" not in app.busy)
        assert app.journal.entries[-1]["outcome"] == "cancelled"


async def test_x_with_nothing_running_says_so_and_journals_nothing(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    fleet, _ = fleet_with_hanging_push(tmp_path, sshd_factory, client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        before = len(app.journal.entries)
        await pilot.press("x")
        await until(pilot, lambda: any("nothing is running on gpu-1" in str(n.message)
                                       for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        assert len(app.journal.entries) == before
        await pilot.press("question_mark")  # help lists it with its key
        await until(pilot, lambda: "Cancel action" in painted(app))


def test_every_action_the_panel_runs_has_true_cancel_words() -> None:
    for what in ("push", "stop", "start", "destroy", "launch", "check",
                 "budget: push and stop", "milestone push (on_best)"):
        words = cancel_words(what)
        assert "half-done" not in words.after, what  # its own words, not the fallback
    assert cancel_words("check").ask is None  # nothing half-done: no confirmation
    assert "NOT stopped" in (cancel_words("budget: push and stop").ask or "")
    assert "may still" in (cancel_words("destroy").ask or "")


async def test_a_cancelled_stop_says_the_provider_may_still_carry_it_out(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """A manual box whose stop_command hangs: the confirmation and the box's line say the
    stop may still happen; the journal has the stop as cancelled, not failed."""
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "lab", runs_roots=[str(root)], stop_command="sleep 600",
        pricing={"running_usd_per_hr": 0.5})], known_hosts=[server.known_hosts_line()])
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "lab"))
        app.power("lab", "stop")
        await until(pilot, lambda: app.busy == {"lab": "stop"})
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        assert "may still carry it out" in app.screen.body
        await pilot.press("y")
        await until(pilot, lambda: "lab" not in app.busy)
        await until(pilot, lambda: "stop cancelled by you" in box_text(app, "lab"))
        assert "the provider may still stop the box" in box_text(app, "lab")
        entry = app.journal.entries[-1]
        assert (entry["action"], entry["outcome"]) == ("stop", "cancelled")
        assert not any(e.get("outcome") == "failed" for e in app.journal.entries)


async def test_a_cancelled_milestone_push_is_not_started_again_at_once(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """on_complete pushes the finished run unasked; cancelled, it waits its backoff (as a
    failed one does) instead of starting again at the box's next answer."""
    bindir = hanging_python(tmp_path)
    server = sshd_factory(env={"PATH": f"{bindir}:{SYSTEM_PATH}"})
    root = runs_root_with(tmp_path, "yolox_completed")
    (root / "yolox_completed" / "weights").mkdir()
    for name in ("best.pt", "last.pt"):  # a finished run's weights, never pushed
        (root / "yolox_completed" / "weights" / name).write_bytes(b"w" * 1000)
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "gpu-1", runs_roots=[str(root)],
        push={"local_dir": str(tmp_path / "pushed"), "on_complete": True})],
        known_hosts=[server.known_hosts_line()])
    pidfile = bindir / "push.pid"
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: pidfile.exists() and pidfile.read_text() != "")
        what = app.busy["gpu-1"]
        assert what.startswith("milestone push")
        app.cancel_action("gpu-1")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: "gpu-1" not in app.busy)
        # The box answers twice more (refresh_seconds = 1); each answer asks the milestone
        # planner what is due.
        for _ in range(2):
            seen = app.states["gpu-1"].last_ok_at
            await until(pilot, lambda seen=seen: app.states["gpu-1"].last_ok_at != seen)
        await pilot.pause(0.3)
        assert "gpu-1" not in app.busy
        entry = app.journal.entries[-1]
        assert (entry["action"], entry["outcome"], entry["cancelled"]) == (
            "push", "cancelled", what)
