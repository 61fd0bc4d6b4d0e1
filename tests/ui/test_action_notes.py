"""An action's result on a box's line is news until the box's power state changes: a
"✔ stop done" must not stay on a box that was started again and answers (the journal
keeps it as history)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd

from tui.app import GpurentApp
from tui.screens.confirm import ConfirmScreen


async def test_a_stop_result_goes_when_the_box_answers_again(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    config = make_fleet(tmp_path, [box_entry(server, client_key, "alpha", runs_roots=[str(root)],
                                             stop_command="true", observe_command="true")],
                        known_hosts=[server.known_hosts_line()], refresh_seconds=30,
                        timeout_seconds=3)
    app = GpurentApp(config)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.states["alpha"].connection == "ok")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: "stop done" in box_text(app, "alpha"))
        server.stop()  # the box goes down, as a stop takes it
        await pilot.press("r")
        await until(pilot, lambda: app.states["alpha"].connection != "ok")
        assert "stop done" in box_text(app, "alpha")  # still the news while it is down
        server.restart()  # started again (by hand, elsewhere): it answers
        await pilot.press("r")
        await until(pilot, lambda: app.states["alpha"].connection == "ok")
        await until(pilot, lambda: "stop done" not in box_text(app, "alpha"), timeout=10)
    assert any(e["action"] == "stop" and e["outcome"] == "done"
               for e in app.runtime.journal.entries)  # history, in the journal
