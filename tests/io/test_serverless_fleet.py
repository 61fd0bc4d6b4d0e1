"""A fleet of one real-sshd box and one Modal app (the `modal` stand-in, named by the
config's `cli`): both in `status --json`, both in the panel; `s` on the Modal row stops
the app through the stand-in, and the row reads stopped only once the stand-in says so."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from rich.style import Style
from rich.text import Text
from support.fleets import box_entry, make_fleet, runs_root_with
from support.modal_standin import BIN, ModalStandIn, status_json
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd
from textual.pilot import Pilot

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.config import FleetConfig, parse_config
from tui.runtime.events import ServerlessChanged
from tui.runtime.fleet import Runtime
from tui.runtime.serverless import poll_entry
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal
from widgets.fleet_head import FleetHead
from widgets.serverless_text import APP_ROW, ServerlessView, app_lines


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def with_modal(fleet: FleetConfig, **extra: object) -> FleetConfig:
    """The fleet's config file with a [[serverless]] entry for the stand-in's app."""
    path = Path(fleet.source)
    entry = {"name": "modal-yolo", "provider": "modal", "app": "yolo-train",
             "volume": "runs-vol", "runs_path": "/runs", "gpu": "H100:2", "timeout": 21600,
             "cli": str(BIN / "modal"), **extra}
    lines = ["", "[[serverless]]", *(f"{k} = {json.dumps(v)}" for k, v in entry.items())]
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
    return parse_config(path.read_text(), str(path))


@pytest.fixture
def modal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModalStandIn:
    stand_in = ModalStandIn(tmp_path / "modal", started=iso(time.time() - 3600))
    monkeypatch.setenv("GPURENT_STANDIN_STATE", str(stand_in.path))  # the stand-in's state
    now = time.time()
    stand_in.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30),
        eta=8 * 3600.0))
    stand_in.put("runs/exp1/weights/best.pt", b"w" * 4096)
    stand_in.put("runs/exp1/weights/last.pt", b"l" * 2048)
    return stand_in


def fleet_of_two(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                 client_key: KeyPair) -> FleetConfig:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "ssh-box",
                                            runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    return with_modal(fleet, local_dir=str(tmp_path / "pushed"))


def test_status_json_shows_the_box_and_the_modal_app(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    (box,) = doc["boxes"]
    assert box["name"] == "ssh-box" and box["connection"] == "ok"
    (app,) = doc["serverless"]
    assert (app["name"], app["provider"], app["app"], app["state"], app["tasks"]) == \
        ("modal-yolo", "modal", "yolo-train", "running", 1)
    assert app["error"] is None and app["price_source"] == "modal published 2026-05-07"
    (run,) = app["runs"]
    assert run["path"] == "runs/exp1" and run["health"] == "running"
    assert run["current_epoch"] == 3 and run["total_epochs"] == 40
    assert run["timeout_countdown"].startswith("killed by its 6 h timeout in 4h5")
    assert run["timeout_problem"].startswith("ETA 8h00m is past its 6 h timeout")
    assert 7000 < run["gpu_seconds"] < 7400  # an hour on 2 GPUs
    assert run["estimated_cost_usd"] == pytest.approx(run["gpu_seconds"] * 0.001097, rel=1e-3)
    assert sorted(w["name"] for w in run["weights"]) == ["best.pt", "last.pt"]
    # what was run: the documented commands, through the configured CLI
    calls = modal.calls()
    assert ["app", "list", "--json"] in calls
    assert ["volume", "ls", "--json", "--", "runs-vol", "/runs"] in calls
    assert ["volume", "get", "--", "runs-vol", "runs/exp1/status.json", "-"] in calls

    assert main(["status", "--config", fleet.source]) == 0
    table = capsys.readouterr().out
    assert "ssh-box  [ok]" in table
    assert "modal-yolo  [modal app yolo-train: running (deployed), 1 task]  H100:2" in table
    assert "! ETA 8h00m is past its 6 h timeout" in table
    assert "(estimate: GPU-seconds x $0.0022/s for H100:2, modal published 2026-05-07)" in table


def test_status_fails_when_the_modal_cli_is_not_logged_in(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    modal.update(logged_in=False)
    assert main(["status", "--json", "--config", fleet.source]) == 1
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["error_kind"] == "not_logged_in" and "modal token new" in app["error"]
    assert app["state"] is None and app["runs"] == []


async def select(pilot: Pilot[object], screen: FleetScreen, key: tuple[str, str]) -> None:
    """Move the cursor with j/k, as a user does, until it is on `key`."""
    order = screen.fleet_list.order
    assert key in order, order
    for _ in range(2 * len(order)):
        if screen.selected == key:
            return
        here = order.index(screen.selected) if screen.selected in order else -1
        await pilot.press("j" if here < order.index(key) else "k")
    assert screen.selected == key


async def test_the_panel_shows_both_and_s_stops_the_app_once_the_cli_says_so(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        modal: ModalStandIn) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    modal.app(stop_after=2)  # two more `app list` calls read "stopping..." after the stop
    app = GpurentApp(fleet)
    app.runtime.serverless_seconds = 0.3
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "ssh-box"))
        await until(pilot, lambda: "running (deployed), 1 task" in box_text(app, "modal-yolo"))
        text = box_text(app, "modal-yolo")
        assert "modal app yolo-train" in text and "H100:2" in text
        assert "exp1" in text and "ETA 8h00m is past its 6 h timeout" in text
        assert "est." in text
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        await select(pilot, screen, ("modal-yolo", "runs/exp1"))
        await pilot.press("p")  # the run's weights, copied from the volume
        pushed = tmp_path / "pushed" / "modal-yolo" / "exp1"
        await until(pilot, lambda: (pushed / "last.pt").is_file())
        assert (pushed / "best.pt").read_bytes() == b"w" * 4096
        await until(pilot, lambda: "modal-yolo" not in app.busy)
        await select(pilot, screen, ("modal-yolo", APP_ROW))
        await pilot.press("D")  # destroy does not apply: said, nothing run
        await until(pilot, lambda: any("destroy does not apply to a serverless app: s stops "
                                       "it" in n.message for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        assert not any(c[:2] == ["app", "stop"] for c in modal.calls())
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: any(c[:2] == ["app", "stop"] for c in modal.calls()))
        await until(pilot, lambda: "stopping..." in box_text(app, "modal-yolo"))
        stops = [c for c in modal.calls() if c[:2] == ["app", "stop"]]
        assert stops == [["app", "stop", "--yes", "--", "yolo-train"]]
        assert "stopped" not in box_text(app, "modal-yolo").split("\n")[0].replace(
            "stopping", "")  # not before the CLI says so
        await until(pilot, lambda: "yolo-train: stopped" in box_text(app, "modal-yolo"))
        assert modal.read()["apps"][0]["state"] == "stopped"
        await until(pilot, lambda: any(e.get("action") == "stop" and e.get("box") ==
                                       "modal-yolo" for e in app.journal.entries))
        (entry,) = [e for e in app.journal.entries if e.get("action") == "stop"]
        assert entry["outcome"] == "done" and entry["app"] == "yolo-train"
        (push,) = [e for e in app.journal.entries if e.get("action") == "push"]
        assert push["verified"] is True and push["run_path"] == "runs/exp1"


async def test_the_runtime_polls_backs_off_on_errors_and_keeps_the_last_picture(
        tmp_path: Path, modal: ModalStandIn) -> None:
    text = (f'[[serverless]]\nname = "modal-yolo"\nprovider = "modal"\napp = "yolo-train"\n'
            f'volume = "runs-vol"\nruns_path = "/runs"\ngpu = "H100"\ntimeout = 21600\n'
            f'cli = {json.dumps(str(BIN / "modal"))}\n')
    fleet = parse_config(text, "fleet.toml")
    events: list[object] = []
    runtime = Runtime(fleet, events.append, journal=Journal(tmp_path / "j.jsonl"),
                      serverless_seconds=0.1)
    runtime.start()
    try:
        for _ in range(200):
            if sum(isinstance(e, ServerlessChanged) for e in events) >= 3:
                break
            await asyncio.sleep(0.05)
        good = runtime.serverless["modal-yolo"]
        assert good.app is not None and good.app.state == "running" and len(good.runs) == 1
        modal.update(logged_in=False)
        before = len([c for c in modal.calls() if c[:2] == ["app", "list"]])
        await asyncio.sleep(2.5)
        failed = len([c for c in modal.calls() if c[:2] == ["app", "list"]]) - before
        # at 0.1 s a poll, 25 calls; backed off from 1-2 s, doubling: at most 3
        assert 1 <= failed <= 3, failed
        state = runtime.serverless["modal-yolo"]
        assert state.error_kind == "not_logged_in"
        assert state.app == good.app and state.runs == good.runs  # the last good picture
    finally:
        await runtime.aclose()


def test_the_stop_command_stops_the_app_and_destroy_says_it_does_not_apply(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(f'[[serverless]]\nname = "modal-yolo"\nprovider = "modal"\n'
                      f'app = "yolo-train"\nvolume = "runs-vol"\nruns_path = "/runs"\n'
                      f'gpu = "H100"\ncli = {json.dumps(str(BIN / "modal"))}\n')
    assert main(["destroy", "modal-yolo", "--yes", "--config", str(config)]) == 2
    assert "destroy does not apply to a serverless app" in capsys.readouterr().err
    assert main(["start", "modal-yolo", "--config", str(config)]) == 2
    capsys.readouterr()
    assert main(["stop", "modal-yolo", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "yolo-train reads stopped" in out
    assert modal.read()["apps"][0]["state"] == "stopped"
    entries = Journal().entries
    assert [(e["box"], e["action"], e["outcome"]) for e in entries] == \
        [("modal-yolo", "stop", "done")]


def serverless_only(tmp_path: Path, **extra: object) -> Path:
    """A fleet of the stand-in's app alone (no box), as its config file."""
    entry = {"name": "modal-yolo", "provider": "modal", "app": "yolo-train",
             "volume": "runs-vol", "runs_path": "/runs", "gpu": "H100:2", "timeout": 21600,
             "cli": str(BIN / "modal"), "local_dir": str(tmp_path / "pushed"), **extra}
    config = tmp_path / "fleet.toml"
    config.write_text("[[serverless]]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                   for k, v in entry.items()))
    return config


async def test_box_keys_on_an_app_row_start_nothing_and_a_stopped_app_ends_its_runs(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        modal: ModalStandIn) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    app = GpurentApp(fleet)
    app.runtime.serverless_seconds = 0.3
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "ssh-box"))
        await until(pilot, lambda: "ETA 8h00m is past" in box_text(app, "modal-yolo"))
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        for row in (("modal-yolo", APP_ROW), ("modal-yolo", "runs/exp1")):
            await select(pilot, screen, row)
            for key in ("g", "G", "x"):  # a fleet of one box: no fallback onto it
                await pilot.press(key)
                await pilot.pause()
                assert not app.busy, (key, app.busy)
                assert "ssh-box" not in app.notes, key
        assert any("is for a box" in n.message for n in app._notifications)
        head = screen.query_one(FleetHead)
        await until(pilot, lambda: "1/1 boxes up · 1 app (1 running)" in head.render().plain)
        # back on the box's run, the footer is the box's again
        await select(pilot, screen, ("ssh-box", screen.fleet_list.order[0][1]))
        await pilot.pause()
        active = screen.active_bindings
        assert active["enter"].binding.show is True and active["s"].binding.show is False
        assert active["s"].binding.description == "Stop box/app"
        assert [active[k].binding.description for k in ("enter", "S", "D")] == \
            ["Open run", "Start box", "Destroy box"]
        # the app stops outside the panel: its run ends with it, its cost stops there
        modal.app(state="stopped", tasks="0", stopped_at=iso(time.time() - 60))
        await until(pilot, lambda: "yolo-train: stopped" in box_text(app, "modal-yolo"))
        text = box_text(app, "modal-yolo")
        assert "ETA 8h00m is past" not in text and "killed by its" not in text
        assert "killed: its app yolo-train reads stopped" in text
        cost = [line for line in text.split("\n") if "of GPU time (est.)" in line]
        calls = len(modal.calls())
        await until(pilot, lambda: len(modal.calls()) > calls + 4)  # polled again
        assert [line for line in box_text(app, "modal-yolo").split("\n")
                if "of GPU time (est.)" in line] == cost
        # s on a stopped app: said at once, nothing asked, nothing sent
        await select(pilot, screen, ("modal-yolo", APP_ROW))
        await pilot.press("s")
        await until(pilot, lambda: any("is already stopped" in n.message
                                       for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        assert not any(c[:2] == ["app", "stop"] for c in modal.calls())


def test_a_missing_volume_or_app_is_a_problem_and_status_fails(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    config = serverless_only(tmp_path, volume="novol")
    assert main(["status", "--config", str(config)]) == 1
    table = capsys.readouterr().out
    assert "! volume novol is missing (modal: Volume 'novol' not found)" in table
    assert "on volume novol yet" not in table and "no runs found" not in table
    assert main(["status", "--json", "--config", str(config)]) == 1
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["problem"].startswith("volume novol is missing") and app["error"] is None
    # a runs root not made yet on a volume that is there: a note, not a failure
    config = serverless_only(tmp_path, runs_path="/later")
    assert main(["status", "--config", str(config)]) == 0
    assert "· no /later on volume runs-vol yet" in capsys.readouterr().out
    modal.app(description="another-app")
    config = serverless_only(tmp_path)
    assert main(["status", "--config", str(config)]) == 1
    assert "! modal app yolo-train is missing" in capsys.readouterr().out


def test_a_finished_run_app_that_dropped_off_its_list_is_at_rest_not_a_problem(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    """`modal run` makes a temporary app; `modal app list` drops it a while after it
    stops. Its runs on the volume still read, ended: at rest, `status` exits 0, the cost
    is what it was; a run still claiming to train keeps it a problem; an app never
    listed with no runs is still said as not found."""
    now = time.time()
    modal.put("runs/exp1/status.json", status_json(
        state="completed", epoch=40, total=40, started_at=iso(now - 7200),
        updated_at=iso(now - 3600), eta=None))
    modal.update(apps=[])  # stopped long ago: no longer in `modal app list`
    config = serverless_only(tmp_path)
    assert main(["status", "--config", str(config)]) == 0
    table = capsys.readouterr().out
    assert "[modal app yolo-train: not listed any more (its runs ended)]" in table, table
    assert "!" not in table, table
    assert main(["status", "--json", "--config", str(config)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["state"] == "missing" and app["problem"] is None and app["error"] is None
    assert app["app_detail"] == "not listed any more (its runs ended)"
    (run,) = app["runs"]
    assert run["health"] == "completed"
    assert run["gpu_seconds"] == pytest.approx(3600 * 2, abs=5)  # start to last update
    (entry,) = parse_config(config.read_text(), str(config)).serverless
    state = asyncio.run(poll_entry(entry, None, time.time))
    head = app_lines(ServerlessView(state, entry), "", time.time()).lines[0].text
    assert "not listed any more" in head.plain and "! " not in head.plain
    assert not any("yellow" in str(span.style) or "red" in str(span.style)
                   for span in head.spans), head.spans
    # a second run that still says it trains: nothing runs it, a problem
    modal.put("runs/exp2/status.json", status_json(started_at=iso(now - 600),
                                                   updated_at=iso(now - 30)))
    assert main(["status", "--config", str(config)]) == 1
    table = capsys.readouterr().out
    assert "! modal app yolo-train is missing" in table
    assert "but run exp2 still says it trains" in table
    # a misnamed app: never listed, no runs at all: not found, as before
    shutil.rmtree(modal.volume_dir / "runs")
    (modal.volume_dir / "runs").mkdir()
    assert main(["status", "--config", str(config)]) == 1
    assert "! modal app yolo-train is missing: not in modal app list" in \
        capsys.readouterr().out


def row_lines(config: Path) -> list[Text]:
    """The app's lines as the panel's fleet list draws them, from one poll of the stand-in."""
    (entry,) = parse_config(config.read_text(), str(config)).serverless
    state = asyncio.run(poll_entry(entry, None, time.time))
    return [line.text for line in app_lines(ServerlessView(state, entry), "",
                                             time.time()).lines]


def styles_of(text: Text, words: str) -> set[Style]:
    """The styles the console renders `words` of `text` in (every segment they cover)."""
    console = Console(width=400, color_system="truecolor", force_terminal=True)
    start = text.plain.index(words)
    styles, at = set(), 0
    for segment in console.render(text):
        end = at + len(segment.text)
        if segment.text.strip() and at < start + len(words) and end > start:
            styles.add(segment.style or Style())
        at = end
    return styles


def test_an_eta_past_the_timeout_is_drawn_bold_red_on_the_row(
        tmp_path: Path, modal: ModalStandIn) -> None:
    config = serverless_only(tmp_path)
    (line,) = [t for t in row_lines(config) if "ETA 8h00m is past its 6 h timeout" in t.plain]
    styles = styles_of(line, "ETA 8h00m is past its 6 h timeout")
    assert styles and all(s.bold and s.color is not None and s.color.name == "red"
                          for s in styles), styles
    assert all(s.dim for s in styles_of(line, "of GPU time (est.)"))  # the cost: dimmed
    # an ETA inside the timeout: the countdown, not red
    now = time.time()
    modal.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30),
        eta=3600.0))
    (line,) = [t for t in row_lines(config) if "killed by its 6 h timeout in" in t.plain]
    assert not any(s.color is not None and s.color.name == "red"
                   for s in styles_of(line, "killed by its 6 h timeout in")), line.spans


@pytest.mark.parametrize("problem", [{"version": "1.4.2"}, {"version": "banana"}])
def test_a_modal_cli_too_old_is_said_on_the_row_and_fails_status(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str],
        problem: dict[str, str]) -> None:
    modal.update(**problem)
    config = serverless_only(tmp_path)
    lines = row_lines(config)
    row = "\n".join(t.plain for t in lines)
    assert "modal app yolo-train: not read yet" in row and "pip install -U modal" in row, row
    (said,) = [t for t in lines if t.plain.startswith("! ")]
    assert "1.5.0" in said.plain and str(said.style) == "bold red"
    assert main(["status", "--json", "--config", str(config)]) == 1
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["error_kind"] == "cli_too_old" and "pip install -U modal" in app["error"]
    assert app["state"] is None and app["runs"] == []
    assert main(["status", "--config", str(config)]) == 1
    table = capsys.readouterr().out
    assert "modal-yolo  [modal app yolo-train: not read]" in table
    assert "! modal " in table and "pip install -U modal" in table
    # nothing but the version was asked of a CLI too old to be read
    assert {tuple(c) for c in modal.calls()} == {("--version",)}


def test_a_serverless_runs_loss_reaches_the_row_and_status(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    doc = json.loads(status_json(epoch=5, total=40, started_at=iso(now - 3600),
                                 updated_at=iso(now - 30), eta=1800.0))
    modal.put("runs/exp1/status.json", json.dumps({**doc, "train_loss": 0.8731}))
    config = serverless_only(tmp_path)
    assert any("loss 0.8731" in t.plain for t in row_lines(config))
    assert main(["status", "--json", "--config", str(config)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    (run,) = app["runs"]
    assert run["train_loss"] == 0.8731 and run["current_epoch"] == 5
    assert main(["status", "--config", str(config)]) == 0
    assert "loss 0.8731" in capsys.readouterr().out
    # the next epoch's loss replaces it
    modal.put("runs/exp1/status.json", json.dumps({**doc, "current_epoch": 6,
                                                   "train_loss": 0.7502}))
    main(["status", "--json", "--config", str(config)])
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["runs"][0]["train_loss"] == 0.7502


def test_push_and_destroy_on_the_command_line_and_a_second_stop_is_refused(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    config = serverless_only(tmp_path)
    assert main(["push", "modal-yolo", "exp1", "--config", str(config)]) == 0
    pushed = tmp_path / "pushed" / "modal-yolo" / "exp1"
    assert (pushed / "best.pt").read_bytes() == b"w" * 4096
    assert (pushed / "last.pt").read_bytes() == b"l" * 2048
    capsys.readouterr()
    assert main(["push", "modal-yolo", "nope", "--config", str(config)]) == 1
    assert "no run nope read on volume runs-vol:/runs (runs read: exp1)" in \
        capsys.readouterr().out
    assert main(["destroy", "modal-yolo", "--yes", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "`gpurent-tui stop modal-yolo` stops it" in err and "s stops it" not in err
    assert main(["stop", "modal-yolo", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "yolo-train reads stopped" in out and "stopped (stopped)" not in out
    assert main(["stop", "modal-yolo", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert "already stopped" in out and "accepted" not in out
    assert len([c for c in modal.calls() if c[:2] == ["app", "stop"]]) == 1
    assert [e["outcome"] for e in Journal().entries if e["action"] == "stop"] == \
        ["done", "refused"]


def test_unreadable_runs_cost_nothing_and_an_escaped_name_finds_its_status(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    modal.put("runs/torn/status.json", '{"state": "runn')
    modal.put("runs/\x1b[31mred\x1b[0m/status.json", status_json(
        epoch=1, total=40, started_at=iso(now - 600), updated_at=iso(now - 30)))
    config = serverless_only(tmp_path)
    assert main(["status", "--json", "--config", str(config)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    runs = {r["name"]: r for r in app["runs"]}
    assert len(runs) == 3
    (red,) = [r for n, r in runs.items() if "red" in n]
    assert "\x1b" not in red["name"] and red["health"] == "running"  # its status.json read
    assert runs["torn"]["health"] == "unreadable" and runs["torn"]["estimated_cost_usd"] is None
    costs = [r["estimated_cost_usd"] for r in app["runs"] if r["estimated_cost_usd"]]
    assert app["estimated_cost_usd"] == pytest.approx(sum(costs), abs=1e-5)
    assert app["estimated_cost_usd"] < 1.2 * 3600 * 2 * 0.001097  # exp1's hour + red's 10 min
    # its weights are pushed by the same raw name
    modal.put("runs/\x1b[31mred\x1b[0m/weights/best.pt", b"r" * 512)
    assert main(["push", "modal-yolo", red["name"], "--config", str(config)]) == 0
    (folder,) = [p for p in (tmp_path / "pushed" / "modal-yolo").iterdir() if "red" in p.name]
    assert "\x1b" not in folder.name and (folder / "best.pt").read_bytes() == b"r" * 512


def test_serverless_estimates_reach_status_costs_and_watch(
        tmp_path: Path, modal: ModalStandIn, capsys: pytest.CaptureFixture[str],
        isolated_dirs: Path) -> None:
    config = serverless_only(tmp_path)
    assert main(["status", "--json", "--config", str(config)]) == 0
    doc = json.loads(capsys.readouterr().out)
    fleet, (app,) = doc["fleet"], doc["serverless"]
    assert fleet["usd_per_hr"] == 0 and fleet["accrued_usd"] == 0  # metered: boxes only
    money = fleet["serverless_usd"]
    assert money["estimate"] is True and (money["apps"], money["apps_running"]) == (1, 1)
    assert money["spent_usd_est"] == pytest.approx(app["estimated_cost_usd"], abs=1e-5)
    assert money["usd_per_hr_est"] == pytest.approx(2 * 0.001097 * 3600)  # one run, H100:2
    assert main(["status", "--config", str(config)]) == 0
    table = capsys.readouterr().out
    assert "serverless: ~$7.90/hr est., ~$" in table and " spent est. (1 app, 1 running; " \
        "not in the fleet's totals or budget)" in table
    assert main(["costs", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "Serverless apps (estimates" in out
    assert "modal-yolo  [modal app yolo-train: running (deployed), 1 task]  H100:2: ~$" in out
    assert main(["costs", "--json", "--config", str(config)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["serverless"]
    assert entry["name"] == "modal-yolo" and entry["spent_usd_est"] > 0
    # watch's first line names the apps
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "tui", "watch", "--config", str(config)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert "watch: 0 box(es), 1 serverless app(s) (modal-yolo: modal app yolo-train)" \
        in first, first  # no empty "()" for the boxes it has none of


async def test_a_serverless_only_panel_counts_its_apps_and_runs(
        tmp_path: Path, modal: ModalStandIn) -> None:
    fleet = parse_config(serverless_only(tmp_path).read_text(), str(tmp_path / "fleet.toml"))
    app = GpurentApp(fleet)
    app.runtime.serverless_seconds = 0.3
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "exp1" in box_text(app, "modal-yolo"))
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        head = screen.query_one(FleetHead)
        await until(pilot, lambda: "1 app (1 running)" in head.render().plain)
        words = head.render().plain
        assert "boxes up" not in words and "serverless ~$7.90/hr est." in words
        assert "running 1" in words  # the app's run counted by its health
        # the footer on an app's rows: s stops the app, enter (refused there) is not shown
        for row in (("modal-yolo", APP_ROW), ("modal-yolo", "runs/exp1")):
            await select(pilot, screen, row)
            await pilot.pause()
            active = screen.active_bindings
            assert (active["s"].binding.description, active["s"].binding.show) == \
                ("Stop app", True)
            assert active["enter"].binding.show is False
            assert active["p"].binding.show is True
            # the help (?) says what each box key does here, not what it does to a box
            assert [active[k].binding.description for k in ("enter", "S", "D")] == \
                ["Open run (a box's only)", "How this app starts", "How to remove this app"]
        await pilot.press("enter")  # still says why, instead of nothing
        await until(pilot, lambda: any("opening a run is for a box" in n.message
                                       for n in app._notifications))
        assert isinstance(app.screen, FleetScreen)
        # the run shows no sparkline: no loss history read from the volume
        view = ServerlessView(app.serverless["modal-yolo"], fleet.serverless[0])
        (main_line,) = [line for line in app_lines(view, "", app.clock()).lines
                        if line.run == "runs/exp1" and line.indent == 0]
        assert main_line.spark is None


async def test_one_failed_push_is_one_toast_saying_why(
        tmp_path: Path, modal: ModalStandIn) -> None:
    """p on a run with no weights/ yet: one toast (the push-failed alarm, with why in
    plain words), not the action's own toast beside it; the row keeps the outcome."""
    modal.put("runs/torn/status.json", status_json(
        epoch=0, total=40, started_at=iso(time.time() - 60), updated_at=iso(time.time())))
    fleet = parse_config(serverless_only(tmp_path).read_text(), str(tmp_path / "fleet.toml"))
    app = GpurentApp(fleet)
    app.runtime.serverless_seconds = 0.3
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "torn" in box_text(app, "modal-yolo"))
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        await select(pilot, screen, ("modal-yolo", "runs/torn"))
        await pilot.press("p")
        await until(pilot, lambda: "push failed" in box_text(app, "modal-yolo"))
        await until(pilot, lambda: any("push failed" in f"{n.title} {n.message}"
                                       for n in app._notifications))
        await pilot.pause(0.3)
        toasts = [f"{n.title}: {n.message}" for n in app._notifications
                  if "push" in f"{n.title} {n.message}"]
        assert len(toasts) == 1, toasts
        assert "torn has no weights yet" in toasts[0] and "No such file" not in toasts[0]
