"""Whole actions end to end: the guard, push-verify-destroy, headless commands and exit codes.

Real sshd boxes on 127.0.0.1, a loopback Vast API, local-folder pushes over SFTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd
from support.token_box import received_text, recording_python

from tui.__main__ import main
from tui.store.jsonl import read_jsonl

Factory = Callable[..., Sshd]


@pytest.fixture
def vast(monkeypatch: pytest.MonkeyPatch) -> Iterator[VastServer]:
    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    monkeypatch.delenv("VAST_URL", raising=False)
    server = VastServer("vast-secret-key", [vast_instance(12345678)])
    server.start()
    yield server
    server.close()


def box_with_weights(tmp_path: Path, server: Sshd, key: KeyPair, vast: VastServer,
                     **extra: object) -> tuple[Path, str]:
    root = runs_root_with(tmp_path, "yolox_completed")
    weights = root / "yolox_completed" / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"b" * 50_000)
    (weights / "last.pt").write_bytes(b"l" * 60_000)
    fleet = make_fleet(tmp_path, [box_entry(server, key, "gpu-a", runs_roots=[str(root)],
                                            provider="vast", instance_id="12345678", **extra)],
                       known_hosts=[server.known_hosts_line()],
                       providers={"vast": {"base_url": vast.url}})
    return root, fleet.source


def journal(isolated_dirs: Path) -> list[dict[str, object]]:
    return read_jsonl(isolated_dirs / "state" / "gpurent-tui" / "journal.jsonl")[0]


def test_destroy_is_refused_with_unpushed_weights_then_forced(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast)
    assert main(["destroy", "gpu-a", "--config", config]) == 2  # no --yes
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    out = capsys.readouterr().out
    assert "refused" in out and "weights/best.pt" in out and "weights/last.pt" in out
    assert vast.count("DELETE") == 0
    assert main(["destroy", "gpu-a", "--yes", "--force-unpushed", "--config", config]) == 0
    out = capsys.readouterr().out
    assert "overriding the guard" in out and "destroy gpu-a: done" in out
    assert vast.count("DELETE") == 1
    actions = [(e["action"], e["outcome"]) for e in journal(isolated_dirs)]
    assert actions == [("destroy", "refused"), ("destroy", "done")]
    assert "vast-secret-key" not in json.dumps(journal(isolated_dirs))


def test_push_verify_then_destroy_is_one_action(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    out_dir = tmp_path / "checkpoints"
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(out_dir)})
    assert main(["destroy", "gpu-a", "--yes", "--push-first", "--config", config]) == 0
    printed = capsys.readouterr().out
    assert "verified" in printed and "destroy gpu-a: done" in printed
    pushed = out_dir / "gpu-a" / "yolox_completed" / "weights" / "best.pt"
    assert pushed.read_bytes() == (root / "yolox_completed" / "weights" / "best.pt").read_bytes()
    entries = journal(isolated_dirs)
    assert [(e["action"], e["outcome"]) for e in entries] == [("push", "done"),
                                                              ("destroy", "done")]
    assert entries[0]["verified"] is True
    assert {f["name"] for f in entries[0]["files"]} >= {"weights/best.pt", "weights/last.pt"}
    assert all(len(f["sha256"]) == 64 for f in entries[0]["files"])


def test_pushed_then_changed_weights_block_destroy_again(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(tmp_path / "out")})
    assert main(["push", "gpu-a", "--config", config]) == 0
    assert "verified" in capsys.readouterr().out
    best = root / "yolox_completed" / "weights" / "best.pt"
    best.write_bytes(b"newer" * 20_000)  # training went on and improved
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    out = capsys.readouterr().out
    assert "best.pt changed since the last verified push" in out
    assert vast.count("DELETE") == 0


def test_headless_push_errors_and_stop_start(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"local_dir": str(tmp_path / "out")})
    assert main(["push", "gpu-a", "no-such-run", "--config", config]) == 1
    assert "no run named no-such-run on box gpu-a (runs: yolox_completed)" in \
        capsys.readouterr().out
    assert main(["push", "nobox", "--config", config]) == 2
    assert "no box named 'nobox'" in capsys.readouterr().err
    assert main(["stop", "gpu-a", "--config", config]) == 0
    assert "stop gpu-a: done" in capsys.readouterr().out
    assert vast.count("PUT") == 1
    assert main(["start", "gpu-a", "--config", config]) == 0
    assert "start gpu-a: done" in capsys.readouterr().out


def test_manual_box_without_commands_is_refused(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "own")],
                       known_hosts=[server.known_hosts_line()])
    assert main(["stop", "own", "--config", fleet.source]) == 1
    assert "no stop_command configured for box own" in capsys.readouterr().out
    assert main(["push", "own", "--config", fleet.source]) == 1
    assert "has no push destination" in capsys.readouterr().out


async def test_panel_destroy_screen_refuses_then_pushes_and_destroys(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path) -> None:
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import DestroyScreen

    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"local_dir": str(tmp_path / "out")})
    fleet = parse_config(Path(config).read_text(), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(200):
            runs = app.states["gpu-a"].runs
            if runs and runs[0].weights:
                break
            await pilot.pause(0.05)
        await pilot.press("D")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DestroyScreen)
        assert [u.files for u in screen.unpushed] == [(
            "weights/best.pt", "weights/last.pt", "status.json", "metrics.jsonl", "train.log")]
        text = "\n".join(str(w.render()) for w in screen.query("Static"))
        assert "REFUSED" in text and "p: push, verify, then destroy" in text
        await pilot.press("p")
        for _ in range(400):
            if "gpu-a" not in app.busy and any(e.get("action") == "destroy"
                                              for e in app.journal.entries):
                break
            await pilot.pause(0.05)
        actions = [(e["action"], e["outcome"]) for e in app.journal.entries]
        assert actions == [("push", "done"), ("destroy", "done")]
        assert vast.count("DELETE") == 1
        await pilot.press("J")
        await pilot.pause()
        assert type(app.screen).__name__ == "JournalScreen"


async def test_panel_push_then_destroy_asks_before_the_first_token_goes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`p` in the destroy dialog pushes from the box: the first Hub token that goes there
    is asked for, as a push asks; no sends nothing, pushes nothing, destroys nothing."""
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import ConfirmScreen, DestroyScreen

    token = "hf_DestroyPushFirstAsksFirst012345"
    monkeypatch.setenv("HF_TOKEN", token)
    python3, received = recording_python(tmp_path, "python3")
    server = sshd_factory(env={"PATH": f"{python3.parent}:/usr/bin:/bin"})
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"hf_repo": "me/runs"})
    fleet = parse_config(Path(config).read_text(), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.states["gpu-a"].runs and
                                           app.states["gpu-a"].runs[0].weights))
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        asked = app.screen
        assert isinstance(asked, ConfirmScreen)
        assert asked.title_text == "Send your Hub token to gpu-a?"
        assert "sends your Hugging Face token from HF_TOKEN" in asked.body
        await pilot.press("n")
        await pilot.pause(0.5)
        assert "gpu-a" not in app.busy and app.journal.entries == []
    assert token not in received_text(received) and vast.count("DELETE") == 0


def test_destroy_push_first_asks_on_a_terminal_before_the_first_token_goes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_DestroyPushFirstAsksFirst012345")
    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"hf_repo": "me/runs"})
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["destroy", "gpu-a", "--yes", "--push-first", "--config", config]) == 1
    out = capsys.readouterr().out
    assert "sends your Hugging Face token" in out and "not destroyed" in out
    assert not journal(isolated_dirs) and vast.count("DELETE") == 0


async def test_over_budget_pushes_then_stops_when_configured(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.model.rest import journal_rest

    server = sshd_factory()
    out = tmp_path / "out"
    _, config = box_with_weights(tmp_path, server, client_key, vast, budget_usd=0.5,
                                 push={"local_dir": str(out)})
    text = Path(config).read_text().replace('ssh_config = ""', 'ssh_config = ""\n'
                                            'on_budget = "push-and-stop"')
    fleet = parse_config(text, config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(600):
            if any(e.get("action") == "stop" for e in app.journal.entries):
                break
            await pilot.pause(0.05)
    actions = [(e["action"], e["outcome"]) for e in app.journal.entries]
    assert actions == [("push", "done"), ("stop", "done")]
    # The budget's stop is journalled as the budget's, and the box's rest says so.
    assert app.journal.entries[-1]["by"] == "budget"
    rest = journal_rest(app.journal.entries, "gpu-a")
    assert rest is not None and rest.words("15:44") == "stopped (by its budget, 15:44)"
    assert (out / "gpu-a" / "yolox_completed" / "weights" / "best.pt").exists()
    assert vast.count("PUT") == 1


# --- the guard fails closed, on a fresh look, and only a typed override passes it ---


def painted(app: object) -> str:
    """The characters the panel paints now, without styles."""
    import io

    from rich.console import Console

    size = app.size  # type: ignore[attr-defined]
    console = Console(width=size.width, height=size.height, file=io.StringIO(),
                      force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True))  # type: ignore[attr-defined]
    return console.export_text(styles=False)


async def wait_for(pilot: object, check: Callable[[], bool], timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await pilot.pause(0.05)  # type: ignore[attr-defined]
    raise AssertionError("the panel never showed the expected state")


async def test_panel_typed_confirmation_never_overrides_the_guard(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    """Push and verify, let training rewrite best.pt, press D, type the name: the dialog
    (drawn from the panel's last look) showed nothing unpushed, and the typed name was
    taken as the override: the box was destroyed "overriding the guard"."""
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import DestroyScreen

    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(tmp_path / "out")})
    # The panel refreshes rarely: its picture is the one from before training went on.
    fleet = parse_config(Path(config).read_text().replace("refresh_seconds = 1",
                                                          "refresh_seconds = 3600"), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.states["gpu-a"].runs)
                       and bool(app.states["gpu-a"].runs[0].weights))
        await pilot.press("p")
        await wait_for(pilot, lambda: any(e.get("action") == "push" for e in
                                          app.journal.entries) and "gpu-a" not in app.busy)
        assert app.journal.entries[-1]["verified"] is True
        best = root / "yolox_completed" / "weights" / "best.pt"
        best.write_bytes(b"B" * 50_000)  # training improved it: same size, new bytes
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        assert app.screen.unpushed == []  # the panel's last look had it pushed
        await pilot.press(*"gpu-a", "enter")
        await wait_for(pilot, lambda: any(e.get("action") == "destroy"
                                          for e in app.journal.entries)
                       and "gpu-a" not in app.busy)
    last = app.journal.entries[-1]
    assert (last["action"], last["outcome"]) == ("destroy", "refused")
    assert "best.pt changed since the last verified push" in last["message"]
    assert vast.count("DELETE") == 0


async def test_panel_override_accepts_what_was_shown_and_nothing_more(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import DestroyScreen

    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast)
    fleet = parse_config(Path(config).read_text().replace("refresh_seconds = 1",
                                                          "refresh_seconds = 3600"), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.states["gpu-a"].runs)
                       and bool(app.states["gpu-a"].runs[0].weights))
        # A second run appears after the panel looked: the override shown does not cover it.
        other = root / "second" / "weights"
        other.mkdir(parents=True)
        (root / "second" / "status.json").write_text(
            (root / "yolox_completed" / "status.json").read_text())
        (other / "best.pt").write_bytes(b"2" * 1000)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        assert [u.run for u in app.screen.unpushed] == ["yolox_completed"]
        await pilot.press("t", *"gpu-a", "enter")
        await wait_for(pilot, lambda: any(e.get("action") == "destroy"
                                          for e in app.journal.entries)
                       and "gpu-a" not in app.busy)
        refused = app.journal.entries[-1]
        assert refused["outcome"] == "refused" and vast.count("DELETE") == 0
        assert "changed since the dialog" in refused["message"] and "second" in \
            refused["message"]
        # Looked at again, both are shown; the typed override now destroys.
        await pilot.press("r")
        await wait_for(pilot, lambda: len(app.states["gpu-a"].runs) == 2)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        await pilot.press("t", *"gpu-a", "enter")
        await wait_for(pilot, lambda: app.journal.entries[-1].get("outcome") != "refused"
                       and "gpu-a" not in app.busy)
    done = app.journal.entries[-1]
    assert (done["action"], done["outcome"]) == ("destroy", "done")
    lost = {(f["run"], f["name"]) for f in done["files"]}
    history = {("yolox_completed", name) for name in ("status.json", "metrics.jsonl",
                                                      "train.log")}
    assert lost == {("yolox_completed", "weights/best.pt"),
                    ("yolox_completed", "weights/last.pt"), ("second", "weights/best.pt"),
                    ("second", "status.json"), *history}
    assert vast.count("DELETE") == 1


def incomplete(root: Path, case: str) -> str:
    """Make the box's picture incomplete in one way; what the refusal must say."""
    run = root / "yolox_completed"
    if case == "unmounted":
        return "an unmounted volume"  # (the second runs root does not exist)
    if case == "root a file":
        return "not a directory"  # (the second runs root is a file)
    if case == "root a dangling link":
        return "No such file or directory"  # (a link to a volume that is not there)
    if case == "folder unreadable":
        # Tests run as root, whom permissions do not stop: a folder whose path is longer
        # than the kernel takes (ENAMETOOLONG) cannot be listed by anyone.
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(20):
                os.mkdir("d" * 250, dir_fd=fd)
                child = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
        return "folder(s) below it could not be read"
    if case == "cut short":
        for n in range(1001):
            (root / "many" / f"r{n:04d}").mkdir(parents=True)
            (root / "many" / f"r{n:04d}" / "results.csv").write_text("epoch\n")
        return "cut short"
    if case == "weights unlistable":
        (run / "weights" / "best.pt").unlink()
        (run / "weights" / "last.pt").unlink()
        (run / "weights").rmdir()
        (run / "weights").symlink_to(run / "weights")  # a loop: listing it fails
        return "could not be listed"
    if case == "run below a run":
        nested = root / "exp" / "inner" / "weights"
        nested.mkdir(parents=True)
        (root / "exp" / "results.csv").write_text("epoch\n")  # exp looks like a run
        (root / "exp" / "inner" / "status.json").write_text((run / "status.json").read_text())
        (nested / "best.pt").write_bytes(b"x" * 100)
        return "a run below another run's directory"
    if case == "checkpoint in a run folder":
        (run / "model_final.pt").write_bytes(b"x" * 100)
        return "outside its weights/"
    if case == "linked folder below a run":
        elsewhere = root.parent / "scratch-volume"
        elsewhere.mkdir()
        (elsewhere / "best.pt").write_bytes(b"x" * 100)
        (run / "exports").mkdir()
        (run / "exports" / "latest").symlink_to(elsewhere)
        return "a linked folder below a run directory"
    assert case == "loose weights"
    (root / "scratch" / "weights").mkdir(parents=True)
    (root / "scratch" / "weights" / "best.pt").write_bytes(b"x" * 100)
    return "checkpoints in a weights folder outside any run"


@pytest.mark.parametrize("case", ["unmounted", "root a file", "root a dangling link",
                                  "folder unreadable", "cut short", "weights unlistable",
                                  "run below a run", "loose weights",
                                  "checkpoint in a run folder", "linked folder below a run"])
def test_an_incomplete_picture_refuses_until_overridden_and_the_loss_is_journalled(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    server = sshd_factory()
    out = tmp_path / "out"
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(out)})
    second = {"unmounted": "/mnt/volume-not-mounted", "root a file": str(tmp_path / "file"),
              "root a dangling link": str(tmp_path / "link")}.get(case)
    if second is not None:
        (tmp_path / "file").write_text("not a folder\n")
        (tmp_path / "link").symlink_to(tmp_path / "volume-gone")
        text = Path(config).read_text().replace(
            f'runs_roots = ["{root}"]', f'runs_roots = ["{root}", "{second}"]')
        Path(config).write_text(text)
    if case != "weights unlistable":
        assert main(["push", "gpu-a", "--config", config]) == 0  # what it can see is safe
    words = incomplete(root, case)
    assert main(["destroy", "gpu-a", "--yes", "--push-first", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "refused" in said and "cannot see everything" in said and words in said, said
    assert vast.count("DELETE") == 0
    assert main(["destroy", "gpu-a", "--yes", "--force-unpushed", "--config", config]) == 0
    said = capsys.readouterr().out
    assert "overriding the guard" in said and "destroy gpu-a: done" in said
    done = journal(isolated_dirs)[-1]
    assert (done["action"], done["outcome"]) == ("destroy", "done")
    assert done["files"], "a forced destroy journals what it lost"
    assert any(f["run"] == "picture incomplete" and words in f["why"] for f in done["files"])
    assert done["runs"] and all(r["name"] and r["path"] for r in done["runs"])


def test_a_checkpoint_replaced_at_the_same_size_and_mtime_is_unpushed(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The guard compared size and mtime with a second of slack: a checkpoint written
    again (a new file renamed over it, as torch.save to a temp name does) at the same size
    within the same second read as already pushed."""
    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(tmp_path / "out")})
    assert main(["push", "gpu-a", "--config", config]) == 0
    best = root / "yolox_completed" / "weights" / "best.pt"
    before = best.stat()
    fresh = best.with_name("best.pt.tmp")
    fresh.write_bytes(b"N" * before.st_size)
    fresh.replace(best)
    os.utime(best, ns=(before.st_atime_ns, before.st_mtime_ns))  # even the same mtime
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "best.pt changed since the last verified push" in said
    assert vast.count("DELETE") == 0


def test_epoch_files_and_a_runs_history_are_guarded_and_pushed_first(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The guard knew only best.pt and last.pt: a push without --epochs, then a destroy,
    lost every epoch_<N>.pt; a run that failed before saving weights (its status.json,
    train.log, train_config.yaml) was neither refused nor pushed by --push-first."""
    server = sshd_factory()
    out = tmp_path / "out"
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(out)})
    early = root / "early_failure"
    early.mkdir()
    (early / "status.json").write_text((root / "yolox_completed" / "status.json").read_text())
    (early / "train.log").write_text("CUDA out of memory\n")
    (early / "train_config.yaml").write_text("epochs: 300\n")
    assert main(["push", "gpu-a", "yolox_completed", "--config", config]) == 0
    (root / "yolox_completed" / "weights" / "epoch_3.pt").write_bytes(b"3" * 1000)
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "weights/epoch_3.pt" in said and "early_failure" in said, said
    assert "train_config.yaml" in said and "weights/best.pt" not in said, said
    assert vast.count("DELETE") == 0
    assert main(["destroy", "gpu-a", "--yes", "--push-first", "--config", config]) == 0, \
        capsys.readouterr().out
    for run, name in (("yolox_completed", "weights/epoch_3.pt"),
                      ("early_failure", "train_config.yaml"), ("early_failure", "train.log")):
        (landed,) = out.glob(f"gpu-a/{run}*/{name}")
        assert landed.read_bytes() == (root / run / name).read_bytes()
    assert vast.count("DELETE") == 1


def test_a_forced_destroy_journals_the_history_and_epochs_it_loses(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path) -> None:
    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast)
    (root / "yolox_completed" / "weights" / "epoch_7.pt").write_bytes(b"7" * 700)
    assert main(["destroy", "gpu-a", "--yes", "--force-unpushed", "--config", config]) == 0
    done = journal(isolated_dirs)[-1]
    lost = {f["name"]: f for f in done["files"]}
    assert {"weights/best.pt", "weights/last.pt", "weights/epoch_7.pt", "status.json",
            "metrics.jsonl", "train.log"} <= set(lost), sorted(lost)
    assert lost["weights/epoch_7.pt"]["size"] == 700
    assert lost["train.log"]["size"] == (root / "yolox_completed" / "train.log").stat().st_size


def test_a_live_training_process_is_named_in_the_refusal(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast)
    status = root / "yolox_completed" / "status.json"
    doc = json.loads(status.read_text())
    doc.update(state="running", pid=os.getpid(), started_at=datetime.now(UTC).isoformat(),
               updated_at=datetime.now(UTC).isoformat())
    status.write_text(json.dumps(doc))
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "its training process is alive, so they will change again" in said


def test_the_first_push_to_the_hub_from_a_box_says_the_token_goes_there(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"hf_repo": "me/runs", "local_dir": str(tmp_path / "o")})
    # Off a terminal the first one is not sent without --yes (it printed the notice and
    # went ahead: nobody had said yes).
    assert main(["push", "gpu-a", "--config", config]) == 2
    first = capsys.readouterr().out
    assert "sends your Hugging Face token" in first and "stranger's machine" in first
    assert 'upload_from = "panel"' in first and "token_env" in first
    assert "--yes" in first and not journal(isolated_dirs)
    main(["push", "gpu-a", "--yes", "--config", config])
    assert "sends your Hugging Face token" in capsys.readouterr().out
    assert [e["action"] for e in journal(isolated_dirs)] == ["push", "push"]
    main(["push", "gpu-a", "--config", config])
    assert "sends your Hugging Face token" not in capsys.readouterr().out


def test_a_milestone_push_says_its_config_was_the_yes_to_sending_the_token(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    """A milestone push sends the token to the box unasked: its words now say that the
    milestone settings in [box.push] are that yes, and how to keep the token here."""
    from tui.actions.flows import push_runs
    from tui.model.config import parse_config
    from tui.store.journal import Journal

    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"hf_repo": "me/runs", "on_best": True})
    fleet = parse_config(Path(config).read_text(), config)
    journal_ = Journal(tmp_path / "j.jsonl")
    report = asyncio.run(push_runs(fleet, fleet.boxes[0], journal_, why="best.pt improved"))
    said = " ".join(report.lines)
    assert "sends your Hugging Face token" in said, said
    assert "milestone" in said and "standing yes" in said and 'upload_from = "panel"' in said


async def test_a_push_made_by_the_cli_reaches_a_running_panel(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    """The panel read the journal once, at start: its destroy dialog called runs pushed
    meanwhile by `gpurent-tui push` never pushed, and its rows never said so."""
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import DestroyScreen

    server = sshd_factory()
    _, config = box_with_weights(tmp_path, server, client_key, vast,
                                 push={"local_dir": str(tmp_path / "out")})
    fleet = parse_config(Path(config).read_text(), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.states["gpu-a"].runs)
                       and bool(app.states["gpu-a"].runs[0].weights))
        run = app.states["gpu-a"].runs[0]
        assert run.path not in app.pushes.get("gpu-a", {})
        assert not re.search(r"\bpushed\b", painted(app))  # no push note ("unpushed: ..." is)
        code = await asyncio.to_thread(main, ["push", "gpu-a", "--config", config])
        assert code == 0
        await wait_for(pilot, lambda: run.path in app.pushes.get("gpu-a", {}))
        await wait_for(pilot, lambda: "verified" in painted(app))
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        assert app.screen.unpushed == []


LONG_EPOCHS = 2000


def box_with_a_long_failed_run(tmp_path: Path, server: Sshd, key: KeyPair, vast: VastServer
                               ) -> tuple[Path, str]:
    """A run that failed after 2,000 epochs, its weights unpushed: a metrics.jsonl of
    about 2.6 MB (more than one of the probe's default 1 MiB reads), and a status.json
    that, as a failed run's does, no longer says which epoch was best."""
    root = runs_root_with(tmp_path, "yolox_failed")
    run = root / "yolox_failed"
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    with (run / "metrics.jsonl").open("w") as out:
        for epoch in range(1, LONG_EPOCHS + 1):
            best = epoch - epoch % 7 or 1  # improves every seventh epoch
            out.write(json.dumps({**last, "epoch": epoch, "best_epoch": best,
                                  "best_metric": best / 10_000}) + "\n")
    status = json.loads((run / "status.json").read_text())
    status.update(current_epoch=LONG_EPOCHS + 1, total_epochs=3000)
    (run / "status.json").write_text(json.dumps(status))
    weights = run / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"b" * 50_000)
    (weights / "last.pt").write_bytes(b"l" * 60_000)
    fleet = make_fleet(tmp_path, [box_entry(server, key, "gpu-a", runs_roots=[str(root)],
                                            provider="vast", instance_id="12345678",
                                            push={"local_dir": str(tmp_path / "out")})],
                       known_hosts=[server.known_hosts_line()],
                       providers={"vast": {"base_url": vast.url}})
    return root, fleet.source


async def test_a_destroys_fresh_look_reads_states_and_weights_not_history(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    """The guard decides on weights listings and run states: the fresh look before a
    destroy asks for no metrics history, so a long run's megabytes are never parsed in one
    step on the panel's event loop. A push's look (it journals each run's epoch and best)
    reads the whole history, in the panel watcher's bounded answers."""
    from tui.actions.flows import look
    from tui.model.config import parse_config
    from tui.model.runs import Health

    server = sshd_factory()
    _, config = box_with_a_long_failed_run(tmp_path, server, client_key, vast)
    fleet = parse_config(Path(config).read_text(), config)
    watcher, state = await look(fleet.box("gpu-a"), fleet)
    await watcher.close()
    [run] = state.runs
    assert run.health is Health.FAILED and run.current_epoch == LONG_EPOCHS + 1
    assert sorted(w.name for w in run.weights) == ["best.pt", "last.pt"]
    assert run.history == () and run.last_record is None
    watcher, state = await look(fleet.box("gpu-a"), fleet, history=True)
    await watcher.close()
    [run] = state.runs
    assert [p.epoch for p in run.history] == list(range(1, LONG_EPOCHS + 1))
    assert run.best_epoch == LONG_EPOCHS - LONG_EPOCHS % 7


def test_a_destroy_on_a_long_run_decides_on_its_weights_and_a_push_journals_its_best(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root, config = box_with_a_long_failed_run(tmp_path, server, client_key, vast)
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "refused" in said and "weights/best.pt" in said and "weights/last.pt" in said
    assert main(["push", "gpu-a", "--config", config]) == 0
    [pushed] = journal(isolated_dirs)[-1:]
    assert (pushed["action"], pushed["outcome"]) == ("push", "done")
    # The run's last epoch, not one a single 1 MiB read of its history reached.
    best = LONG_EPOCHS - LONG_EPOCHS % 7
    assert (pushed["epoch"], pushed["best_epoch"], pushed["best_metric"]) == \
        (LONG_EPOCHS + 1, best, best / 10_000)
    (root / "yolox_failed" / "weights" / "last.pt").write_bytes(b"L" * 60_001)
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    assert "last.pt changed since the last verified push" in capsys.readouterr().out
    assert main(["push", "gpu-a", "--config", config]) == 0
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 0
    assert "destroy gpu-a: done" in capsys.readouterr().out
    assert vast.count("DELETE") == 1


# --- epoch snapshots never pushed: named as such, and one step gives them up ---


def box_with_snapshots(tmp_path: Path, server: Sshd, key: KeyPair, vast: VastServer
                       ) -> tuple[Path, str]:
    """A LibreYOLO-shaped run that saved epoch_5.pt and epoch_10.pt beside best/last."""
    root, config = box_with_weights(tmp_path, server, key, vast,
                                    push={"local_dir": str(tmp_path / "out")})
    weights = root / "yolox_completed" / "weights"
    (weights / "epoch_5.pt").write_bytes(b"5" * 400_000)
    (weights / "epoch_10.pt").write_bytes(b"0" * 600_000)
    return root, config


def test_after_a_push_destroy_names_the_snapshots_and_gives_them_up_in_one_step(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`push b` then `destroy b --yes` refused with "weights newer than their last verified
    push" and advised `push b`, which pushes no epoch file: following it looped, and the
    only way out was --force-unpushed, which also overrides an unpushed best.pt."""
    server = sshd_factory()
    _, config = box_with_snapshots(tmp_path, server, client_key, vast)
    assert main(["push", "gpu-a", "--config", config]) == 0
    capsys.readouterr()
    assert main(["destroy", "gpu-a", "--yes", "--config", config]) == 3
    said = capsys.readouterr().out
    assert ("2 epoch snapshots (1.0 MB) were never pushed; best.pt, last.pt and the "
            "history are verified") in said, said
    assert "epoch_5.pt" in said and "epoch_10.pt" in said and "newer" not in said, said
    assert "`gpurent-tui push gpu-a --epochs`" in said, said
    assert "`gpurent-tui destroy gpu-a --yes --without-snapshots`" in said, said
    assert vast.count("DELETE") == 0
    assert main(["destroy", "gpu-a", "--yes", "--without-snapshots", "--config", config]) == 0
    said = capsys.readouterr().out
    assert "destroy gpu-a: done" in said and "overriding the guard" not in said, said
    assert "giving up 2 epoch snapshots (1.0 MB)" in said, said
    assert vast.count("DELETE") == 1
    done = journal(isolated_dirs)[-1]
    assert (done["action"], done["outcome"]) == ("destroy", "done")
    assert done["given_up"] == "epoch snapshots never pushed (--without-snapshots)"
    assert {(f["name"], f["size"]) for f in done["files"]} == {
        ("weights/epoch_5.pt", 400_000), ("weights/epoch_10.pt", 600_000)}


def test_without_snapshots_still_refuses_a_best_changed_since_the_push(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory()
    root, config = box_with_snapshots(tmp_path, server, client_key, vast)
    assert main(["push", "gpu-a", "--config", config]) == 0
    (root / "yolox_completed" / "weights" / "best.pt").write_bytes(b"newer" * 20_000)
    capsys.readouterr()
    assert main(["destroy", "gpu-a", "--yes", "--without-snapshots", "--config", config]) == 3
    said = capsys.readouterr().out
    assert "best.pt changed since the last verified push" in said, said
    assert "--without-snapshots gives up only epoch snapshots" in said, said
    assert "best.pt, last.pt and the history are verified" not in said, said
    assert "`gpurent-tui push gpu-a --epochs`" in said, said
    assert vast.count("DELETE") == 0
    refused = journal(isolated_dirs)[-1]
    assert (refused["action"], refused["outcome"]) == ("destroy", "refused")
    # Pushing the rest first, without the snapshots, is one step too.
    assert main(["destroy", "gpu-a", "--yes", "--push-first", "--without-snapshots",
                 "--config", config]) == 0, capsys.readouterr().out
    assert not list((tmp_path / "out").glob("gpu-a/*/weights/epoch_*.pt"))
    assert vast.count("DELETE") == 1
    done = journal(isolated_dirs)[-1]
    assert {f["name"] for f in done["files"]} == {"weights/epoch_5.pt", "weights/epoch_10.pt"}


async def test_panel_destroy_offers_to_destroy_without_the_snapshots(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path) -> None:
    from tui.app import GpurentApp
    from tui.model.config import parse_config
    from tui.screens.confirm import DestroyScreen

    server = sshd_factory()
    _, config = box_with_snapshots(tmp_path, server, client_key, vast)
    assert await asyncio.to_thread(main, ["push", "gpu-a", "--config", config]) == 0
    fleet = parse_config(Path(config).read_text(), config)
    app = GpurentApp(fleet)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.states["gpu-a"].runs)
                       and len(app.states["gpu-a"].runs[0].weights) == 4)
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DestroyScreen))
        text = painted(app)
        assert "2 epoch snapshots (1.0 MB) were never pushed" in text, text
        assert "p: push them too" in text and "w: destroy without them" in text, text
        assert "t: type 'gpu-a'" in text, text
        await pilot.press("w", *"gpu-a", "enter")
        await wait_for(pilot, lambda: any(e.get("action") == "destroy"
                                          for e in app.journal.entries)
                       and "gpu-a" not in app.busy)
    done = app.journal.entries[-1]
    assert (done["action"], done["outcome"]) == ("destroy", "done"), done
    assert done["given_up"] == "epoch snapshots never pushed (--without-snapshots)"
    assert {f["name"] for f in done["files"]} == {"weights/epoch_5.pt", "weights/epoch_10.pt"}
    assert vast.count("DELETE") == 1


def test_the_journal_redacts_every_words_field_at_its_door(
        isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever records, a box's or a provider's words reach journal.jsonl redacted: the
    secrets in play (a secret-named variable, the saved Hub token), split or not, and
    secret-named options; the names and hashes the journal is searched by stay whole."""
    from tui.store.journal import Journal

    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_HeldKey_0123456789")
    saved = isolated_dirs / "cache" / "huggingface" / "token"
    saved.parent.mkdir(parents=True)
    saved.write_text("hf_SavedLoginTokenNotInEnv\n")
    sha = "0123456789abcdef" * 4
    journal = Journal()
    journal.record(box="b", action="destroy", outcome="failed", run="r", files=[
        {"name": "weights/best.pt", "sha256": sha, "size": 3}],
        message="RunPod said: key rpa_HeldKey_\n0123456789 refused",
        error="hf_SavedLoginTokenNotInEnv; curl -k kValue --credentials=c2",
        details={"milestone": "argv ['--wandb-key', 'w4ndb']", "commit": "c" * 40})
    text = journal.path.read_text()
    for secret in ("HeldKey", "0123456789 refused", "SavedLoginToken", "kValue", "c2", "w4ndb"):
        assert secret not in text
    (entry,) = Journal().entries
    assert entry["files"][0]["sha256"] == sha and entry["commit"] == "c" * 40
    assert entry["run"] == "r" and entry["message"] == "RunPod said: key *** refused"


def test_a_folder_in_weights_refuses_a_destroy_after_a_verified_push(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The probe listed only weights/'s own files and the search below a run skipped
    weights/: after a verified push of best.pt, last.pt and the history, `destroy --yes`
    destroyed the box and lost weights/old/epoch_5.pt (and a linked folder) without a word."""
    server = sshd_factory()
    root, config = box_with_weights(tmp_path, server, client_key, vast,
                                    push={"local_dir": str(tmp_path / "out")})
    weights = root / "yolox_completed" / "weights"
    (weights / "old").mkdir()
    (weights / "old" / "epoch_5.pt").write_bytes(b"5" * 5000)
    elsewhere = tmp_path / "archive-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "best.pt").write_bytes(b"a" * 100)
    (weights / "archive").symlink_to(elsewhere)
    assert main(["push", "gpu-a", "--config", config]) == 0
    assert "verified" in capsys.readouterr().out
    for extra in ([], ["--without-snapshots"], ["--push-first"]):
        assert main(["destroy", "gpu-a", "--yes", *extra, "--config", config]) == 3, extra
        said = capsys.readouterr().out
        assert "refused" in said and "yolox_completed" in said, said
        assert "weights/old/" in said and "weights/archive/" in said, said
        assert "a folder in weights/ no push takes" in said, said
    assert vast.count("DELETE") == 0
    assert main(["destroy", "gpu-a", "--yes", "--force-unpushed", "--config", config]) == 0
    said = capsys.readouterr().out
    assert "overriding the guard" in said and "destroy gpu-a: done" in said, said
    assert vast.count("DELETE") == 1
    done = journal(isolated_dirs)[-1]
    assert (done["action"], done["outcome"]) == ("destroy", "done")
    lost = {(f["run"], f["name"]) for f in done["files"]}
    assert lost == {("yolox_completed", "weights/archive/"), ("yolox_completed", "weights/old/")}
