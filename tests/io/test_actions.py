"""Whole actions end to end: the guard, push-verify-destroy, headless commands and exit codes.

Real sshd boxes on 127.0.0.1, a loopback Vast API, local-folder pushes over SFTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd

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
        assert [u.files for u in screen.unpushed] == [("weights/best.pt", "weights/last.pt")]
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


async def test_over_budget_pushes_then_stops_when_configured(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer) -> None:
    from tui.app import GpurentApp
    from tui.model.config import parse_config

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
    assert (out / "gpu-a" / "yolox_completed" / "weights" / "best.pt").exists()
    assert vast.count("PUT") == 1
