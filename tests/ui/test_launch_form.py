"""`L` in the panel: the launch form, prefilled from the box's last launch, starts a run
that shows in its box's section once it writes status.json (real sshd, a stand-in trainer)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet, runs_root_with
from support.pilot import until
from support.sshd import KeyPair, Sshd
from support.stand_in_trainer import TRAINER
from textual.app import App
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select, Static

from tui.app import GpurentApp
from tui.model.launch import LaunchForm, LaunchRequest, plan_launch
from tui.screens.fleet import FleetScreen
from tui.screens.launch import LaunchScreen
from tui.store.journal import Journal


def fleet_screen(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


def shown(app: GpurentApp) -> list[str]:
    return [app.states[box].run(path).name  # type: ignore[union-attr]
            for box, path in fleet_screen(app).fleet_list.order]


def box_text(app: GpurentApp, name: str) -> str:
    return fleet_screen(app).fleet_list.text(name)


def form_value(app: GpurentApp, field: str) -> str:
    return app.screen.query_one(f"#f-{field}", Input).value


async def set_field(pilot: Pilot, field: str, value: str) -> None:
    app = pilot.app
    app.screen.query_one(f"#f-{field}", Input).value = value
    await pilot.pause()


async def test_launch_form_prefills_checks_and_starts_a_run_that_appears(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    config = make_fleet(tmp_path, [box_entry(server, client_key, "alpha", runs_roots=[str(root)]),
                                   box_entry(server, client_key, "beta",
                                             runs_roots=[str(tmp_path / "other")])],
                        known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    # alpha's last launch was `libreyolo train` with these arguments: the form starts there.
    earlier = plan_launch("alpha", [str(root)], name="old", train_args=[
        "--data", "/d/coco.yaml", "--model", "yolox-m", "--epochs", "300", "--no-pretrained"])
    Journal().record(box="alpha", action="launch", outcome="started", run="old",
                     run_path=earlier.run_dir, message=shlex.join(earlier.command()))
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: shown(app) == ["yolox_completed"])
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        assert app.screen.query_one("#box", Select).value == "alpha"
        assert (form_value(app, "model"), form_value(app, "data"), form_value(app, "epochs"),
                form_value(app, "extra"), form_value(app, "project")) == (
            "yolox-m", "/d/coco.yaml", "300", "--no-pretrained", str(root))
        assert form_value(app, "name") == ""

        # Bad fields are named and nothing is sent.
        await set_field(pilot, "epochs", "many")
        await pilot.press("ctrl+s")
        problems = str(app.screen.query_one("#problems", Static).render())
        assert "epochs: a whole number" in problems
        assert isinstance(app.screen, LaunchScreen) and not app.busy

        # Your own script instead, with its arguments; the data set is still doctored
        # first, and this box's python3 has no LibreYOLO: refused, nothing started.
        await set_field(pilot, "script", str(trainer))
        await set_field(pilot, "extra", "ok 0.5 30")
        await set_field(pilot, "epochs", "300")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        await until(pilot, lambda: "launch failed" in box_text(app, "alpha"), timeout=60)
        assert "libreyolo doctor could not check /d/coco.yaml" in box_text(app, "alpha")

        # The form starts from that attempt; skip the doctor this time: the run appears.
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        assert (form_value(app, "script"), form_value(app, "extra")) == (
            str(trainer), "ok 0.5 30")
        app.screen.query_one("#no_doctor", Checkbox).value = True
        await set_field(pilot, "name", "from the panel")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        await until(pilot, lambda: "from the panel" in shown(app), timeout=60)
        assert "launch done" in box_text(app, "alpha")

    refused, entry = [e for e in Journal().entries if e["files"]]
    assert refused["outcome"] == "refused" and "doctor" in refused["error"]
    assert entry["outcome"] == "started" and entry["files"][0]["path"] == str(trainer)
    assert entry["message"] == "python trainer.py ok 0.5 30"


async def test_escape_cancels_and_another_box_refills_the_form(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    config = make_fleet(tmp_path, [box_entry(server, client_key, "alpha"),
                                   box_entry(server, client_key, "beta")],
                        known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    Journal().record(box="beta", action="launch", outcome="started", run="b1",
                     run_path="/root/runs/b1", message="python b.py --lr 1",
                     files=[{"name": "b.py", "path": "/home/me/b.py"}])
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        assert form_value(app, "script") == ""
        app.screen.query_one("#box", Select).value = "beta"
        await until(pilot, lambda: form_value(app, "script") == "/home/me/b.py")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LaunchScreen))
        assert not app.busy


async def test_the_palette_launches_on_a_box_with_no_run_to_put_the_cursor_on(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    config = make_fleet(tmp_path, [box_entry(server, client_key, "alpha", runs_roots=[str(root)]),
                                   box_entry(server, client_key, "beta",
                                             runs_roots=[str(tmp_path / "empty")])],
                        known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    Journal().record(box="beta", action="launch", outcome="started", run="b1",
                     run_path="/root/runs/b1", message="python b.py --lr 1",
                     files=[{"name": "b.py", "path": "/home/me/b.py"}])
    app = GpurentApp(config)

    def offered() -> list[str]:
        lists = app.screen.query(CommandList)
        return [str(o.prompt) for o in lists.first().options] if lists else []

    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: shown(app) == ["yolox_completed"])  # only alpha has runs
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"launch on beta")
        await until(pilot, lambda: any("Launch on beta" in o for o in offered()))
        assert "Launch on beta" in offered()[0]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        assert app.screen.query_one("#box", Select).value == "beta"
        await until(pilot, lambda: form_value(app, "script") == "/home/me/b.py")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LaunchScreen))


class FormHost(App[None]):
    """The launch form alone, with data prefilled; what it answers is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[LaunchRequest | None] = []

    def on_mount(self) -> None:
        form = LaunchForm(data="/d/coco.yaml")
        self.push_screen(LaunchScreen(["alpha"], "alpha", lambda _box: form),
                         self.answers.append)


async def test_enter_on_a_checkbox_launches_and_space_ticks_it() -> None:
    """The hint says "enter / ctrl+s: launch": Enter on a focused checkbox launched nothing
    and ticked it, silently. Space ticks; Enter launches, with the ticks as they are."""
    app = FormHost()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        app.screen.query_one("#force", Checkbox).focus()
        await pilot.press("space")
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.answers))
    (request,) = app.answers
    assert request is not None and request.force and not request.resume


async def test_the_prefilled_path_is_not_replaced_by_the_first_key() -> None:
    app = FormHost()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        await pilot.press("2")
        assert app.screen.query_one("#f-data", Input).value == "/d/coco.yaml2"


async def test_a_ticked_box_says_so_in_words_not_only_colour() -> None:
    app = FormHost()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        resume = app.screen.query_one("#resume", Checkbox)
        assert str(resume.label).startswith("[ ] ")
        resume.focus()
        await pilot.press("space")
        await until(pilot, lambda: str(resume.label).startswith("[x] "))
        assert "resume" in str(resume.label) and resume.has_class("-on")  # still a checkbox


def test_a_first_launch_on_a_gpu_false_box_trains_on_its_cpu(tmp_path: Path) -> None:
    """`gpu = false` says the box has no GPU: the form's device starts as `cpu`, not the
    GPU 0 that LibreYOLO would fail to find; a GPU box keeps `0`, and a box's last launch
    still wins over either."""
    from tui.model.config import parse_config

    fleet = parse_config('[[box]]\nname = "cpu-box"\nhost = "h"\ngpu = false\n'
                         '[[box]]\nname = "gpu-box"\nhost = "h"\n', "f.toml")
    journal = Journal(tmp_path / "journal.jsonl")
    app = GpurentApp(fleet, live=False, journal=journal)
    assert app.launch_form("cpu-box").device == "cpu"
    assert app.launch_form("gpu-box").device == "0"
    journal.record(box="cpu-box", action="launch", outcome="started", run="r1",
                   message="libreyolo train --data d.yaml --device 0")
    assert app.launch_form("cpu-box").device == "0"
