"""`P` on a run's detail opens the profile screen for its box, which refuses while a run
trains there and says so; `--force` goes on to the box (here one without LibreYOLO, which
says that in one line). Both are journaled; the palette offers it per box. A profile that
measures shows the verdict and the priced table (the H200's recorded profile); beside a
run training on GPU 0, the panel's own snapshot refuses GPU 0 and profiles GPU 1."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from support.box_python import make_venv
from support.disk_runs import running_root
from support.fleets import box_entry, make_fleet, runs_root_with
from support.libreyolo_train import wait_for
from support.pilot import box_text, until
from support.profile_box import hostile_libreyolo, nothing_left, profiling
from support.sshd import KeyPair, Sshd
from support.training_runs import config_text, training_run
from textual.widgets import Input, Static

from tui.app import GpurentApp
from tui.screens.fleet import FleetScreen
from tui.screens.profile import ProfileScreen
from tui.screens.run_detail import RunDetail
from tui.store.journal import Journal


async def test_P_on_a_run_profiles_its_box_refused_while_it_trains(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    root = running_root(tmp_path, 1000)
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu-1",
                                            runs_roots=[str(root)],
                                            python=str(make_venv(tmp_path / "bare")))],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_running" in box_text(app, "gpu-1"))
        fleet_screen = app.screen
        assert isinstance(fleet_screen, FleetScreen)
        assert any(c.title == "Profile on gpu-1"
                   for c in app.get_system_commands(fleet_screen))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ProfileScreen))
        screen = app.screen
        assert isinstance(screen, ProfileScreen) and screen.run == "yolox_running"
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None)
        body = str(screen.query_one("#body", Static).render())
        assert body.startswith("profile refused: run yolox_running is training on box gpu-1")
        screen.report = None
        screen.query_one("#options", Input).value = "--force --steps 2"
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None)
        body = str(screen.query_one("#body", Static).render())
        assert body == ("profile on box gpu-1 needs --data YAML (run yolox_running did not "
                        "name one)")  # its train_config.yaml is missing
        screen.report = None
        screen.query_one("#options", Input).value = "--force --data /d.yaml --steps 2"
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None)
        body = str(screen.query_one("#body", Static).render())
        assert "profile failed: libreyolo is not installed for" in body
        screen.query_one("#options", Input).value = "--try gpus=2"
        await pilot.press("enter")
        await until(pilot, lambda: "--try 'gpus=2'" in str(
            screen.query_one("#body", Static).render()))
    outcomes = [e["outcome"] for e in Journal().entries if e["action"] == "profile"]
    assert outcomes == ["refused", "failed"]


async def test_a_running_profile_is_cancelled_like_any_action(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """Cancelled from the palette: journaled as cancelled, and within seconds nothing of
    it runs on the box (the on-box program, the profiler, its loader worker)."""
    root = runs_root_with(tmp_path, "yolox_completed")
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "gpu-1", runs_roots=[str(root)],
        python=str(hostile_libreyolo(tmp_path / "slow", "slow")))],
        known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ProfileScreen))
        screen = app.screen
        screen.query_one("#options", Input).value = "--data /d.yaml --weights /w.pt"
        await pilot.press("enter")
        await until(pilot, lambda: "setting 1 of 1: batch 16, workers 8" in str(
            screen.query_one("#body", Static).render()))
        assert app.busy.get("gpu-1") == "profile"
        await asyncio.to_thread(wait_for, lambda: profiling(tmp_path / "slow"), 60, 0.1)
        cancel = next(c for c in app.get_system_commands(screen)
                      if c.title == "Cancel profile on gpu-1")  # the palette's entry
        cancel.callback()
        await until(pilot, lambda: "gpu-1" not in app.busy)
        await asyncio.to_thread(nothing_left, tmp_path / "slow")
    entry = [e for e in Journal().entries if e["action"] == "profile"][-1]
    assert entry["outcome"] == "cancelled"


async def test_a_profile_that_measures_shows_the_verdict_and_the_priced_figures(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """Keys only: enter on the run, P, the options typed, enter. The box's `libreyolo`
    answers what LibreYOLO measured on the H200 (yolox-n, batch 16, 1 worker: 35.4 img/s,
    54% of each step waiting on data); at $3.49/hr that is $0.027 per 1k images."""
    root = runs_root_with(tmp_path, "yolox_completed")
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "gpu-1", runs_roots=[str(root)],
        python=str(hostile_libreyolo(tmp_path / "h200", "recorded")),
        pricing={"running_usd_per_hr": 3.49})],
        known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    app = GpurentApp(fleet)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "gpu-1"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ProfileScreen))
        screen = app.screen
        assert isinstance(screen, ProfileScreen)
        await pilot.press(*"--data /d.yaml --weights /w.pt --workers 1 --steps 2")
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None)
        body = str(screen.query_one("#body", Static).render())
    verdict, _, table = body.partition("\n\n")
    assert verdict.startswith("dataloader-bound: 1 ")
    assert "54% of each step waits on data" in verdict
    assert verdict.endswith("a faster GPU buys nothing")
    rows = [line.split() for line in table.splitlines() if line.strip()]
    assert rows == [["batch", "workers", "img/s", "dataload", "GPU", "busy", "$/1k", "img",
                     "LibreYOLO"],
                    ["16", "1", "35.4", "54%", "6%", "$0.027", "memory-pressure"]]
    entry = [e for e in Journal().entries if e["action"] == "profile"][-1]
    assert entry["outcome"] == "done" and entry["message"] == verdict
    assert entry["cells"] == [{"batch": 16, "workers": 1, "img_per_s": 35.37,
                              "dataload_frac": 0.539, "gpu_util": 0.06}]


async def test_beside_a_run_on_gpu_0_the_palette_profiles_gpu_1_not_gpu_0(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """`Profile on <box>` from the palette, placed by the runs of the panel's own snapshot:
    refused on the GPU the run trains on, measured on the other, saying what trained
    beside it."""
    root, trainer = training_run(tmp_path, config_text("0"))
    try:
        server = sshd_factory()
        fleet = make_fleet(tmp_path, [box_entry(
            server, client_key, "gpu-1", runs_roots=[str(root)],
            python=str(hostile_libreyolo(tmp_path / "h200", "recorded")),
            pricing={"running_usd_per_hr": 3.49})],
            known_hosts=[server.known_hosts_line()], refresh_seconds=30)
        app = GpurentApp(fleet)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: "yolox_running" in box_text(app, "gpu-1"))
            next(c for c in app.get_system_commands(app.screen)
                 if c.title == "Profile on gpu-1").callback()
            await until(pilot, lambda: isinstance(app.screen, ProfileScreen))
            screen = app.screen
            assert isinstance(screen, ProfileScreen) and screen.run is None
            await pilot.press(*"--data /d.yaml --weights /w.pt --device 0")
            await pilot.press("enter")
            await until(pilot, lambda: screen.report is not None)
            body = str(screen.query_one("#body", Static).render())
            assert body.startswith("profile refused: run yolox_running is training on GPU 0 "
                                   "of box gpu-1: ")
            screen.report = None
            screen.query_one("#options", Input).value = \
                "--data /d.yaml --weights /w.pt --device 1"
            await pilot.press("enter")
            await until(pilot, lambda: screen.report is not None)
            body = str(screen.query_one("#body", Static).render())
    finally:
        trainer.kill()
        trainer.wait()
    assert body.startswith("dataloader-bound: ")
    assert "$0.027" in body
    assert body.rstrip().endswith(
        "training beside it: yolox_running on GPU 0; profiling GPU 1 (the cores and disk "
        "are shared, so the dataload share may read high)")
    outcomes = [e["outcome"] for e in Journal().entries if e["action"] == "profile"]
    assert outcomes == ["refused", "done"]
