"""`launch` and `monitor` for real: LibreYOLO trains on the CPU behind a real sshd.

The box is this machine behind OpenSSH on 127.0.0.1; its sessions find this
machine's python (with torch and libreyolo) first on PATH. A launch is cut
off from its box right after it started and the run still completes; a bad
argument and a missing data set fail with LibreYOLO's own words; the monitor
answers `/api/status` through the forward and is gone after Ctrl+C.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.libreyolo_train import make_dataset, read_status, wait_for
from support.sshd import KeyPair, Sshd

from tui.__main__ import main
from tui.app import GpurentApp
from tui.model.config import FleetConfig
from tui.screens.fleet import FleetScreen
from tui.store.journal import Journal

if not os.environ.get("CI"):
    pytest.importorskip("libreyolo", reason="needs the train extra (pip install -e '.[train]')")

pytestmark = pytest.mark.training

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "run 'q' $(touch pwned) \"x\""  # never reaches a shell
TRAIN = ["--model", "yolox-n", "--no-pretrained", "--batch", "8", "--imgsz", "64",
         "--device", "cpu", "--workers", "0", "--no-amp", "--eval-interval", "1"]

SCRIPT = """\
import os
import sys

from libreyolo import LibreYOLOX

if __name__ == "__main__":
    print("script says hello", sys.argv[1:], flush=True)
    model = LibreYOLOX(None, size="n", nb_classes=2, device="cpu")
    model.train(data=sys.argv[1], epochs=int(sys.argv[2]), batch=8, imgsz=64, device="cpu",
                workers=0, project=os.environ["GPURENT_PROJECT"],
                name=os.environ["GPURENT_NAME"], pretrained=False, amp=False,
                eval_interval=1, save_period=2)
"""


def training_box(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                 client_key: KeyPair) -> tuple[Sshd, FleetConfig, Path, Path]:
    """A box whose training python is this machine's (torch, libreyolo), a runs root, data."""
    server = sshd_factory()
    runs = tmp_path / "runs"
    data = make_dataset(tmp_path / "ds")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)],
                                            python=sys.executable)],
                       known_hosts=[server.known_hosts_line()])
    return server, fleet, runs, data


def cli(fleet: FleetConfig, *args: str, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tui", "--config", fleet.source, *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)  # type: ignore[call-overload]


def status_of(fleet: FleetConfig, name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    main(["status", "--json", "--config", fleet.source])
    doc = json.loads(capsys.readouterr().out)
    runs = {r["name"]: r for r in doc["boxes"][0]["runs"]}
    return runs.get(name, {})


def test_script_launch_survives_a_cut_connection_and_completes(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server, fleet, runs, data = training_box(tmp_path, sshd_factory, client_key)
    script = tmp_path / "my train.py"
    script.write_text(SCRIPT)
    proc = cli(fleet, "launch", "box", "--name", HOSTILE, "--script", str(script), "--",
               str(data), "3")
    record = runs / f"{HOSTILE}.launch" / "launch.json"
    try:
        wait_for(record.exists, timeout=60)
        assert server.cut_connections() >= 1  # right after the start: the link dies
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    run_dir = runs / HOSTILE
    assert out.strip() == str(run_dir)
    assert "lost" in err and "training goes on" in err
    pid = json.loads(record.read_text())["pid"]

    # The run completes though its launching connection died, and `status` says so.
    wait_for(lambda: status_of(fleet, HOSTILE, capsys).get("health") == "completed",
             timeout=180, interval=0.5)
    final = read_status(run_dir)
    assert final and final["state"] == "completed" and final["pid"] == pid
    log = (runs / f"{HOSTILE}.launch" / "output.log").read_text()
    assert "script says hello" in log and str(data) in log
    assert (runs / f"{HOSTILE}.launch" / "my train.py").read_text() == SCRIPT
    assert not list(tmp_path.rglob("pwned"))

    (entry,) = [e for e in Journal().entries if e["action"] == "launch"]
    assert entry["outcome"] == "started" and entry["run"] == HOSTILE
    assert entry["run_path"] == str(run_dir) and entry["files"][0]["path"] == str(script)

    # The same name again is refused, and nothing is started.
    assert main(["launch", "box", "--config", fleet.source, "--name", HOSTILE, "--script",
                 str(script)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert read_status(run_dir)["pid"] == pid


def test_cli_launch_survives_a_cut_connection_and_bad_launches_fail_with_their_output(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server, fleet, runs, data = training_box(tmp_path, sshd_factory, client_key)
    missing = tmp_path / "nowhere" / "data.yaml"
    bad_data = ["--", "--data", str(missing), "--epochs", "2", *TRAIN]
    # The doctor looks at the data first, then `libreyolo train` starts detached ...
    procs = {"good": cli(fleet, "launch", "box", "--name", "cli run", "--", "--data",
                         str(data), "--epochs", "2", *TRAIN)}
    record = runs / "cli run.launch" / "launch.json"
    ended = {}
    try:
        wait_for(record.exists, timeout=120)
        assert server.cut_connections() >= 1  # ... and right after its start the link dies.
        # Then, at once (each pays LibreYOLO's imports), launches that must fail.
        procs.update({
            # A bad argument: libreyolo's own complaint, exit 1, no run directory.
            "bad-arg": cli(fleet, "launch", "box", "--name", "bad-arg", "--no-doctor", "--",
                           "--data", str(data), "--no-such-option", "3", *TRAIN),
            # A missing data set: LibreYOLO's doctor says so first, and nothing starts ...
            "doctor": cli(fleet, "launch", "box", "--name", "no-data", *bad_data),
            # ... and without the doctor, LibreYOLO's own words when training cannot start.
            "no-data": cli(fleet, "launch", "box", "--name", "no-data-2", "--no-doctor",
                           *bad_data),
        })
        for key, proc in procs.items():
            ended[key] = (*proc.communicate(timeout=300), proc.returncode)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    out, err, code = ended["good"]
    assert code == 0, err
    assert out.strip() == str(runs / "cli run") and "doctor:" in err
    assert "lost" in err and "training goes on" in err
    pid = json.loads(record.read_text())["pid"]
    # The run completes though its launching connection died, and `status` says so.
    wait_for(lambda: status_of(fleet, "cli run", capsys).get("health") == "completed",
             timeout=180, interval=0.5)
    final = read_status(runs / "cli run")
    assert final and final["state"] == "completed" and final["pid"] == pid

    _, err, code = ended["bad-arg"]
    assert code == 1 and "before the run wrote status.json" in err and "no-such-option" in err
    assert not (runs / "bad-arg").exists()

    _, err, code = ended["doctor"]
    assert code == 1 and "libreyolo doctor" in err and str(missing) in err
    assert not (runs / "no-data.launch").exists()

    _, err, code = ended["no-data"]
    assert code == 1 and "launch on box box failed" in err and "data_not_found" in err
    assert str(missing) in err

    outcomes = {(e["run"], e["outcome"]) for e in Journal().entries if e["action"] == "launch"}
    assert outcomes == {("cli run", "started"), ("bad-arg", "failed"), ("no-data", "refused"),
                        ("no-data-2", "failed")}


def test_monitor_through_a_jump_host_forwards_libreyolo_monitor_and_stops_it(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    jump = sshd_factory("jump")
    runs = tmp_path / "runs"
    run_dir = runs / HOSTILE
    shutil.copytree(ROOT / "tests" / "data" / "libreyolo" / "yolox_completed", run_dir)
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)],
                                            python=sys.executable,
                                            jump=f"root@127.0.0.1:{jump.port}")],
                       known_hosts=[server.known_hosts_line(), jump.known_hosts_line()])
    quoted = urllib.parse.quote(HOSTILE, safe="")
    first = cli(fleet, "monitor", "box", HOSTILE, start_new_session=True)
    second = None
    try:
        url = _url_of(first)
        with urllib.request.urlopen(f"{url}api/status?run={quoted}", timeout=10) as resp:
            assert json.loads(resp.read()) == json.loads((run_dir / "status.json").read_text())
        monitors = _pids_with(str(run_dir))
        assert len(monitors) == 1, "one libreyolo monitor on the box"

        # The box's link drops: the monitor lives on there, the same URL works again here.
        assert server.cut_connections() >= 1
        wait_for(lambda: _get(f"{url}api/status?run={quoted}") is not None, timeout=60,
                 interval=0.5)
        assert _pids_with(str(run_dir)) == monitors

        # A second look reuses the monitor that serves the run, and leaves it running.
        second = cli(fleet, "monitor", "box", str(run_dir), "--port", "0",
                     start_new_session=True)
        other = _url_of(second)
        assert other != url
        with urllib.request.urlopen(f"{other}api/runs", timeout=10) as resp:
            assert [r["id"] for r in json.loads(resp.read())["runs"]] == [HOSTILE]
        second.send_signal(signal.SIGINT)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert "already serving" in err and "left running" in err
        assert _pids_with(str(run_dir)) == monitors

        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=30)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert first.returncode == 0, err
    assert "monitor stopped" in err
    wait_for(lambda: not any(_alive(p) for p in monitors), timeout=10)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}api/runs", timeout=2)


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def _url_of(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None and proc.stderr is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"no URL: {url!r} {proc.stderr.read()}")
    return url


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pids_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"monitor" in argv and text.encode() in argv:
                found.append(int(entry.name))
    return found



async def test_w_in_the_panel_opens_the_monitor_and_quitting_stops_it(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    runs = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)],
                                            python=sys.executable)],
                       known_hosts=[server.known_hosts_line()], refresh_seconds=30)
    app = GpurentApp(fleet)

    def note() -> str:
        return str(app.notes.get("box", ""))

    async def until(check: Callable[[], object], timeout: float = 60) -> None:
        for _ in range(int(timeout / 0.05)):
            if check():
                return
            await pilot.pause(0.05)
        raise AssertionError(f"never happened; the box's note: {note()!r}")

    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen_stack[0]
        assert isinstance(screen, FleetScreen)
        await until(lambda: len(screen.fleet_list.order) == 2)
        box, path = screen.selected or ("", "")
        name = app.states[box].run(path).name  # type: ignore[union-attr]
        await pilot.press("w")
        await until(lambda: "http://127.0.0.1:" in note())
        url = re.search(r"(http://127\.0\.0\.1:\d+/)\?run=(\S+)", note())
        assert url is not None and url.group(2) == name
        status = await asyncio.to_thread(_get, f"{url.group(1)}api/status?run={name}")
        assert status == json.loads((runs / name / "status.json").read_text())
        monitors = _pids_with(path)
        assert len(monitors) == 1

        await pilot.press("w")  # w again: closed, and the monitor it started stopped
        await until(lambda: "closed: monitor stopped" in note())
        await until(lambda: not any(_alive(p) for p in monitors), timeout=10)
        assert not app.monitors

        await pilot.press("w")  # open again, then quit the panel with it open
        await until(lambda: "http://127.0.0.1:" in note())
        monitors = _pids_with(path)
        assert len(monitors) == 1
        await pilot.press("q")
    wait_for(lambda: not any(_alive(p) for p in monitors), timeout=10)
