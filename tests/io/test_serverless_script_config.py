"""`script =` in a real config file: `check-config` warns of a timeout that disagrees
with the script's literal and of a script it cannot read (exit 0: the config is valid);
a script with no timeout= is the guide's problem in `status --json`, `status` and the
panel's app row; an edit that names a script is read on the live reload."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.modal_standin import BIN, ModalStandIn, status_json
from support.pilot import box_text, until

from tui.__main__ import main
from tui.app import GpurentApp
from tui.cli.fleet import load_fleet
from tui.runtime.config_file import ConfigFile, Reloaded

NO_TIMEOUT = "no timeout=: a hung run bills forever"
SCRIPT = '''import modal

app = modal.App("yolo-train")
volume = modal.Volume.from_name("runs-vol")


@app.function(gpu="H100:2"{timeout}, volumes={{"/runs": volume}})
def train() -> None:
    pass
'''


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def config(tmp_path: Path, extra: str = 'script = "jobs/train.py"\n') -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text('[[serverless]]\nname = "modal-yolo"\nprovider = "modal"\n'
                    'app = "yolo-train"\nvolume = "runs-vol"\nruns_path = "/runs"\n'
                    f'gpu = "H100:2"\ncli = {json.dumps(str(BIN / "modal"))}\n{extra}')
    return path


def write_script(tmp_path: Path, timeout: str) -> Path:
    path = tmp_path / "jobs" / "train.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SCRIPT.format(timeout=timeout))
    return path


@pytest.fixture
def modal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModalStandIn:
    stand_in = ModalStandIn(tmp_path / "modal", started=iso(time.time() - 3600))
    monkeypatch.setenv("GPURENT_STANDIN_STATE", str(stand_in.path))
    now = time.time()
    stand_in.put("runs/exp1/status.json", status_json(
        epoch=3, total=40, started_at=iso(now - 3600), updated_at=iso(now - 30), eta=3600.0))
    return stand_in


def test_check_config_warns_of_a_disagreeing_timeout_and_an_unreadable_script(
        tmp_path: Path, isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_script(tmp_path, ", timeout=21600")
    path = config(tmp_path, 'script = "jobs/train.py"\ntimeout = 3600\n')
    assert main(["check-config", "--config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}: ok, 1 serverless app(s)")
    assert out[1:] == [f"{path}: serverless 'modal-yolo': warning: timeout = 3600 but script "
                       "jobs/train.py says timeout=21600: the provider kills at the "
                       "script's; the countdown follows the config's"]
    path = config(tmp_path, 'script = "jobs/train.py"\n')  # agrees: nothing to say
    assert main(["check-config", "--config", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert load_fleet(str(path)).serverless[0].timeout == 21600
    path = config(tmp_path, 'script = "jobs/gone.py"\n')
    assert main(["check-config", "--config", str(path)]) == 0
    (_, warning) = capsys.readouterr().out.splitlines()
    assert warning.endswith(f"warning: script jobs/gone.py: no such file "
                            f"({tmp_path / 'jobs' / 'gone.py'})")


def test_a_script_without_a_timeout_is_the_problem_in_status(
        tmp_path: Path, isolated_dirs: Path, modal: ModalStandIn,
        capsys: pytest.CaptureFixture[str]) -> None:
    write_script(tmp_path, "")
    path = config(tmp_path)
    assert main(["check-config", "--config", str(path)]) == 0
    assert f"`train` sets {NO_TIMEOUT}" in capsys.readouterr().out
    assert main(["status", "--json", "--config", str(path)]) == 0
    (app,) = json.loads(capsys.readouterr().out)["serverless"]
    assert app["problems"] == [NO_TIMEOUT] and app["no_timeout"] is True
    assert app["timeout_seconds"] is None and app["script"] == "jobs/train.py"
    assert main(["status", "--config", str(path)]) == 0
    assert f"  ! {NO_TIMEOUT}" in capsys.readouterr().out.splitlines()


def test_an_edit_naming_a_script_is_read_on_reload(tmp_path: Path) -> None:
    write_script(tmp_path, ", timeout=7200")
    path = config(tmp_path, "timeout = 600\n")
    watched = ConfigFile(path)
    config(tmp_path)
    verdict = watched.check()
    assert isinstance(verdict, Reloaded)
    (entry,) = verdict.fleet.serverless
    assert (entry.timeout, entry.timeout_from) == (7200, "script")


async def test_the_panel_shows_the_problem_on_the_app_row(
        tmp_path: Path, isolated_dirs: Path, modal: ModalStandIn) -> None:
    write_script(tmp_path, ", timeout=None")
    app = GpurentApp(load_fleet(str(config(tmp_path))))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: "running (deployed), 1 task" in box_text(app, "modal-yolo"))
        text = box_text(app, "modal-yolo")
        assert f"! {NO_TIMEOUT}" in text
        assert "no timeout to count down: the script sets none" in text  # the run's line
