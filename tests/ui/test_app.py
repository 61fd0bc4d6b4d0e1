"""The panel driven by Pilot against real sshd boxes on loopback (and fixed snapshots)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from support.asyncssh_box import FaultyBox
from support.fleets import box_entry, make_fleet, runs_root_with
from support.panel_states import CONFIG, NOW, fleet_config, fleet_states
from support.pilot import until
from support.sshd import KeyPair, Sshd
from textual._xterm_parser import XTermParser
from textual.binding import Binding
from textual.widgets import Input, Log, Static

from tui.actions.flows import Report
from tui.app import GpurentApp
from tui.model.config import KEY_ACTIONS, parse_config
from tui.screens.confirm import ConfirmScreen, DestroyScreen
from tui.screens.cost import CostScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import JournalScreen
from tui.screens.launch import LaunchScreen
from tui.screens.run_detail import RunDetail

Factory = Callable[..., Sshd]


def fleet_screen(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


def head(app: GpurentApp) -> str:
    return str(fleet_screen(app).query_one("#fleet-head").render())


def box_text(app: GpurentApp, name: str) -> str:
    return fleet_screen(app).fleet_list.text(name)


def shown(app: GpurentApp) -> list[str]:
    """The names of the runs on the fleet list, top to bottom."""
    return [app.states[box].run(path).name  # type: ignore[union-attr]
            for box, path in fleet_screen(app).fleet_list.order]


def selected(app: GpurentApp) -> str | None:
    key = fleet_screen(app).selected
    if key is None:
        return None
    run = app.states[key[0]].run(key[1])
    return run.name if run else None


def burst(app: GpurentApp, keys: str) -> None:
    """Keys as one write from the terminal (a paste, a laggy link): parsed as the driver
    parses them and queued together, before the app handles the first. The write ends
    as the driver ends it: a last ESC waits its escape delay, then reads as Escape."""
    parser = XTermParser()
    for event in [*parser.feed(keys), *parser.feed("")]:
        app.post_message(event)


def fleet(tmp_path: Path, server: Sshd, key: KeyPair, **top: object):  # type: ignore[no-untyped-def]
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed", "yolox_running")
    return root, make_fleet(
        tmp_path,
        [box_entry(server, key, "alpha", runs_roots=[str(root)]),
         {**box_entry(server, key, "beta"), "port": 1}],
        known_hosts=[server.known_hosts_line()], refresh_seconds=30, **top)


def test_every_binding_can_be_remapped() -> None:
    bindings = [*GpurentApp.BINDINGS, *FleetScreen.BINDINGS, *RunDetail.BINDINGS,
                *CostScreen.BINDINGS, *ConfirmScreen.BINDINGS, *DestroyScreen.BINDINGS,
                *JournalScreen.BINDINGS, *LaunchScreen.BINDINGS]
    assert {b.id for b in bindings if isinstance(b, Binding)} == set(KEY_ACTIONS)


async def test_panel_shows_boxes_runs_and_moves_between_runs(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    _, config = fleet(tmp_path, server, client_key)
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(shown(app)) == 3
                    and app.states["beta"].connection != "connecting")
        await until(pilot, lambda: "1/2 boxes up" in head(app))
        assert "✔ completed 1" in head(app) and "✖ failed 1" in head(app)
        beta = box_text(app, "beta")
        assert "✖ unreachable" in beta and "connection refused" in beta
        assert shown(app) == ["yolox_completed", "yolox_failed", "yolox_running"]
        assert selected(app) == "yolox_completed"
        await pilot.press("j")
        assert selected(app) == "yolox_failed"
        await pilot.press("j", "j")
        assert selected(app) == "yolox_running"
        await pilot.press("k")
        assert selected(app) == "yolox_failed"
        assert "RuntimeError: injected failure at epoch 3" in box_text(app, "alpha")
        await pilot.press("q")
    assert app.return_code == 0


async def test_remapped_keys(tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    # "u" is free; "p" would take push's key, which check-config refuses.
    _, config = fleet(tmp_path, server, client_key, keys={"next": "n", "previous": "u"})
    app = GpurentApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(shown(app)) == 3)
        await pilot.press("n")
        assert selected(app) == "yolox_failed"
        await pilot.press("j")  # no longer bound
        assert selected(app) == "yolox_failed"
        await pilot.press("u")
        assert selected(app) == "yolox_completed"


async def test_panel_follows_a_run_and_a_box_going_down_and_back(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory()
    root, config = fleet(tmp_path, server, client_key, timeout_seconds=3)
    app = GpurentApp(config)
    run_dir = root / "yolox_running"
    status = json.loads((run_dir / "status.json").read_text())

    def running() -> int | None:
        run = next(r for r in app.states["alpha"].runs if r.name == "yolox_running")
        return run.current_epoch

    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: len(shown(app)) == 3)
        assert running() == 7
        # The run advances (and its pid now lives): status.json rewritten as LibreYOLO does.
        status.update(current_epoch=8, completed_epochs=8, pid=os.getpid(),
                      updated_at=status["updated_at"])
        tmp = run_dir / "status.json.tmp"
        tmp.write_text(json.dumps(status))
        os.replace(tmp, run_dir / "status.json")
        await pilot.press("r")
        await until(pilot, lambda: running() == 8)
        await until(pilot, lambda: "8/30" in box_text(app, "alpha"))

        server.stop()
        await pilot.press("r")
        await until(pilot, lambda: app.states["alpha"].connection in ("unreachable", "timeout"))
        assert len(shown(app)) == 3  # the runs stay on screen
        await until(pilot, lambda: "0/2 boxes up" in head(app))
        server.restart()
        await pilot.press("r")
        await until(pilot, lambda: app.states["alpha"].connection == "ok")
        await until(pilot, lambda: "1/2 boxes up" in head(app))


def fixed_app() -> GpurentApp:
    return GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW)


async def test_filter_by_health_or_name_and_clear() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert len(shown(app)) == 6
        await pilot.press("slash", "f", "a", "i")
        assert shown(app) == ["lr-sweep 3e-4"]
        assert "2 run(s) hidden by the filter" in box_text(app, "runpod-a100")
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == 6
        assert app.query_one("#filter").display is False
        await pilot.press("slash", *"STUCK", "enter")
        await pilot.pause()
        assert shown(app) == ["stuck-dataloader"]
        assert selected(app) == "stuck-dataloader"
        await pilot.press("j", "k")  # moving stays among the visible runs
        assert selected(app) == "stuck-dataloader"


async def test_escape_clears_a_kept_filter() -> None:
    """The placeholder says "enter keeps it, escape clears it": escape after enter too."""
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"fai", "enter")
        await pilot.pause()
        assert shown(app) == ["lr-sweep 3e-4"] and app.query_one("#filter").display
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == 6
        assert app.query_one("#filter").display is False
        assert fleet_screen(app).filter == ""


async def test_a_burst_of_keys_acts_on_the_state_each_key_left() -> None:
    """Keys that arrive in one write (a paste, a laggy link, typing ahead) each act on
    the cursor the key before left, never on a selection the screen has not caught up with."""
    app = fixed_app()
    order = ["yolo9-t baseline", "yolox-n coco", "lr-sweep 3e-4", "oom-victim",
             "stuck-dataloader", "ablation-mosaic"]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert shown(app) == order and selected(app) == order[0]
        burst(app, "jjj\r")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        assert app.screen.run.name == order[3]  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()
        assert selected(app) == order[3]
        burst(app, "kkkk")
        await pilot.pause()
        assert selected(app) == order[0]  # three steps up, the fourth stops at the top
        burst(app, "jjp")
        await until(pilot, lambda: "push failed" in box_text(app, "runpod-a100"))
        assert selected(app) == order[2]
        assert "runpod-a100 has no push destination" in box_text(app, "runpod-a100")
        # no push touched it (each run's "unpushed: ..." is what a crash would cost)
        assert "push" not in box_text(app, "vast-4090").replace("unpushed:", "")
        burst(app, "jjjjjjj\x1b[A\r")  # to the bottom, one up (an arrow key), open
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        assert app.screen.run.name == order[4]  # type: ignore[attr-defined]


async def test_a_burst_ending_in_d_or_s_asks_about_the_box_the_cursor_reached() -> None:
    """`D` and `s` typed ahead act on the cursor's box as the keys before left it: the
    dialog names the box of the row reached, not of the row the screen last showed."""
    config = parse_config(CONFIG.replace('provider = "vast"\n', 'provider = "vast"\n'
                                         'instance_id = "12345678"\n')
                          .replace('provider = "runpod"\n', 'provider = "runpod"\n'
                                   'instance_id = "x7k2m9q4p1"\n'), "burst.toml")
    app = GpurentApp(config, states=fleet_states(), live=False, clock=lambda: NOW)
    order = ["yolo9-t baseline", "yolox-n coco", "lr-sweep 3e-4", "oom-victim",
             "stuck-dataloader", "ablation-mosaic"]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert shown(app) == order and selected(app) == order[0]  # on vast-4090
        burst(app, "jjD")
        await until(pilot, lambda: isinstance(app.screen, DestroyScreen))
        assert app.screen.box == "runpod-a100"  # type: ignore[attr-defined]
        assert selected(app) == order[2]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        burst(app, "kk")
        await pilot.pause()
        assert selected(app) == order[0]
        burst(app, "jjs")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_text == "Stop runpod-a100?"  # type: ignore[attr-defined]
        assert selected(app) == order[2]
        await pilot.press("escape")
        await pilot.pause()
        burst(app, "kjs")  # back to vast-4090's row, and down again, in one write
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_text == "Stop runpod-a100?"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()
        burst(app, "ks")  # and up from runpod-a100 to vast-4090: the other way round
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert app.screen.title_text == "Stop vast-4090?"  # type: ignore[attr-defined]
        assert selected(app) == order[1]


async def test_stopping_a_manual_box_names_its_stop_command_not_a_provider() -> None:
    """A manual box has no provider to bill its disk or give its GPU away: the dialog says
    its stop_command runs on it, and which command that is."""
    config = parse_config(CONFIG.replace('host = "lab.example.org"\n',
                                         'host = "lab.example.org"\n'
                                         'stop_command = "sudo systemctl poweroff"\n'),
                          "manual.toml")
    app = GpurentApp(config, states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        for _ in range(len(shown(app))):
            key = fleet_screen(app).selected
            if key is not None and key[0] == "lab-3090":
                break
            await pilot.press("j")
        assert fleet_screen(app).selected[0] == "lab-3090"  # type: ignore[index]
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = app.screen.body  # type: ignore[attr-defined]
        assert "stop_command" in body and "sudo systemctl poweroff" in body
        assert "No provider bills it while stopped" in body
        assert "provider gives" not in body and "still bills" not in body


async def test_keys_typed_ahead_after_escape_are_kept() -> None:
    """`c Escape J` in one write: the terminal reads ESC and J as Alt+J; no binding gives
    Alt+J a meaning, so it is Escape (the costs close) and J (the journal opens)."""
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(app, "c\x1bJ")
        await until(pilot, lambda: isinstance(app.screen, JournalScreen))
        assert [type(s) for s in app.screen_stack] == [FleetScreen, JournalScreen]
        await pilot.press("escape")
        await pilot.pause()
        burst(app, "c\x1bj")  # a lower-case key: Escape, then one run down
        await until(pilot, lambda: isinstance(app.screen, FleetScreen)
                    and selected(app) == "yolox-n coco")


def test_escape_then_a_symbol_or_enter_leaves_no_trace_to_split() -> None:
    """Why the README says to wait after Escape before `/`, `?` or Enter: Textual's parser
    reads ESC and such a key in one write as that key alone, the same event as the key
    typed by itself (only a letter or digit becomes Alt+key, which the panel splits).
    Tab and Backspace after ESC read as Shift+Tab and Ctrl+W. If this fails, Textual
    now keeps the ESC: split it in `escape_then_key` and change the README."""
    def keys(data: str) -> list[tuple[str, str | None]]:
        parser = XTermParser()
        return [(e.key, e.character) for e in [*parser.feed(data), *parser.feed("")]
                if hasattr(e, "key")]
    for symbol in "?/:":
        assert keys("\x1b" + symbol) == keys(symbol)
    assert keys("\x1b\r") == keys("\r")
    assert keys("\x1b\t") == [("shift+tab", None)]
    assert keys("\x1b\x7f") == [("ctrl+w", None)]
    assert keys("\x1bJ") == [("alt+shift+j", "J")]  # the case the panel splits


async def test_an_alt_key_remapped_to_an_action_keeps_its_meaning() -> None:
    """A key the config binds to Alt+J is that key, not Escape and J."""
    config = parse_config(CONFIG + '[keys]\njournal = "alt+shift+j"\n', "alt.toml")
    app = GpurentApp(config, states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(app, "\x1bJ")
        await until(pilot, lambda: isinstance(app.screen, JournalScreen))


async def test_a_filter_typed_in_one_burst_keeps_every_key() -> None:
    """`/`, the filter text and Enter in one write (a paste, a laggy link): every letter
    reaches the filter, and Enter keeps the filter instead of opening a run, although the
    field has no focus yet when they arrive; a second Enter then opens the filtered run."""
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        burst(app, "/faX\x7fi\r")  # a typo, backspace, the rest, enter
        await until(pilot, lambda: shown(app) == ["lr-sweep 3e-4"])
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert app.query_one("#filter", Input).value == "fai"
        assert selected(app) == "lr-sweep 3e-4"
        await pilot.press("escape")
        await pilot.pause()
        assert len(shown(app)) == 6
        burst(app, "/STUCK\r\r")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        assert app.screen.run.name == "stuck-dataloader"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await pilot.pause()
        assert fleet_screen(app).filter == "STUCK"
        burst(app, "/")  # a filter kept with enter is typed on from the end
        burst(app, "\x7f\x7f\x7f\x7f\x7f\r")
        await until(pilot, lambda: len(shown(app)) == 6)
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and fleet_screen(app).filter == ""


async def test_the_first_selection_is_the_top_row(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, faulty: FaultyBox) -> None:
    """The top box answers last: the cursor is still on the top row, not on the run of the
    box that happened to answer first."""
    server = sshd_factory()
    top = runs_root_with(tmp_path, "yolox_completed", name="top-runs")
    low = runs_root_with(tmp_path, "yolox_failed", name="low-runs")
    faulty.delay = 2.0
    config = make_fleet(tmp_path, [
        {**box_entry(server, client_key, "top", runs_roots=[str(top)]), "port": faulty.port},
        box_entry(server, client_key, "low", runs_roots=[str(low)])],
        known_hosts=[server.known_hosts_line(), faulty.known_hosts_line()], refresh_seconds=30)
    app = GpurentApp(config)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: shown(app) == ["yolox_failed"])
        assert selected(app) == "yolox_failed"
        await until(pilot, lambda: len(shown(app)) == 2)
        assert selected(app) == "yolox_completed"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetail))
        assert app.screen.run.name == "yolox_completed"  # type: ignore[attr-defined]


@pytest.fixture
async def faulty(tmp_path: Path, client_key: KeyPair) -> AsyncIterator[FaultyBox]:
    box = FaultyBox(client_key.public_line, cwd=tmp_path)
    await box.start()
    try:
        yield box
    finally:
        await box.close()


async def test_a_crashed_watcher_is_shown_and_restarted(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A bug in a box's watcher (here its clock raises once, inside its task) marks that
    box "watcher crashed" with why, leaves the other box alone, and the watcher restarts."""
    server = sshd_factory()
    _, config = fleet(tmp_path, server, client_key)
    armed = [True]

    def clock() -> float:
        import time

        task = asyncio.current_task()
        if armed[0] and task is not None and task.get_name() == "watch alpha":
            armed[0] = False
            raise RuntimeError("the clock broke")
        return time.time()

    app = GpurentApp(config, clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.states["alpha"].connection == "watcher_crashed")
        assert "watcher crashed: RuntimeError: the clock broke" in box_text(app, "alpha")
        await until(pilot, lambda: app.states["alpha"].connection == "ok", timeout=30)
        assert len(shown(app)) == 3
        assert app.states["beta"].connection == "unreachable"


async def test_an_action_that_raises_is_shown_and_frees_its_box() -> None:
    app = fixed_app()

    async def broken() -> Report:
        raise ValueError("a bug in a flow")

    async def fine() -> Report:
        return Report(lines=["all good"])

    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.start_action("vast-4090", "push", broken)
        await until(pilot, lambda: "push failed" in box_text(app, "vast-4090"))
        assert "crashed: ValueError: a bug in a flow" in box_text(app, "vast-4090")
        assert "vast-4090" not in app.busy
        assert app.start_action("vast-4090", "push", fine)
        await until(pilot, lambda: "push done" in box_text(app, "vast-4090"))
        assert "all good" in box_text(app, "vast-4090")


async def test_open_a_run_cycle_its_chart_and_go_back() -> None:
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("j", "j", "enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetail)
        assert detail.run.name == "lr-sweep 3e-4" and detail.box_name == "runpod-a100"
        title = str(detail.query_one("#title", Static).render())
        assert "RuntimeError: injected failure at epoch 3" in title
        log_text = "\n".join(str(line) for line in detail.query_one(Log).lines)
        assert "Epoch 2 - Average loss" in log_text
        assert detail.series == "both"
        await pilot.press("m")
        assert detail.series == "loss"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RunDetail)


async def test_command_palette_opens_a_run_by_name() -> None:
    app = fixed_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"open oom-victim")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RunDetail)
        assert app.screen.run.name == "oom-victim"


async def test_run_detail_follows_the_run(tmp_path: Path, sshd_factory: Factory,
                                          client_key: KeyPair) -> None:
    server = sshd_factory()
    root, config = fleet(tmp_path, server, client_key)
    run_dir = root / "yolox_completed"
    lines = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_text("".join(lines[:4]))
    app = GpurentApp(config)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(shown(app)) == 3)
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetail) and detail.run.name == "yolox_completed"
        assert len(detail.run.history) == 4
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write("".join(lines[4:]))
        with (run_dir / "train.log").open("a") as f:
            f.write("2026-12-02 10:09:00 | INFO     | a line written just now\n")
        await pilot.press("r")
        await until(pilot, lambda: len(detail.run.history) == 6)
        await until(pilot, lambda: any("a line written just now" in str(line)
                                       for line in detail.query_one(Log).lines))


async def test_a_form_typed_ahead_fills_each_field_in_turn() -> None:
    """Tab and the next field's text that arrive in one write: the text goes to the field
    the Tab moved to, not to the one it left (the size form read 'data 12y', 'model
    olox-s100' over a laggy link)."""
    from tui.screens.size import SizeScreen

    app = GpurentApp(fleet_config(), states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(SizeScreen())
        await pilot.pause()
        burst(app, "12\tyolox-s\t100\r")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SizeScreen)
        values = [screen.query_one(f"#{key}", Input).value for key in
                  ("data", "model", "epochs", "save_period")]
        assert values == ["12", "yolox-s", "100", "10"]
        assert screen.plan is not None
        burst(app, "\x1b[Z9")  # from "epochs", shift+tab and a key: it lands in "model"
        await pilot.pause()
        await pilot.pause()
        # (a field focused by Tab selects its text, so the key types over it)
        assert [screen.query_one(f"#{key}", Input).value for key in ("model", "epochs")] \
            == ["9", "100"]
