"""The terminal belongs to the user: box text never reaches it as control sequences.

A real sshd box whose run directory's name holds ESC sequences (retitle, clear
the screen) and whose status.json error holds an OSC 52 (write the user's
clipboard): `status` prints neither, and the panel paints neither.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from support.fleets import DATA, box_entry, make_fleet
from support.pilot import until
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.config import FleetConfig

Factory = Callable[..., Sshd]
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # "rm -rf ~" into the clipboard
NAME = "evil\x1b]0;owned\x07\x1b[2J\x9b2J"
CONTROLS = ("\x1b", "\x07", "\x9b")


def hostile_fleet(tmp_path: Path, server: Sshd, key: KeyPair) -> FleetConfig:
    root = tmp_path / "runs"
    run = root / NAME
    (run / "weights").mkdir(parents=True)
    status = json.loads((DATA / "yolox_failed" / "status.json").read_text())
    status["error"] = {"type": f"Runtime{OSC52}Error", "message": f"CUDA {OSC52} out of memory"}
    (run / "status.json").write_text(json.dumps(status))
    (run / "train.log").write_text(f"epoch 1 {OSC52}\n\x1b[31mred\x1b[0m line\n")
    return make_fleet(tmp_path, [box_entry(server, key, "gpu", runs_roots=[str(root)])],
                      known_hosts=[server.known_hosts_line()], refresh_seconds=60)


def test_status_prints_no_control_sequence_from_a_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = hostile_fleet(tmp_path, sshd_factory(), client_key)
    assert main(["status", "--config", fleet.source]) == 0
    out = capsys.readouterr().out
    assert "evil" in out and "out of memory" in out
    assert not any(c in out for c in CONTROLS), repr(out)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    doc = capsys.readouterr().out
    assert not any(c in doc for c in CONTROLS)  # JSON escapes what it keeps


def painted(app: GpurentApp) -> str:
    """Every character the panel would paint on the terminal now, without its styles."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor", record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_the_panel_paints_no_control_sequence_from_a_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    fleet = hostile_fleet(tmp_path, sshd_factory(), client_key)
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: bool(app.states["gpu"].runs))
        await pilot.pause(0.2)
        screens = [painted(app)]
        (run,) = app.states["gpu"].runs
        assert not any(c in run.name + run.reason for c in CONTROLS)
        assert not any(c in line for line in run.log_tail for c in CONTROLS)
        app.open_run("gpu", run.path)
        await pilot.pause(0.3)
        screens.append(painted(app))
    text = "\n".join(screens)
    assert "evil" in text and "out of memory" in text
    assert not any(c in text for c in CONTROLS), repr(text)


def hostile_probe_env(tmp_path: Path, mutate: str) -> dict[str, str]:
    """Session variables for a box whose python3 alters every probe answer it sends:
    a sitecustomize.py wraps json.dumps and runs `mutate` on any dict holding "runs"."""
    site = tmp_path / "hostile-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"""
import json
_dumps = json.dumps
def dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and "runs" in obj and "v" in obj:
        answer = obj
{chr(10).join('        ' + line for line in mutate.strip().splitlines())}
    return _dumps(obj, *args, **kwargs)
json.dumps = dumps
""")
    return {"PYTHONPATH": str(site)}


@pytest.mark.parametrize("mutate", [
    'answer["gone"] = 5',
    'answer["gpus"] = {"rows": 7}',
    'answer["runs"] = [dict(r, errors=5) for r in answer["runs"]] or [{"path": "/x", '
    '"errors": 5}]',
], ids=["gone", "gpu-rows", "errors"])
def test_a_malformed_answer_is_that_boxs_probe_failed_not_a_traceback(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str], mutate: str) -> None:
    good = sshd_factory("good")
    bad = sshd_factory("bad", env=hostile_probe_env(tmp_path, mutate))
    root = tmp_path / "runs"
    (root / "r1").mkdir(parents=True)
    (root / "r1" / "status.json").write_text((DATA / "yolox_failed" / "status.json")
                                             .read_text())
    fleet = make_fleet(tmp_path, [box_entry(good, client_key, "good", runs_roots=[str(root)]),
                                  box_entry(bad, client_key, "bad", runs_roots=[str(root)])],
                       known_hosts=[good.known_hosts_line(), bad.known_hosts_line()])
    assert main(["status", "--json", "--config", fleet.source]) == 1
    doc = json.loads(capsys.readouterr().out)
    boxes = {b["name"]: b for b in doc["boxes"]}
    assert boxes["good"]["connection"] == "ok"
    assert boxes["bad"]["connection"] == "probe_failed"
    assert "malformed probe answer" in boxes["bad"]["error"]


def test_a_gpu_name_with_control_sequences_is_printed_clean(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    """nvidia-smi's GPU name is the box's word too: an OSC 52 or a screen clear in it
    must not reach the terminal from `status`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gpu.csv").write_text(f"0, NVIDIA {OSC52}H200\x1b[2J\x9b2J, 88, 70000, 143771, "
                                    "55, 410.20\n")
    smi = bindir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {bindir / 'gpu.csv'}\n")
    smi.chmod(0o755)
    server = sshd_factory(env={"PATH": f"{bindir}:/usr/bin:/bin"})
    fleet = hostile_fleet(tmp_path, server, client_key)
    assert main(["status", "--config", fleet.source]) == 0
    out = capsys.readouterr().out
    assert "1 GPU: 88%" in out and not any(c in out for c in CONTROLS), repr(out)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    (gpu,) = json.loads(capsys.readouterr().out)["boxes"][0]["gpus"]
    assert "H200" in gpu["name"] and not any(c in gpu["name"] for c in CONTROLS), gpu
