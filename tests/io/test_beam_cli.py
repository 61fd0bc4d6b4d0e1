"""The Beam adapter (tui/providers/beam_cli.py) against the stand-in `beam` CLI.

Every call is a real subprocess: tests/support/bin/beam, first on the PATH of the
subprocess's environment only, keeps its world in the JSON file named by
GPURENT_STANDIN_STATE and follows the real CLI's command shapes and outputs
(docs/serverless-beam.md). Hostile answers (10 MB, escape sequences, broken JSON, a
CLI that hangs) must come back bounded, cleaned, and as a clear error.
"""

from __future__ import annotations

import importlib.util
import inspect
import io
import json
import os
import shutil
import time
from datetime import UTC, datetime
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Column, Table, box

from tui.model.serverless import APP_STATES, STOP_TIMEOUT, ServerlessError, VolumeEntry
from tui.providers import beam_cli

BIN = Path(__file__).resolve().parents[1] / "support" / "bin"
STANDIN = BIN / "beam"
STARTED = "2026-12-05T06:00:00.250000Z"
STARTED_EPOCH = datetime(2026, 12, 5, 6, 0, 0, 250000, tzinfo=UTC).timestamp()


def deployments() -> list[dict[str, Any]]:
    return [
        {"id": "5bd2e248-6d7c-417b-ac7b-0b92aa0a5572", "name": "trainer", "active": True,
         "version": 3, "stub_id": "stub-3", "stub_type": "function/deployment",
         "stub_name": "function/deployment/trainer:train", "workspace_name": "me",
         "created_at": "2026-12-05T05:59:00Z", "updated_at": "2026-12-05T05:59:00Z"},
        {"id": "7b968ad5-c001-4df3-ba05-e99895aa9596", "name": "trainer", "active": False,
         "version": 2, "stub_id": "stub-2", "stub_type": "function/deployment",
         "created_at": "2026-12-04T05:59:00Z", "updated_at": "2026-12-04T07:00:00Z"},
        {"id": "0a0a0a0a-0000-4000-8000-000000000000", "name": "other", "active": True,
         "version": 1, "stub_id": "stub-other"},
    ]


def tasks() -> list[dict[str, Any]]:
    zero = "0001-01-01T00:00:00Z"
    return [
        {"id": "t1", "status": "RUNNING", "stub_id": "stub-3", "started_at": STARTED,
         "ended_at": zero},
        {"id": "t2", "status": "RUNNING", "stub_id": "stub-3",
         "started_at": "2026-12-05T06:30:00Z", "ended_at": zero},
        {"id": "t3", "status": "COMPLETE", "stub_id": "stub-3",
         "started_at": "2026-12-05T05:00:00Z", "ended_at": "2026-12-05T05:10:00Z"},
        {"id": "t4", "status": "RUNNING", "stub_id": "stub-other", "started_at": STARTED},
        {"id": "t5", "status": "PENDING", "stub_id": "stub-3", "started_at": zero},
    ]


class World:
    """The stand-in's state file and the environment that finds it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_path = root / "beam-state.json"
        self.volume = root / "vol"
        (self.volume / "runs" / "exp1" / "weights").mkdir(parents=True)
        (self.volume / "runs" / "exp1" / "status.json").write_text('{"epoch": 4}')
        (self.volume / "runs" / "exp1" / "weights" / "best.pt").write_bytes(b"\x00w" * 3000)
        (self.volume / "runs" / "exp2").mkdir()
        self.state: dict[str, Any] = {
            "version": "0.2.207", "logged_in": True, "deployments": deployments(),
            "tasks": tasks(), "volumes": {"cache": str(self.volume)}, "file_service": True}
        self.save()
        self.env = {k: v for k, v in os.environ.items() if k != "BEAM_TOKEN"}
        self.env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        self.env["GPURENT_STANDIN_STATE"] = str(self.state_path)

    def save(self) -> None:
        self.state_path.write_text(json.dumps(self.state))

    def set(self, **changes: Any) -> None:
        self.state.update(changes)
        self.save()

    def read(self) -> dict[str, Any]:
        return dict(json.loads(self.state_path.read_text()))

    def calls(self) -> list[list[str]]:
        return list(self.read().get("calls", []))

    def own_copy(self) -> str:
        """The stand-in at a path of its own: a separate install, its version read anew."""
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        target = bin_dir / "beam"
        shutil.copy2(STANDIN, target)
        return str(target)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def no_controls(text: str) -> bool:
    return not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in text)


# app_state


async def test_a_running_app_counts_its_running_tasks_and_starts_at_the_earliest(
        world: World) -> None:
    state = await beam_cli.app_state("trainer", env=world.env)
    assert state.provider == "beam" and state.app == "trainer"
    assert state.state == "running" and state.state in APP_STATES
    assert state.tasks == 2  # t1, t2: not the finished, pending or other app's tasks
    assert state.started_at == pytest.approx(STARTED_EPOCH)
    assert "v3 active" in state.detail and len(state.detail) <= 200
    list_call = next(c for c in world.calls() if c[:2] == ["deployment", "list"])
    assert list_call == ["deployment", "list", "--format", "json", "--limit", "100",
                         "--filter", "name=trainer"]
    task_call = next(c for c in world.calls() if c[:2] == ["task", "list"])
    assert "status=running" in task_call and "stub-id=stub-3,stub-2" in task_call


async def test_an_app_with_no_active_version_and_no_running_task_is_stopped(
        world: World) -> None:
    for dep in world.state["deployments"]:
        dep["active"] = False
    world.state["tasks"] = [t for t in world.state["tasks"] if t["stub_id"] != "stub-3"]
    world.save()
    state = await beam_cli.app_state("trainer", env=world.env)
    assert (state.state, state.tasks, state.started_at) == ("stopped", 0, None)
    assert "inactive" in state.detail


async def test_an_inactive_deployment_whose_task_still_runs_reads_running(world: World) -> None:
    world.state["deployments"][0]["active"] = False
    world.save()
    state = await beam_cli.app_state("trainer", env=world.env)
    assert state.state == "running" and state.tasks == 2


async def test_an_app_no_deployment_is_named_is_missing(world: World) -> None:
    state = await beam_cli.app_state("nobody", env=world.env)
    assert state.state == "missing" and state.tasks is None
    assert not any(c[:2] == ["task", "list"] for c in world.calls())


async def test_not_logged_in_is_said_and_the_prompt_does_not_wait(world: World) -> None:
    world.set(logged_in=False)
    started = time.monotonic()
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env, cli=world.own_copy())
    assert caught.value.kind == "not_logged_in"
    assert "beam config create" in str(caught.value)
    assert time.monotonic() - started < 10


async def test_beam_token_in_the_environment_is_a_login_and_never_in_argv(
        world: World) -> None:
    world.set(logged_in=False)
    env = dict(world.env, BEAM_TOKEN="tok-" + "s" * 60)
    state = await beam_cli.app_state("trainer", env=env)
    assert state.state == "running"
    assert not any("tok-" in arg for call in world.calls() for arg in call)


async def test_a_token_the_cli_repeats_is_starred_in_the_error(world: World) -> None:
    token = "bm_" + "Zk3rT9pLmQ2vX8" * 5
    world.set(mode="echo_token")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=dict(world.env, BEAM_TOKEN=token),
                                 cli=world.own_copy())
    assert caught.value.kind == "failed" and "Unable to connect" in str(caught.value)
    assert token not in str(caught.value) and token[:20] not in str(caught.value)


async def test_a_cli_not_on_path_is_cli_missing(world: World, tmp_path: Path) -> None:
    env = dict(world.env, PATH=str(tmp_path / "empty"))
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=env)
    assert caught.value.kind == "cli_missing" and "beam-client" in str(caught.value)
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.stop_app("trainer", env=world.env, cli=str(tmp_path / "no" / "beam"))
    assert caught.value.kind == "cli_missing"


async def test_a_cli_older_than_the_minimum_is_too_old(world: World) -> None:
    world.set(version="0.2.128")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env, cli=world.own_copy())
    assert caught.value.kind == "cli_too_old"
    assert "0.2.128" in str(caught.value) and "0.2.129" in str(caught.value)
    assert world.calls() == [["--version"]]


async def test_the_servers_update_required_is_too_old(world: World) -> None:
    world.set(min_version="0.3.0")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env)
    assert caught.value.kind == "cli_too_old" and "upgrade" in str(caught.value)


async def test_broken_json_is_a_failure_not_a_short_list(world: World) -> None:
    world.set(mode="broken_json")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env)
    assert caught.value.kind == "failed" and "JSON" in str(caught.value)


async def test_ten_megabytes_on_stdout_is_refused_at_the_cap(world: World) -> None:
    world.set(mode="flood")
    started = time.monotonic()
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env, cli=world.own_copy())
    assert caught.value.kind == "failed" and "4 MiB" in str(caught.value)
    assert len(str(caught.value)) < 300
    assert time.monotonic() - started < 10


async def test_ten_megabytes_on_stderr_keeps_only_its_last_line(world: World) -> None:
    world.set(mode="flood_stderr")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env, cli=world.own_copy())
    assert caught.value.kind == "failed"
    assert str(caught.value).endswith("the last line") and len(str(caught.value)) < 300


async def test_a_cli_that_hangs_is_stopped_at_the_timeout(world: World) -> None:
    world.set(mode="hang")
    started = time.monotonic()
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state("trainer", env=world.env, timeout=1.5)
    assert caught.value.kind == "failed" and "1.5 s" in str(caught.value)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("name", ["", "-rf", "a=b", "a,b", "bad\x1b[2Jname", " pad"])
async def test_an_app_name_the_cli_would_misread_is_refused(world: World, name: str) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.app_state(name, env=world.env)
    assert caught.value.kind == "failed" and no_controls(str(caught.value))
    assert world.calls() == []


# stop_app


async def test_stop_reads_stopped_only_once_the_cli_says_so(world: World) -> None:
    world.set(stop_delay=3)
    await beam_cli.stop_app("trainer", env=world.env)
    stop = [c for c in world.calls() if c[:2] == ["deployment", "stop"]]
    assert stop == [["deployment", "stop", "5bd2e248-6d7c-417b-ac7b-0b92aa0a5572"]]
    seen = []
    for _ in range(3):
        seen.append((await beam_cli.app_state("trainer", env=world.env)).state)
    assert seen[0] == "running" and seen[-1] == "stopped"
    final = await beam_cli.app_state("trainer", env=world.env)
    assert (final.state, final.tasks) == ("stopped", 0)


async def test_stopping_a_stopped_app_asks_nothing_more(world: World) -> None:
    await beam_cli.stop_app("trainer", env=world.env)
    assert (await beam_cli.app_state("trainer", env=world.env)).state == "stopped"
    before = len([c for c in world.calls() if c[:2] == ["deployment", "stop"]])
    await beam_cli.stop_app("trainer", env=world.env)
    after = len([c for c in world.calls() if c[:2] == ["deployment", "stop"]])
    assert before == after == 1


async def test_stopping_an_app_no_deployment_is_named_is_app_not_found(world: World) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.stop_app("nobody", env=world.env)
    assert caught.value.kind == "app_not_found" and "nobody" in str(caught.value)


async def test_a_stop_refused_with_exit_0_is_still_an_error(world: World) -> None:
    """The CLI prints a cross for a refused stop and exits 0: the adapter checks each id.

    Here the deployment is listed, then gone by the time of the stop."""
    script = world.root / "bin" / "beam"
    script.parent.mkdir(exist_ok=True)
    script.write_text(STANDIN.read_text().replace(
        'dep = next((d for d in state.get("deployments", []) if d["id"] == ident), None)',
        "dep = None"))
    script.chmod(0o755)
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.stop_app("trainer", env=world.env, cli=str(script))
    assert caught.value.kind == "app_not_found" and "Deployment not found" in str(caught.value)


# list_volume


async def test_a_folder_lists_its_files_and_folders_with_their_paths(world: World) -> None:
    entries = await beam_cli.list_volume("cache", "runs/exp1", env=world.env)
    by_path = {e.path: e for e in entries}
    assert set(by_path) == {"runs/exp1/status.json", "runs/exp1/weights"}
    assert by_path["runs/exp1/weights"].is_dir and by_path["runs/exp1/weights"].size is None
    status = by_path["runs/exp1/status.json"]
    assert not status.is_dir and status.size == 12
    assert status.mtime is not None and abs(status.mtime - time.time()) < 120
    assert ["ls", "cache/runs/exp1"] in world.calls()


async def test_an_age_in_words_carries_how_far_its_time_may_be_off(world: World) -> None:
    """`5 minutes ago` is read against our clock: its time is good to its unit (60 s)."""
    best = world.volume / "runs" / "exp1" / "weights" / "best.pt"
    true = time.time() - 330
    os.utime(best, (true, true))
    (entry,) = await beam_cli.list_volume("cache", "runs/exp1/weights", env=world.env)
    assert entry.mtime_slack == 60 and entry.mtime is not None
    assert true - 1 <= entry.mtime <= true + entry.mtime_slack
    (status,) = [e for e in await beam_cli.list_volume("cache", "runs/exp1", env=world.env)
                 if e.path.endswith("status.json")]
    assert status.mtime_slack <= 2  # `just now` / `N seconds ago`


async def test_the_root_and_leading_slashes_list_alike(world: World) -> None:
    root = await beam_cli.list_volume("cache", "/", env=world.env)
    assert root == [VolumeEntry("runs", True, None, root[0].mtime, root[0].mtime_slack)]
    runs = await beam_cli.list_volume("cache", "/runs/", env=world.env)
    assert {e.path for e in runs} == {"runs/exp1", "runs/exp2"}


async def test_sizes_are_read_back_from_the_clis_rounding(world: World) -> None:
    (world.volume / "big.bin").write_bytes(b"\x00" * (3 * 1024 * 1024 + 5000))
    entries = await beam_cli.list_volume("cache", "", env=world.env)
    big = next(e for e in entries if e.path == "big.bin")
    assert big.size == pytest.approx(3 * 1024 * 1024 + 5000, rel=0.005)


async def test_a_missing_volume_or_path_is_path_missing(world: World) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.list_volume("nosuch", "runs", env=world.env)
    assert caught.value.kind == "path_missing" and "unable to find volume" in str(caught.value)
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.list_volume("cache", "runs/nothing", env=world.env)
    assert caught.value.kind == "path_missing"


async def test_names_with_escapes_and_wide_characters_come_back_cleaned(world: World) -> None:
    folder = world.volume / "odd"
    folder.mkdir()
    (folder / "a\x1b[31mred").write_text("x")
    (folder / "日本語の重み.pt").write_text("yy")
    (folder / "with space 1.00 B").mkdir()
    entries = await beam_cli.list_volume("cache", "odd", env=world.env)
    paths = {e.path: e for e in entries}
    assert "odd/日本語の重み.pt" in paths and paths["odd/日本語の重み.pt"].size == 2
    assert paths["odd/with space 1.00 B"].is_dir
    assert "odd/ared" in paths and all(no_controls(p) for p in paths)


async def test_a_glob_character_in_a_path_is_refused_not_expanded(world: World) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.list_volume("cache", "runs/*", env=world.env)
    assert caught.value.kind == "failed"
    with pytest.raises(ServerlessError):
        await beam_cli.list_volume("cache", "../etc", env=world.env)
    assert world.calls() == []


async def test_an_error_line_with_escape_sequences_comes_back_clean(world: World) -> None:
    world.set(mode="escapes")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.list_volume("nosuch", "runs", env=world.env)
    assert caught.value.kind == "path_missing" and no_controls(str(caught.value))
    assert "owned" not in str(caught.value)


async def test_a_table_that_does_not_add_up_is_a_failure(world: World, tmp_path: Path) -> None:
    fake = tmp_path / "bin2" / "beam"
    fake.parent.mkdir()
    fake.write_text(STANDIN.read_text().replace(
        'print(table(rows, f"{len(rows)} items', 'print(table(rows[:-1], f"{len(rows)} items'))
    fake.chmod(0o755)
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.list_volume("cache", "runs", env=world.env, cli=str(fake))
    assert caught.value.kind == "failed" and "counts 2 items" in str(caught.value)


def test_the_stand_ins_table_is_the_one_the_clis_renderer_draws() -> None:
    """The stand-in lays out `beam ls` by hand; rich (which the CLI prints with, at the
    width COLUMNS gives) must draw the very same text for the same rows."""
    loader = SourceFileLoader("beam_standin", str(STANDIN))
    spec = importlib.util.spec_from_loader("beam_standin", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    os.environ.setdefault("GPURENT_STANDIN_STATE", "/nonexistent")
    loader.exec_module(module)
    rows = [("exp1/", "", "2 hours ago", "Yes"), ("status.json", "1.21 KiB", "just now", "No"),
            ("重み 日本.pt", "12.00 MiB", "Dec 01 2026", "No")]
    footer = "3 items | 13.21 MiB used"
    out = io.StringIO()
    table = Table(Column("Name"), Column("Size", justify="right"), Column("Modified Time"),
                  Column("IsDir"), box=box.SIMPLE)
    for row in rows:
        table.add_row(*row)
    table.add_section()
    table.add_row(footer)
    Console(file=out, width=4096).print(table)
    assert module.table(rows, footer) == out.getvalue().rstrip("\n")


# read_volume_file, fetch_volume_file


async def test_a_small_file_is_read_whole(world: World) -> None:
    data = await beam_cli.read_volume_file("cache", "runs/exp1/status.json", env=world.env)
    assert data == b'{"epoch": 4}'
    cp = next(c for c in world.calls() if c[0] == "cp")
    assert cp == ["cp", "beam://cache/runs/exp1/status.json", "file"]


async def test_a_file_over_the_limit_is_refused(world: World) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.read_volume_file("cache", "runs/exp1/weights/best.pt", limit=1000,
                                        env=world.env)
    assert caught.value.kind == "failed" and "1000 bytes" in str(caught.value)


async def test_reading_a_missing_file_or_volume_is_path_missing(world: World) -> None:
    for volume, path in (("cache", "runs/exp1/nope.json"), ("nosuch", "a.json")):
        with pytest.raises(ServerlessError) as caught:
            await beam_cli.read_volume_file(volume, path, env=world.env)
        assert caught.value.kind == "path_missing", str(caught.value)
        assert no_controls(str(caught.value))


async def test_reading_a_folder_is_a_failure(world: World) -> None:
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.read_volume_file("cache", "runs/exp1", env=world.env)
    assert caught.value.kind == "failed" and "folder" in str(caught.value)


async def test_without_the_file_service_a_download_is_refused_clearly(world: World) -> None:
    world.set(file_service=False)
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.read_volume_file("cache", "runs/exp1/status.json", env=world.env)
    assert caught.value.kind == "failed" and "multipart" in str(caught.value)


async def test_a_fetch_lands_whole_at_dest_and_leaves_nothing_else(world: World,
                                                                   tmp_path: Path) -> None:
    dest = tmp_path / "out" / "best.pt"
    await beam_cli.fetch_volume_file("cache", "runs/exp1/weights/best.pt", dest, env=world.env)
    assert dest.read_bytes() == b"\x00w" * 3000
    assert sorted(p.name for p in dest.parent.iterdir()) == ["best.pt"]


async def test_a_failed_fetch_leaves_dest_as_it_was(world: World, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "best.pt"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.fetch_volume_file("cache", "runs/exp1/weights/gone.pt", dest,
                                         env=world.env)
    assert caught.value.kind == "path_missing"
    assert dest.read_bytes() == b"old"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["best.pt"]


async def test_a_torn_download_never_lands_at_dest(world: World, tmp_path: Path) -> None:
    """The CLI writes half the file and dies: no part at dest, a good dest untouched, no
    temporary folder left beside it."""
    world.set(torn=["runs/exp1/weights/best.pt"])
    dest = tmp_path / "out" / "best.pt"
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.fetch_volume_file("cache", "runs/exp1/weights/best.pt", dest,
                                         env=world.env)
    assert caught.value.kind == "failed" and "connection reset" in str(caught.value)
    assert list(dest.parent.iterdir()) == []
    dest.write_bytes(b"good")
    with pytest.raises(ServerlessError):
        await beam_cli.fetch_volume_file("cache", "runs/exp1/weights/best.pt", dest,
                                         env=world.env)
    assert dest.read_bytes() == b"good"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["best.pt"]


async def test_a_fetch_cut_at_its_timeout_keeps_a_good_dest(world: World,
                                                            tmp_path: Path) -> None:
    dest = tmp_path / "out" / "best.pt"
    dest.parent.mkdir()
    dest.write_bytes(b"good")
    world.set(mode="hang")
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.fetch_volume_file("cache", "runs/exp1/weights/best.pt", dest,
                                         env=world.env, timeout=1.5, cli=world.own_copy())
    assert caught.value.kind == "failed" and "1.5 s" in str(caught.value)
    assert dest.read_bytes() == b"good"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["best.pt"]


async def test_stop_shares_the_adapters_timeout_and_is_cut_at_it(world: World) -> None:
    assert inspect.signature(beam_cli.stop_app).parameters["timeout"].default == STOP_TIMEOUT
    await beam_cli.app_state("trainer", env=world.env)  # its version known: the stop hangs
    world.set(mode="hang")
    started = time.monotonic()
    with pytest.raises(ServerlessError) as caught:
        await beam_cli.stop_app("trainer", env=world.env, timeout=1.5)
    assert caught.value.kind == "failed" and "within 1.5 s" in str(caught.value)
    assert time.monotonic() - started < 10
