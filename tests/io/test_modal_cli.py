"""The Modal adapter against the `modal` stand-in on PATH: every documented success and
failure (not logged in, app not found, path missing, CLI too old, hangs, floods)."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from pathlib import Path

import pytest
from support.modal_standin import BIN, ModalStandIn

from tui.model.serverless import STOP_TIMEOUT, ServerlessError
from tui.providers import beam_cli, modal_cli


@pytest.fixture
def modal(tmp_path: Path) -> ModalStandIn:
    return ModalStandIn(tmp_path)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def kind_of(coro) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ServerlessError) as caught:
        asyncio.run(coro)
    return caught.value.kind, str(caught.value)


def test_app_state_reads_a_deployed_app(modal: ModalStandIn) -> None:
    state = run(modal_cli.app_state("yolo-train", env=modal.env))
    assert (state.provider, state.app, state.state, state.tasks) == \
        ("modal", "yolo-train", "running", 1)
    assert state.started_at == 1796450400.0  # 2026-12-05 06:00:00 UTC
    assert state.detail == "deployed"
    assert ["app", "list", "--json"] in modal.calls()


def test_an_app_the_list_does_not_name_is_missing(modal: ModalStandIn) -> None:
    state = run(modal_cli.app_state("other", env=modal.env))
    assert state.state == "missing" and "not in modal app list" in state.detail


def test_a_live_app_wins_over_an_older_stopped_one(modal: ModalStandIn) -> None:
    data = modal.read()
    data["apps"].insert(0, {"app_id": "ap-old", "description": "yolo-train",
                            "state": "stopped", "tasks": "0",
                            "created_at": "2026-12-01 06:00:00+00:00", "stopped_at": None})
    modal.write(data)
    assert run(modal_cli.app_state("yolo-train", env=modal.env)).state == "running"


def test_stop_reads_stopped_only_once_the_cli_says_so(modal: ModalStandIn) -> None:
    modal.app(stop_after=1)
    assert run(modal_cli.stop_app("yolo-train", env=modal.env)) is None  # accepted
    assert ["app", "stop", "--yes", "--", "yolo-train"] in modal.calls()
    first = run(modal_cli.app_state("yolo-train", env=modal.env))
    assert (first.state, first.detail) == ("running", "stopping...")
    stopped = run(modal_cli.app_state("yolo-train", env=modal.env))
    assert stopped.state == "stopped" and stopped.stopped_at is not None
    # already stopped: no failure, and said so
    said = run(modal_cli.stop_app("yolo-train", env=modal.env))
    assert said is not None and "already stopped" in said


def test_a_stop_the_cli_answers_already_stopped_is_reported_so(
        modal: ModalStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app stopped between the action's look and its stop: not "accepted"."""
    from tui.actions.serverless import stop_app
    from tui.model.config import ServerlessConfig
    from tui.runtime.serverless import poll_entry
    from tui.store.journal import Journal

    entry = ServerlessConfig(name="m", provider="modal", app="yolo-train", volume="runs-vol",
                             runs_path="/runs", gpu="H100", cli=str(BIN / "modal"))
    looks = []

    async def poll():  # type: ignore[no-untyped-def]
        looks.append(await poll_entry(entry, None, time.time, env=modal.env))
        if len(looks) == 1:
            modal.app(state="stopped", tasks="0")  # stopped elsewhere, just after the look
        return looks[-1]

    monkeypatch.setenv("GPURENT_STANDIN_STATE", str(modal.path))  # the action's own env
    report = run(stop_app(entry, Journal(tmp_path / "j.jsonl"), poll, time.time, every=0.05))
    text = "\n".join(report.lines)
    assert "yolo-train was already stopped" in text and "accepted" not in text
    assert report.outcome == "done" and "reads stopped" in text


def test_stop_of_an_unknown_app_is_app_not_found(modal: ModalStandIn) -> None:
    kind, words = kind_of(modal_cli.stop_app("nope", env=modal.env))
    assert kind == "app_not_found" and "No App with name 'nope'" in words
    assert "\u2502" not in words and "\u256d" not in words  # rich's box is gone


def test_not_logged_in_is_said_with_the_fix(modal: ModalStandIn) -> None:
    modal.update(logged_in=False)
    for call in (modal_cli.app_state("yolo-train", env=modal.env),
                 modal_cli.list_volume("runs-vol", "/", env=modal.env),
                 modal_cli.stop_app("yolo-train", env=modal.env)):
        kind, words = kind_of(call)
        assert kind == "not_logged_in" and "modal token new" in words


def test_a_cli_too_old_is_refused_before_its_output_is_read(modal: ModalStandIn) -> None:
    modal.update(version="1.4.2")
    kind, words = kind_of(modal_cli.app_state("yolo-train", env=modal.env))
    assert kind == "cli_too_old" and "1.4.2" in words and "1.5.0" in words
    modal.update(version="1.5.0")  # an upgrade in place is seen on the next call
    assert run(modal_cli.app_state("yolo-train", env=modal.env)).state == "running"


def test_no_cli_on_path_is_cli_missing(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "GPURENT_STANDIN_STATE": str(tmp_path / "none.json")}
    kind, words = kind_of(modal_cli.app_state("x", env=env))
    assert kind == "cli_missing" and "not on PATH" in words
    missing = tmp_path / "nowhere" / "modal"
    kind, words = kind_of(modal_cli.app_state("x", cli=str(missing), env=env))
    assert kind == "cli_missing" and f"not found at {missing}" in words
    assert "not on PATH" not in words  # a path that is not there is no PATH lookup


def test_an_explicit_cli_path_is_used(modal: ModalStandIn) -> None:
    env = {**modal.env, "PATH": "/usr/bin:/bin"}
    state = run(modal_cli.app_state("yolo-train", cli=str(BIN / "modal"), env=env))
    assert state.state == "running"


def test_volume_listing_and_reading(modal: ModalStandIn) -> None:
    modal.put("runs/exp1/status.json", '{"a": 1}')
    modal.put("runs/exp1/weights/best.pt", b"\0" * 3000)
    entries = run(modal_cli.list_volume("runs-vol", "runs", env=modal.env))
    assert [(e.path, e.is_dir) for e in entries] == [("runs/exp1", True)]
    weights = run(modal_cli.list_volume("runs-vol", "runs/exp1/weights", env=modal.env))
    assert weights[0].path == "runs/exp1/weights/best.pt"
    assert weights[0].size == int(2.9 * 1024)  # "2.9 KiB": as the CLI rounded it
    assert weights[0].mtime is not None
    assert run(modal_cli.read_volume_file("runs-vol", "runs/exp1/status.json",
                                          env=modal.env)) == b'{"a": 1}'


def test_a_missing_volume_path_is_path_missing(modal: ModalStandIn) -> None:
    for call in (modal_cli.list_volume("runs-vol", "runs/none", env=modal.env),
                 modal_cli.read_volume_file("runs-vol", "runs/none/status.json",
                                            env=modal.env),
                 modal_cli.list_volume("no-such-volume", "/", env=modal.env)):
        kind, words = kind_of(call)
        assert kind == "path_missing"
        assert "not found" in words or "No such file" in words


def test_a_file_over_the_limit_is_not_read(modal: ModalStandIn) -> None:
    modal.put("big.json", b"x" * 5000)
    kind, words = kind_of(modal_cli.read_volume_file("runs-vol", "big.json", limit=4096,
                                                     env=modal.env))
    assert kind == "failed" and "larger than 4096" in words


def beside(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir())


def test_fetch_copies_the_file(modal: ModalStandIn, tmp_path: Path) -> None:
    data = bytes(range(256)) * 100
    modal.put("runs/exp1/weights/best.pt", data)
    dest = tmp_path / "out" / "best.pt.part"
    dest.parent.mkdir()
    dest.write_bytes(b"stale")
    run(modal_cli.fetch_volume_file("runs-vol", "runs/exp1/weights/best.pt", dest,
                                    env=modal.env))
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert beside(dest) == ["best.pt.part"]  # no temporary name left beside it
    get = next(c for c in modal.calls() if c[:2] == ["volume", "get"])
    assert Path(get[-1]).parent.parent == dest.parent  # in a fresh folder beside dest


def test_a_failed_fetch_keeps_a_good_dest_and_leaves_nothing_beside(
        modal: ModalStandIn, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "best.pt"
    dest.parent.mkdir()
    dest.write_bytes(b"good")
    kind, _ = kind_of(modal_cli.fetch_volume_file("runs-vol", "runs/none.pt", dest,
                                                  env=modal.env))
    assert kind == "path_missing" and dest.read_bytes() == b"good"
    assert beside(dest) == ["best.pt"]


def test_a_torn_download_never_lands_at_dest(modal: ModalStandIn, tmp_path: Path) -> None:
    """The CLI writes half the file and dies: no part at dest, a good dest untouched."""
    modal.put("runs/exp1/weights/last.pt", b"x" * 100_000)
    modal.update(torn=["runs/exp1/weights/last.pt"])
    dest = tmp_path / "out" / "last.pt"
    kind, words = kind_of(modal_cli.fetch_volume_file("runs-vol", "runs/exp1/weights/last.pt",
                                                      dest, env=modal.env))
    assert kind == "failed" and "Connection lost" in words
    assert beside(dest) == []  # no half file at dest, no temporary one beside it
    dest.write_bytes(b"good")
    kind_of(modal_cli.fetch_volume_file("runs-vol", "runs/exp1/weights/last.pt", dest,
                                        env=modal.env))
    assert dest.read_bytes() == b"good" and beside(dest) == ["last.pt"]


def test_a_fetch_cut_at_its_timeout_keeps_a_good_dest(modal: ModalStandIn,
                                                      tmp_path: Path) -> None:
    modal.put("runs/exp1/weights/best.pt", b"new")
    modal.update(hang={"volume get": 30})
    dest = tmp_path / "out" / "best.pt"
    dest.parent.mkdir()
    dest.write_bytes(b"good")
    kind, words = kind_of(modal_cli.fetch_volume_file(
        "runs-vol", "runs/exp1/weights/best.pt", dest, env=modal.env, timeout=1.5))
    assert kind == "failed" and "1.5 s" in words
    assert dest.read_bytes() == b"good" and beside(dest) == ["best.pt"]


def test_stop_shares_the_adapters_timeout_and_is_cut_at_it(modal: ModalStandIn) -> None:
    assert inspect.signature(modal_cli.stop_app).parameters["timeout"].default == \
        STOP_TIMEOUT == inspect.signature(beam_cli.stop_app).parameters["timeout"].default
    modal.update(hang={"app stop": 30})
    kind, words = kind_of(modal_cli.stop_app("yolo-train", env=modal.env, timeout=1.5))
    assert kind == "failed" and "did not finish within 1.5 s" in words


def test_a_hanging_cli_is_cut_at_its_timeout(modal: ModalStandIn) -> None:
    modal.update(hang={"app list": 30})
    kind, words = kind_of(modal_cli.app_state("yolo-train", env=modal.env, timeout=1.5))
    assert kind == "failed" and "did not finish within 1.5 s" in words


def test_a_flood_on_stdout_is_cut_at_4_mib(modal: ModalStandIn) -> None:
    modal.update(flood={"app list": (4 << 20) + 10})
    kind, words = kind_of(modal_cli.app_state("yolo-train", env=modal.env))
    assert kind == "failed" and "printed more than" in words


def test_hostile_output_is_cleaned(modal: ModalStandIn) -> None:
    modal.app(state="\x1b]0;pwned\x07deployed\x1b[31m", tasks="9" * 5000)
    state = run(modal_cli.app_state("yolo-train", env=modal.env))
    assert state.detail == "deployed" and state.state == "running"  # sequences gone whole
    assert state.tasks is None  # 5000 digits are no count
    modal.app(state="x" * 9000 + "\x00")
    state = run(modal_cli.app_state("yolo-train", env=modal.env))
    assert state.state == "unknown" and len(state.detail) <= 200
    assert "\x00" not in state.detail
