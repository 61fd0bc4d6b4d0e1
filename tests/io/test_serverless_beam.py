"""A fleet of one real-sshd box and one Beam app (the `beam` stand-in on PATH, as a user's
own install is): both in `status --json`, the status table and the panel; `s` on the Beam
row stops the deployment through the stand-in's `beam deployment stop`, and the row reads
stopped only once the stand-in says so; `p` copies the run's weights from the Beam volume,
verified; `D` says destroy does not apply; Beam's failures read as clear words."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.beam_standin import BIN, DEPLOYMENT_ID, BeamStandIn
from support.fleets import box_entry, make_fleet, runs_root_with
from support.modal_standin import status_json
from support.pilot import box_text, until
from support.sshd import KeyPair, Sshd
from textual.pilot import Pilot

from tui.__main__ import main
from tui.actions.serverless_push import push_run
from tui.app import GpurentApp
from tui.model.config import FleetConfig, ServerlessConfig, parse_config
from tui.model.serverless_runs import VolumeRead, fold_runs
from tui.runtime.serverless import poll_entry
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal
from widgets.serverless_text import APP_ROW, ServerlessView, app_lines

H100_PER_SECOND = 0.000972  # Beam's published H100 price, read 2026-12-05


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


ENTRY = {"name": "beam-yolo", "provider": "beam", "app": "yolo-train", "volume": "runs-vol",
         "runs_path": "/runs", "gpu": "H100:2", "timeout": 21600}


def with_beam(fleet: FleetConfig, **extra: object) -> FleetConfig:
    """The fleet's config file with a [[serverless]] entry for the stand-in's Beam app (no
    `cli`: the `beam` found on PATH, as for a user)."""
    path = Path(fleet.source)
    lines = ["", "[[serverless]]", *(f"{k} = {json.dumps(v)}"
                                     for k, v in {**ENTRY, **extra}.items())]
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
    return parse_config(path.read_text(), str(path))


@pytest.fixture
def beam(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BeamStandIn:
    now = time.time()
    stand_in = BeamStandIn(tmp_path / "beam", started=iso(now - 3600))
    # the stand-in installed for this test alone, first on PATH: the adapter checks a
    # CLI's version once per installed file, and each test's world has its own version
    own = tmp_path / "bin"
    own.mkdir()
    shutil.copy2(BIN / "beam", own / "beam")
    monkeypatch.setenv("PATH", f"{own}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("GPURENT_STANDIN_STATE", str(stand_in.path))
    monkeypatch.delenv("BEAM_TOKEN", raising=False)
    stand_in.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30),
        eta=8 * 3600.0))
    stand_in.put("runs/exp1/weights/best.pt", os.urandom(4096))
    stand_in.put("runs/exp1/weights/last.pt", os.urandom(2048))
    return stand_in


def fleet_of_two(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                 client_key: KeyPair) -> FleetConfig:
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "ssh-box",
                                            runs_roots=[str(root)])],
                       known_hosts=[server.known_hosts_line()])
    return with_beam(fleet, local_dir=str(tmp_path / "pushed"))


def test_status_shows_the_box_and_the_beam_app(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        beam: BeamStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = json.loads(capsys.readouterr().out)
    (box,) = doc["boxes"]
    assert box["name"] == "ssh-box" and box["connection"] == "ok"
    (app,) = doc["serverless"]
    assert (app["name"], app["provider"], app["app"], app["state"], app["tasks"]) == \
        ("beam-yolo", "beam", "yolo-train", "running", 1)
    assert app["error"] is None and app["price_source"] == "beam published 2026-12-05"
    assert app["usd_per_gpu_second"] == H100_PER_SECOND
    (run,) = app["runs"]
    assert run["path"] == "runs/exp1" and run["health"] == "running"
    assert run["current_epoch"] == 3 and run["total_epochs"] == 40
    assert run["timeout_countdown"].startswith("killed by its 6 h timeout in 4h5")
    assert run["timeout_problem"].startswith("ETA 8h00m is past its 6 h timeout")
    assert 7000 < run["gpu_seconds"] < 7400  # an hour on 2 GPUs
    assert run["estimated_cost_usd"] == pytest.approx(run["gpu_seconds"] * H100_PER_SECOND,
                                                      rel=1e-3)
    assert sorted(w["name"] for w in run["weights"]) == ["best.pt", "last.pt"]
    # what was run: Beam's documented commands (docs/serverless-beam.md), nothing else
    calls = beam.calls()
    assert ["deployment", "list", "--format", "json", "--limit", "100",
            "--filter", "name=yolo-train"] in calls
    assert ["task", "list", "--format", "json", "--limit", "1000", "--filter",
            "status=running", "--filter", "stub-id=stub-1"] in calls
    assert ["ls", "runs-vol/runs"] in calls and ["ls", "runs-vol/runs/exp1/weights"] in calls
    assert ["cp", "beam://runs-vol/runs/exp1/status.json", "file"] in calls
    assert {c[0] for c in calls} <= {"--version", "deployment", "task", "ls", "cp"}

    assert main(["status", "--config", fleet.source]) == 0
    table = capsys.readouterr().out
    assert "ssh-box  [ok]" in table
    assert "beam-yolo  [beam app yolo-train: running (v1 active, function/deployment), " \
        "1 task]  H100:2" in table
    assert "! ETA 8h00m is past its 6 h timeout" in table
    assert "(estimate: GPU-seconds x $0.0019/s for H100:2, beam published 2026-12-05)" \
        in table


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


async def test_the_panel_shows_both_and_s_stops_the_beam_app_once_the_cli_says_so(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        beam: BeamStandIn) -> None:
    fleet = fleet_of_two(tmp_path, sshd_factory, client_key)
    # a stop marks the deployment inactive at once; its task runs on for 40 more calls
    beam.update(stop_delay=40)
    app = GpurentApp(fleet)
    app.runtime.serverless_seconds = 0.3
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "ssh-box"))
        await until(pilot, lambda: "yolo-train: running (v1 active" in
                    box_text(app, "beam-yolo"))
        text = box_text(app, "beam-yolo")
        assert "beam app yolo-train" in text and "H100:2" in text and "1 task" in text
        assert "exp1" in text and "ETA 8h00m is past its 6 h timeout" in text
        assert "est." in text
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)

        await select(pilot, screen, ("beam-yolo", "runs/exp1"))
        await pilot.press("p")  # the run's weights, copied from the Beam volume
        pushed = tmp_path / "pushed" / "beam-yolo" / "exp1"
        await until(pilot, lambda: any(e.get("action") == "push"
                                       for e in app.journal.entries))
        (push,) = [e for e in app.journal.entries if e.get("action") == "push"]
        assert push["outcome"] == "done" and push["verified"] is True, push["message"]
        assert push["run_path"] == "runs/exp1" and push["provider"] == "beam"
        for name in ("best.pt", "last.pt"):
            assert (pushed / name).read_bytes() == \
                (beam.volume_dir / "runs/exp1/weights" / name).read_bytes()
        copies = [c for c in beam.calls() if c[0] == "cp" and "weights" in c[1]]
        assert sorted(c[1] for c in copies) == \
            ["beam://runs-vol/runs/exp1/weights/best.pt"] * 2 + \
            ["beam://runs-vol/runs/exp1/weights/last.pt"] * 2  # each fetched twice
        await until(pilot, lambda: "beam-yolo" not in app.busy)

        await select(pilot, screen, ("beam-yolo", APP_ROW))
        await pilot.press("D")  # destroy does not apply: said, nothing run
        await until(pilot, lambda: any("destroy does not apply to a serverless app: s stops "
                                       "it" in n.message and "Beam's own console" in n.message
                                       for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)
        assert not any(c[:2] == ["deployment", "stop"] for c in beam.calls())

        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert "beam deployment stop <each active version of yolo-train>" in confirm.body
        assert "modal" not in confirm.body.lower() and "commit" not in confirm.body
        assert "what it saved there stays" in confirm.body  # a Beam volume has no commit
        await pilot.press("y")
        await until(pilot, lambda: any(c[:2] == ["deployment", "stop"] for c in beam.calls()))
        stops = [c for c in beam.calls() if c[:2] == ["deployment", "stop"]]
        assert stops == [["deployment", "stop", DEPLOYMENT_ID]]
        # inactive at once, its task still running: the row still reads running
        await until(pilot, lambda: "v1 inactive" in box_text(app, "beam-yolo"))
        head = box_text(app, "beam-yolo").split("\n")[0]
        assert "yolo-train: running (v1 inactive" in head and "1 task" in head
        await until(pilot, lambda: "yolo-train: stopped" in box_text(app, "beam-yolo"))
        assert beam.running_tasks() == []  # stopped on the row: the stand-in said so
        await until(pilot, lambda: any(e.get("action") == "stop" and e.get("box") ==
                                       "beam-yolo" for e in app.journal.entries))
        (entry,) = [e for e in app.journal.entries if e.get("action") == "stop"]
        assert entry["outcome"] == "done" and entry["app"] == "yolo-train"
        assert entry["provider"] == "beam"

        # the login lapses: the row says so in words, the last picture kept beside it
        beam.update(logged_in=False)
        await pilot.press("r")
        # the app's own line (a poll begun before the lapse may say it on a run's first)
        await until(pilot, lambda: "data below is" in box_text(app, "beam-yolo"))
        text = box_text(app, "beam-yolo")
        assert "log in with `beam config create` or set BEAM_TOKEN" in text
        assert "yolo-train: stopped" in text and "data below is" in text


def test_the_stop_command_stops_the_beam_app_and_start_and_destroy_do_not_apply(
        tmp_path: Path, beam: BeamStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[[serverless]]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                   for k, v in ENTRY.items()))
    assert main(["destroy", "beam-yolo", "--yes", "--config", str(config)]) == 2
    assert "destroy does not apply to a serverless app" in capsys.readouterr().err
    assert main(["start", "beam-yolo", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "`beam deploy`" in err and "modal" not in err
    assert main(["stop", "beam-yolo", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "beam deployment stop <each active version of yolo-train>: accepted" in out
    assert "yolo-train reads stopped (v1 inactive" in out
    assert beam.running_tasks() == [] and not beam.read()["deployments"][0].get("active")
    entries = Journal().entries
    assert [(e["box"], e["action"], e["outcome"]) for e in entries] == \
        [("beam-yolo", "stop", "done")]


# Beam's failure modes: (stand-in state, kind, words on the row and in status)
FAILURES = {
    "not logged in": ({"logged_in": False}, "not_logged_in",
                      "log in with `beam config create` or set BEAM_TOKEN"),
    "CLI too old": ({"version": "0.2.100"}, "cli_too_old",
                    "beam CLI 0.2.100 is older than 0.2.129"),
    "update required": ({"min_version": "0.3.0"}, "cli_too_old",
                        "upgrade with `pip install --upgrade beam-client`"),
}


def failing_config(tmp_path: Path) -> Path:
    config = tmp_path / "fleet.toml"
    config.write_text("[[serverless]]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                   for k, v in ENTRY.items()))
    return config


def row_text(config: Path, beam: BeamStandIn) -> str:
    """The Beam row as the panel's fleet list draws it, from one poll of the stand-in."""
    (entry,) = parse_config(config.read_text(), str(config)).serverless
    state = asyncio.run(poll_entry(entry, None, time.time))
    return "\n".join(line.text.plain for line in
                     app_lines(ServerlessView(state, entry), "", time.time()).lines)


def test_a_deleted_deployment_whose_runs_ended_is_at_rest_not_a_problem(
        tmp_path: Path, beam: BeamStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    """A deployment deleted after its run finished: its runs on the volume still read,
    ended; at rest, `status` exits 0. No deployment and no runs: still not found."""
    now = time.time()
    beam.put("runs/exp1/status.json", status_json(
        state="failed", epoch=7, total=40, started_at=iso(now - 7200),
        updated_at=iso(now - 3600), eta=None))
    beam.update(deployments=[], tasks=[])
    config = failing_config(tmp_path)
    row = row_text(config, beam)
    assert "beam app yolo-train: not listed any more (its runs ended)" in row, row
    assert "! " not in row, row
    assert main(["status", "--json", "--config", str(config)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["state"] == "missing" and app["problem"] is None
    assert [r["health"] for r in app["runs"]] == ["failed"]
    shutil.rmtree(beam.volume_dir / "runs" / "exp1")
    assert main(["status", "--config", str(config)]) == 1
    assert "! beam app yolo-train is missing: no deployment named yolo-train" in \
        capsys.readouterr().out


@pytest.mark.parametrize("mode", list(FAILURES))
def test_a_cli_failure_reads_as_clear_words_on_the_row_and_in_status(
        tmp_path: Path, beam: BeamStandIn, capsys: pytest.CaptureFixture[str],
        mode: str) -> None:
    changes, kind, words = FAILURES[mode]
    beam.update(**changes)
    config = failing_config(tmp_path)
    row = row_text(config, beam)
    assert "beam app yolo-train: not read yet" in row and "! beam " in row
    assert words in row, row
    assert main(["status", "--json", "--config", str(config)]) == 1
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["error_kind"] == kind and words in app["error"]
    assert app["state"] is None and app["runs"] == []
    assert main(["status", "--config", str(config)]) == 1
    table = capsys.readouterr().out
    assert "beam-yolo  [beam app yolo-train: not read]" in table and words in table


def test_no_deployment_by_the_name_reads_missing_and_says_only_deployed_apps_are_seen(
        tmp_path: Path, beam: BeamStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    """An app started with `beam run` or `.remote()` is no deployment: said, not a blank."""
    beam.update(deployments=[], tasks=[])
    config = failing_config(tmp_path)
    row = row_text(config, beam)
    assert "yolo-train: missing (no deployment named yolo-train; only deployed Beam apps " \
        "are seen (`beam deploy`))" in row, row
    main(["status", "--json", "--config", str(config)])
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["state"] == "missing" and "only deployed Beam apps" in app["app_detail"]
    assert main(["stop", "beam-yolo", "--config", str(config)]) != 0
    assert "no deployment named 'yolo-train'" in capsys.readouterr().out
    (entry,) = Journal().entries
    assert (entry["action"], entry["outcome"]) == ("stop", "failed")
    assert not any(c[:2] == ["deployment", "stop"] for c in beam.calls())


def test_a_missing_runs_path_or_volume_reads_as_such_on_the_row_and_in_status(
        tmp_path: Path, beam: BeamStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    """A volume that is there without the runs path yet is a note (exit 0); a volume that
    is not there at all is a problem (`!`, and status exits 1), as for Modal."""
    config = failing_config(tmp_path)
    (tmp_path / "empty").mkdir(exist_ok=True)
    beam.update(volumes={"runs-vol": str(tmp_path / "empty")})
    row = row_text(config, beam)
    assert "yolo-train: running" in row  # the app itself was read
    assert "no /runs on volume runs-vol yet" in row and "nothing there" in row, row
    assert main(["status", "--json", "--config", str(config)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["state"] == "running" and app["runs"] == []
    assert "nothing there" in app["runs_error"]
    main(["status", "--config", str(config)])
    table = capsys.readouterr().out
    assert "· no /runs on volume runs-vol yet" in table and "nothing there" in table

    beam.update(volumes={})
    row = row_text(config, beam)
    assert "yolo-train: running" in row
    assert "! volume runs-vol is missing" in row and "unable to find volume" in row, row
    assert main(["status", "--json", "--config", str(config)]) == 1
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["state"] == "running" and app["runs"] == []
    assert app["problem"].startswith("volume runs-vol is missing")
    main(["status", "--config", str(config)])
    assert "! volume runs-vol is missing" in capsys.readouterr().out


async def test_a_beam_file_changing_while_copied_is_not_kept(tmp_path: Path,
                                                             beam: BeamStandIn) -> None:
    """The push's own check, through Beam: two fetches that differ keep nothing."""
    beam.update(grow=["runs/exp1/weights/last.pt"])
    entry = ServerlessConfig(**{**ENTRY, "local_dir": str(tmp_path / "pushed")})
    (run,) = fold_runs((), [VolumeRead("runs/exp1", status_json().encode())], "/runs", 0.0)
    journal = Journal(tmp_path / "journal.jsonl")
    report = await push_run(entry, run, journal, time.time)
    assert report.code != 0
    assert any("last.pt: changed on the volume while it was copied" in x
               for x in report.lines), report.lines
    folder = tmp_path / "pushed" / "beam-yolo" / "exp1"
    assert (folder / "best.pt").read_bytes() == \
        (beam.volume_dir / "runs/exp1/weights/best.pt").read_bytes()
    assert not (folder / "last.pt").exists()
    (line,) = journal.entries
    assert line["outcome"] == "failed" and line["verified"] is False


def test_stopping_a_beam_app_never_shrinks_what_its_run_cost(tmp_path: Path,
                                                            beam: BeamStandIn) -> None:
    """Beam's lists carry no stop time (its ended task drops out of `task list
    --filter status=running`): the cost runs until the poll that saw it stopped."""
    from tui.model.serverless_view import judge_runs
    from tui.providers.beam_cli import stop_app

    entry = ServerlessConfig(**ENTRY)  # type: ignore[arg-type]
    clock = [time.time()]
    first = asyncio.run(poll_entry(entry, None, lambda: clock[0]))
    assert first.app is not None and first.app.state == "running"
    (shown,) = judge_runs(entry, first.app, first.runs, clock[0])
    assert shown.cost_usd is not None
    asyncio.run(stop_app("yolo-train"))
    clock[0] += 30
    second = asyncio.run(poll_entry(entry, first, lambda: clock[0]))
    assert second.app is not None and second.app.state == "stopped"
    assert beam.running_tasks() == [] and second.app.stopped_at == clock[0]
    clock[0] += 3600
    third = asyncio.run(poll_entry(entry, second, lambda: clock[0]))
    assert third.app is not None and third.app.stopped_at == clock[0] - 3600
    (after,) = judge_runs(entry, third.app, third.runs, clock[0])
    assert after.cost_usd is not None and after.cost_usd >= shown.cost_usd
