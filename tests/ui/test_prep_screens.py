"""stage, fetch and size from the panel (ctrl+p), against the loopback Hub and a real sshd
box: the same flows as the commands, their progress and outcome on their own screens, the
fetch journaled and its token never in argv."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.hub_server import HubServer
from support.libreyolo_train import make_dataset
from support.pilot import until
from support.sshd import KeyPair, Sshd
from support.token_box import received_text, recording_python
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Static

from tui.actions.stage import stage
from tui.app import GpurentApp
from tui.model.config import FleetConfig
from tui.screens.confirm import ConfirmScreen
from tui.screens.fetch import FetchScreen
from tui.screens.fleet import FleetScreen
from tui.screens.size import SizeScreen, read_form
from tui.screens.stage import StageScreen
from tui.store.journal import Journal

TOKEN = "hf_PanelFetchTokenNeverInArgv0123456789"
REPO = "me/shapes"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(autouse=True)
def no_xet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback Hub speaks LFS, not Xet: this process uploads the LFS way."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> HubServer:
    with HubServer([], token=TOKEN) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield server


def box_text(app: GpurentApp) -> str:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen.fleet_list.text("gpu-1")


def body(app: GpurentApp) -> str:
    return str(app.screen.query_one("#body", Static).render())


async def palette(pilot: Pilot, app: GpurentApp, words: str, prompt: str) -> None:
    """ctrl+p, type `words`, pick the command whose prompt holds `prompt`."""
    def offered() -> list[str]:
        lists = app.screen.query(CommandList)
        return [str(o.prompt) for o in lists.first().options] if lists else []

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*words)
    await until(pilot, lambda: any(prompt in o for o in offered()))
    assert prompt in offered()[0], offered()
    await pilot.press("enter")


def python_with_hub(tmp_path: Path) -> Path:
    """This test run's interpreter (it has huggingface_hub), as the box's `python`."""
    wrapper = tmp_path / "box-bin" / "python"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def one_box(tmp_path: Path, server: Sshd, key: KeyPair, **extra: object) -> FleetConfig:
    root = runs_root_with(tmp_path, "yolox_completed")
    if "python" not in extra:
        extra["python"] = str(python_with_hub(tmp_path))
    return make_fleet(tmp_path, [box_entry(server, key, "gpu-1", runs_roots=[str(root)],
                                           **extra)],
                      known_hosts=[server.known_hosts_line()], refresh_seconds=30)


async def test_fetch_from_the_palette_onto_the_box(
        tmp_path: Path, hub: HubServer, sshd_factory: Callable[..., Sshd],
        client_key: KeyPair) -> None:
    folder = tmp_path / "shapes"
    make_dataset(folder)
    staged = stage(folder, REPO)
    assert staged.verified, staged.message
    server = sshd_factory("box", env={"PATH": SYSTEM_PATH, "HF_HUB_DISABLE_XET": "1"})
    python, received = recording_python(tmp_path)
    fleet = one_box(tmp_path, server, client_key, persistent=str(tmp_path / "volume"),
                    python=str(python))
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app))
        await palette(pilot, app, "fetch gpu-1", "Fetch a data set onto gpu-1")
        await until(pilot, lambda: isinstance(app.screen, FetchScreen))
        screen = app.screen
        assert isinstance(screen, FetchScreen)
        assert screen.query_one("#dest", Input).value == str(tmp_path / "volume" / "data")
        screen.query_one("#repo", Input).value = "not a repo"
        await pilot.press("enter")
        await until(pilot, lambda: "is not a Hugging Face repo id" in body(app))
        screen.query_one("#repo", Input).value = REPO
        # The first token to this box: asked, as a push asks; no leaves it unsent.
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=60)
        asked = app.screen
        assert isinstance(asked, ConfirmScreen) and "Send your Hub token to gpu-1" in \
            asked.title_text
        assert "sends your Hugging Face token from HF_TOKEN" in asked.body
        assert "stranger's machine" in asked.body
        await pilot.press("n")
        await until(pilot, lambda: screen.error is not None)
        assert "the token stays on this machine" in body(app)
        assert Journal().entries == [] and TOKEN not in received_text(received)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=60)
        await pilot.press("y")
        await until(pilot, lambda: screen.report is not None, timeout=120)
        assert screen.error is None and screen.report is not None
        assert screen.report.verified, screen.report.message
        assert "sha256 equal to the Hub's" in body(app)
    unpacked = tmp_path / "volume" / "data" / "shapes"
    assert (unpacked / "data.yaml").read_bytes() == (folder / "data.yaml").read_bytes()
    entry = Journal().entries[-1]
    assert entry["action"] == "fetch" and entry["verified"] and entry["box"] == "gpu-1"
    assert entry["token_sent"] == "HF_TOKEN" and TOKEN in received_text(received)
    assert TOKEN not in json.dumps(Journal().entries)


async def test_stage_from_the_palette(tmp_path: Path, hub: HubServer,
                                      sshd_factory: Callable[..., Sshd],
                                      client_key: KeyPair) -> None:
    folder = tmp_path / "shapes"
    make_dataset(folder)
    (tmp_path / "secrets.env").write_text("HF_TOKEN=not-for-the-hub\n")
    (folder / "secrets.env").symlink_to(Path("..") / "secrets.env")
    app = GpurentApp(one_box(tmp_path, sshd_factory(), client_key))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app))
        await palette(pilot, app, "stage a data", "Stage a data set on the Hub")
        await until(pilot, lambda: isinstance(app.screen, StageScreen))
        screen = app.screen
        assert isinstance(screen, StageScreen)
        screen.query_one("#folder", Input).value = str(tmp_path / "nope")
        screen.query_one("#repo", Input).value = REPO
        await pilot.press("enter")
        await until(pilot, lambda: screen.error is not None)
        assert "is not a folder" in body(app)
        screen.query_one("#folder", Input).value = str(folder)
        await pilot.press("enter")
        await until(pilot, lambda: screen.error is not None and "link" in screen.error)
        assert "secrets.env -> ../secrets.env" in body(app)  # named, and nothing uploaded
        assert f"datasets/{REPO}" not in hub.state.repos
        screen.query_one("#follow-outside", Checkbox).value = True  # packed on purpose
        screen.query_one("#folder", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: screen.report is not None, timeout=120)
        assert screen.report is not None and screen.report.verified, screen.report.message
        assert "staged as shapes.tar" in body(app) and "private" in body(app)
    stored = hub.state.repos[f"datasets/{REPO}"]["shapes.tar"]
    assert stored.sha256 == screen.report.sha256 and hub.state.private[f"datasets/{REPO}"]


async def test_size_from_the_palette_prices_the_boxs_disk(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    app = GpurentApp(one_box(tmp_path, sshd_factory(), client_key, provider="runpod"))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app))
        await palette(pilot, app, "size a disk for gpu", "Size a disk for gpu-1")
        await until(pilot, lambda: isinstance(app.screen, SizeScreen))
        screen = app.screen
        assert isinstance(screen, SizeScreen)
        assert screen.query_one("#save_period", Input).value == "10"  # LibreYOLO's default
        screen.query_one("#data", Input).value = "5"
        screen.query_one("#model", Input).value = "yolox-x"
        screen.query_one("#epochs", Input).value = "300"
        await pilot.press("enter")
        await until(pilot, lambda: screen.plan is not None)
        text = body(app)
        assert screen.plan is not None and screen.plan.checkpoints == 32
        assert "32 x 1.2 GB" in text and f"allocate {screen.plan.allocate_gb} GB" in text
        assert "RunPod's volume rate" in text
        screen.query_one("#epochs", Input).value = "many"
        await pilot.press("enter")
        await until(pilot, lambda: screen.plan is None)
        assert "whole numbers" in body(app)


def test_the_size_form_reads_like_the_command() -> None:
    plan = read_form({"data": "5", "model": "yolox-x", "epochs": "300", "save_period": ""})
    assert not isinstance(plan, str) and plan.checkpoints == 32 and plan.save_period == 10
    mb = read_form({"data": "1", "model": "250", "epochs": "20", "save_period": "0"})
    assert not isinstance(mb, str) and mb.checkpoint_bytes == 250 * 10**6
    assert mb.checkpoints == 2
    assert "model: one of yolox-n" in str(read_form(
        {"data": "1", "model": "yolov8", "epochs": "20", "save_period": "5"}))
    assert "data: a number of GB" in str(read_form(
        {"data": "nan", "model": "yolox-s", "epochs": "20", "save_period": "5"}))
