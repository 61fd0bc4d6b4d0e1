"""`launch` over real sshd with a stand-in trainer: detach, wait, refuse, report, journal.

The stand-in is a script the launch uploads and runs with the box's python3:
it writes status.json the way LibreYOLO does (atomically, with its pid) after
a pause, or crashes first printing hostile bytes. The real trainer is run by
tests/e2e/test_launch.py; these keep the rules fast to check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet
from support.libreyolo_train import read_status, wait_for
from support.sshd import KeyPair, Sshd, bin_dir_without
from support.stand_in_trainer import TRAINER
from support.token_box import received_text, recording_python

from tui.__main__ import main
from tui.actions.launch import start_detached
from tui.model.config import FleetConfig
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.store.journal import Journal

ROOT = Path(__file__).resolve().parents[2]



@pytest.fixture
def box(tmp_path: Path, sshd_factory: Callable[..., Sshd],
        client_key: KeyPair) -> tuple[Sshd, FleetConfig, Path, Path]:
    server = sshd_factory()
    runs = tmp_path / "runs"
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, runs_roots=[str(runs)])],
                       known_hosts=[server.known_hosts_line()])
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    return server, fleet, runs, trainer


def assert_detached(pid: int, log: Path) -> None:
    """What lets a process outlive its SSH session: its own session (no controlling
    terminal to hang up), SIGHUP ignored, stdin /dev/null, output to the log."""
    assert os.getsid(pid) == pid
    ignored = next(int(line.split()[1], 16) for line in
                   Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("SigIgn:"))
    assert ignored & (1 << (signal.SIGHUP - 1))
    assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2") == str(log)


def launch(fleet: FleetConfig, trainer: Path, name: str, *args: str) -> list[str]:
    return ["launch", "box", "--config", fleet.source, "--name", name, "--script",
            str(trainer), *args]


def test_waits_for_status_json_through_a_cut_connection(
        box: tuple[Sshd, FleetConfig, Path, Path]) -> None:
    server, fleet, runs, trainer = box
    proc = subprocess.Popen([sys.executable, "-m", "tui", *launch(fleet, trainer, "cut",
                                                                    "--", "ok", "2", "2")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = runs / "cut.launch" / "launch.json"
    try:
        wait_for(record.exists, timeout=30)
        assert server.cut_connections() >= 1
        assert_detached(json.loads(record.read_text())["pid"], runs / "cut.launch" / "output.log")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == f"{runs / 'cut'}\n"
    assert "connection to box box lost" in err and "training goes on" in err
    pid = json.loads(record.read_text())["pid"]
    status = wait_for(lambda: (s := read_status(runs / "cut")) and s["state"] == "completed"
                      and s, timeout=30)
    assert status["pid"] == pid  # the process started before the cut finished the run


def test_a_crash_before_status_json_shows_its_output_cleaned_and_exits_1(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, fleet, runs, trainer = box
    assert main(launch(fleet, trainer, "crash", "--", "crash")) == 1
    err = capsys.readouterr().err
    assert "launch on box box failed: the process exited 3 before the run wrote status.json" \
        in err
    assert "FileNotFoundError: /data/missing.yaml not found" in err
    assert "stand-in trainer ['crash']" in err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    assert not (runs / "crash").exists()
    # A script launch has no data set to doctor unless told one: it says so, not silently.
    assert "doctor: skipped (no --data)" in err
    (entry,) = Journal().entries
    assert entry["action"] == "launch" and entry["outcome"] == "failed"
    assert "exited 3" in entry["error"]


def test_a_run_that_fails_as_it_starts_says_why(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, fleet, _, trainer = box
    assert main(launch(fleet, trainer, "oom", "--", "fail", "0.2")) == 1
    err = capsys.readouterr().err
    assert "the run failed as it started: RuntimeError: CUDA out of memory" in err


def test_an_existing_run_is_refused_unless_resumed(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, fleet, runs, trainer = box
    old = runs / "again"
    old.mkdir(parents=True)
    (old / "status.json").write_text(json.dumps({"state": "completed", "pid": 1}))
    assert main(launch(fleet, trainer, "again", "--", "ok", "0.2", "0")) == 1
    assert f"run directory {old} already exists (pass --resume" in capsys.readouterr().err
    assert not (runs / "again.launch").exists()
    assert json.loads((old / "status.json").read_text())["pid"] == 1

    # --resume waits for a status.json newer than the one there, not the old one.
    assert main(launch(fleet, trainer, "again", "--resume", "--", "ok", "1", "0")) == 0
    assert capsys.readouterr().out == f"{old}\n"
    assert json.loads((old / "status.json").read_text())["pid"] != 1
    assert main(launch(fleet, trainer, "fresh", "--resume", "--", "ok", "0", "0")) == 1
    assert "there is no run directory" in capsys.readouterr().err


def test_a_failed_check_refuses_the_launch_unless_forced(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, fleet, runs, trainer = box
    Journal().record(box="box", action="check", outcome="problems",
                     error="CUDA not available: no GPU visible to this container")
    assert main(launch(fleet, trainer, "r1", "--", "ok", "0", "0")) == 1
    err = capsys.readouterr().err
    assert "the last check of box box" in err and "CUDA not available" in err
    assert "--force" in err and not runs.exists()
    assert main(launch(fleet, trainer, "r1", "--force", "--", "ok", "0", "0")) == 0
    refused, started = [e for e in Journal().entries if e["action"] == "launch"]
    assert (refused["outcome"], started["outcome"]) == ("refused", "started")
    # The journal says the launch went past the failed check, and which check.
    assert "force" not in refused
    assert started["force"] is True
    assert "CUDA not available" in started["forced_past"]


def test_the_journal_gets_the_arguments_but_no_token(
        box: tuple[Sshd, FleetConfig, Path, Path], client_key: KeyPair, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    server, fleet, runs, trainer = box
    token = "hf_NotARealTokenButSecret"
    monkeypatch.setenv("HF_TOKEN", token)
    # Keys of no telling shape, known only by the variables they come from: W&B's, and
    # the one the box's pushes use (token_env).
    wandb, scoped = "wandbNotHexButSecret", "scopedNotShapedButSecret"
    monkeypatch.setenv("WANDB_API_KEY", wandb)
    monkeypatch.setenv("BOX_HF_TOKEN", scoped)
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, runs_roots=[str(runs)],
        push={"hf_repo": "me/runs", "token_env": "BOX_HF_TOKEN"})],
        known_hosts=[server.known_hosts_line()])
    assert main(launch(fleet, trainer, "tok", "--", "ok", "0", "0", "--hf-token", token,
                       f"--note=uses {token}", "--w", wandb, f"--s={scoped}")) == 0
    capsys.readouterr()
    line = (Path(os.environ["XDG_STATE_HOME"]) / "gpurent-tui" / "journal.jsonl").read_text()
    assert token not in line and wandb not in line and scoped not in line
    (entry,) = Journal().entries
    assert entry["message"] == "python trainer.py ok 0 0 --hf-token '***' '--note=uses ***' " \
                               "--w '***' '--s=***'"
    assert entry["run_path"] == str(runs / "tok") and entry["outcome"] == "started"
    assert entry["files"][0]["name"] == "trainer.py" and entry["destination"]


def test_a_failure_echoing_secrets_back_reaches_neither_journal_nor_terminal(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The launched command fails and prints its own arguments (as a list and as
    argparse's error line): keys the panel never held, known only by their option's name
    or their place in a URL."""
    _, fleet, _, trainer = box
    wandb, password, k = "wandbNotShapedSecret1", "urlPassSecret2", "kOptionSecret3"
    assert main(launch(fleet, trainer, "leak", "--", "crash", "--wandb-key", wandb,
                       f"--url=https://alice:{password}@data.example.com/set", "-k", k,
                       "--auth", "authSecret4", "--credentials", "credsSecret5",
                       "--pass", "passSecret6")) == 1
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and "stand-in trainer" in err
    line = (Path(os.environ["XDG_STATE_HOME"]) / "gpurent-tui" / "journal.jsonl").read_text()
    (entry,) = Journal().entries
    assert entry["outcome"] == "failed" and "--wandb-key '***' " in entry["message"]
    assert "unrecognized arguments: --wandb-key ***" in err
    for secret in (wandb, password, k, "authSecret4", "credsSecret5", "passSecret6"):
        assert secret not in line and secret not in err


def test_a_launch_sends_the_box_no_token_of_this_machine(
        sshd_factory: Callable[..., Sshd], client_key: KeyPair, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The token rule's launch step: the Hub token, the box's token_env and W&B's key of
    this machine never travel with a launch (only what the user typed goes)."""
    secrets = {"HF_TOKEN": "hf_LaunchNeverSendsThis0123456789",
               "BOX_HF_TOKEN": "scopedLaunchNeverSendsThis", "WANDB_API_KEY": "w" * 40}
    for var, value in secrets.items():
        monkeypatch.setenv(var, value)
    python3, received = recording_python(tmp_path, "python3")
    server = sshd_factory(env={"PATH": f"{python3.parent}:/usr/bin:/bin"})
    runs = tmp_path / "runs"
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, runs_roots=[str(runs)],
        push={"hf_repo": "me/runs", "token_env": "BOX_HF_TOKEN"})],
        known_hosts=[server.known_hosts_line()])
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    assert main(launch(fleet, trainer, "quiet", "--", "ok", "0", "0")) == 0
    capsys.readouterr()
    sent = received_text(received)
    assert "trainer.py" in sent
    assert not [var for var, value in secrets.items() if value in sent]


def test_bad_invocations_exit_2_before_touching_the_box(
        box: tuple[Sshd, FleetConfig, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, fleet, runs, trainer = box
    assert main(["launch", "box", "--config", fleet.source]) == 2
    assert "after `--`" in capsys.readouterr().err
    assert main(["launch", "box", "--config", fleet.source, "--name", "a/b", "--",
                 "--data", "d"]) == 2
    assert "one non-empty path component" in capsys.readouterr().err
    assert main(["launch", "box", "--config", fleet.source, "--script",
                 str(trainer.with_name("nope.py"))]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["launch", "nobox", "--config", fleet.source, "--", "--data", "d"]) == 2
    assert "no box named 'nobox'" in capsys.readouterr().err
    assert not runs.exists()


async def test_start_detached_outlives_the_connection(
        box: tuple[Sshd, FleetConfig, Path, Path], tmp_path: Path) -> None:
    server, fleet, _, _ = box
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    program = tmp_path / "keeper" / "keep.py"
    try:
        started = await start_detached(
            session, ["python3", str(program), "it's $(alive)"], str(tmp_path / "keeper.log"),
            files=[{"path": str(program), "text": "import sys, time\nprint(sys.argv[1], "
                                                  "flush=True)\ntime.sleep(60)\n"}])
        assert server.cut_connections() >= 1
        wait_for(lambda: "it's $(alive)" in (tmp_path / "keeper.log").read_text(), timeout=10)
        assert Path(f"/proc/{started.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        assert_detached(started.pid, tmp_path / "keeper.log")
    finally:
        await session.close()
        if "started" in locals():
            os.kill(started.pid, signal.SIGKILL)


FAKE_PYTHON = r"""#!PYTHON
# A box that lies: whatever program it is sent, it answers hostile frames.
import json, os, re, sys, time
data = sys.stdin.read()
nonce = re.search(r"NONCE = '([0-9a-f]+)'", data).group(1)
mode = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mode")).read().strip()

def frame(obj):
    p = json.dumps(obj).encode()
    sys.stdout.buffer.write(b"\n--gpurent-" + nonce.encode() + b" " + str(len(p)).encode()
                            + b"\n" + p)
    sys.stdout.flush()

print("Welcome to your rented box!")
if mode == "flood":
    frame({"started": {"pid": 1}})
    time.sleep(0.3)
    sys.stdout.buffer.write(b"\n--gpurent-" + nonce.encode() + b" 99999999999\n")
    sys.exit(0)
frame({"started": {"pid": "not a pid", "run_dir": "/x\x1b]0;evil title\x07",
                   "log": "\x1b[2J"}})
frame({"died": {"exit": 2, "tail": ("\x1b]52;c;aGk=\x07evil " + "A" * 5000 + "\r\n") * 100}})
"""


def test_a_lying_box_cannot_flood_or_steer_the_terminal(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    bin_dir = bin_dir_without(tmp_path / "bin", ["python3*"])
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON.replace("PYTHON", sys.executable, 1))
    fake.chmod(0o755)
    (bin_dir / "mode").write_text("lies")
    server = sshd_factory(env={"PATH": str(bin_dir)})
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    command = ["launch", "box", "--config", fleet.source, "--name", "x", "--no-doctor", "--",
               "--data", "d.yaml"]
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    assert "exited 2 before the run wrote status.json" in err
    assert "doctor:" not in err  # --no-doctor: asked for, so not remarked on
    tail = err.split("--- its output (last 40 lines) ---\n", 1)[1].splitlines()
    assert 1 <= len(tail) <= 40 and all(len(line) <= 400 for line in tail)
    assert tail[-1].startswith("\ufffd]52;c;aGk=\ufffdevil AAAA")
    assert len(err) < 40_000

    (bin_dir / "mode").write_text("flood")  # an answer over the cap: believed no further
    started = time.monotonic()
    assert main(command) == 1
    err = capsys.readouterr().err
    # "unknown" once its first frame (a pid) was read, "failed" when the bad header came
    # in the same read and the frame before it was dropped with it.
    outcome = "unknown" if "launch on box box unknown" in err else "failed"
    assert f"launch on box box {outcome}" in err and "over the cap" in err
    assert time.monotonic() - started < 30  # not asked again and again
    assert [e["outcome"] for e in Journal().entries] == ["failed", outcome]
