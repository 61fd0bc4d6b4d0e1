"""The on-box probe, run as a box runs it (`python3 -` fed our payload), on real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from support.fleets import DATA

from tui.model.box import BoxState, fold_answer, probe_request
from tui.model.runs import Health
from tui.onbox import probe as probe_script
from tui.remote.framing import new_nonce, unframe
from tui.remote.session import decode_answer, probe_payload

PYTHON3 = shutil.which("python3", path="/usr/bin:/bin") or "python3"


def probe(request: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    nonce = new_nonce()
    proc = subprocess.run([PYTHON3, "-"], input=probe_payload(request, nonce),
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return decode_answer(unframe(nonce, proc.stdout, max_frame=1 << 30))


def copy_run(src: str, dest: Path) -> Path:
    shutil.copytree(DATA / src, dest)
    return dest


def by_name(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in answer["runs"]}


def test_finds_runs_at_any_depth_with_hostile_names(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    names = ["plain", "with space", "quo'te\"s", "$(touch PWNED)", "new\nline", "deep/er/run"]
    for name in names:
        copy_run("yolox_completed", root / name)
    (root / "not-a-run" / "sub").mkdir(parents=True)
    os.symlink(root, root / "loop")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ans = probe({"roots": [str(root)], "runs": {}})
    finally:
        os.chdir(cwd)
    assert sorted(by_name(ans)) == sorted(names)
    assert not list(tmp_path.rglob("PWNED"))
    run = by_name(ans)["$(touch PWNED)"]
    assert run["path"] == str(root / "$(touch PWNED)")
    assert run["status"]["state"] == "completed"
    assert ans["disks"][0]["total"] > 0


def test_only_new_bytes_travel_and_partial_lines_wait(tmp_path: Path) -> None:
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:2]) + lines[2][:40])  # a torn third line
    state = fold_answer(BoxState(name="b"),
                        probe({"roots": [str(tmp_path / "runs")], "runs": {}}), 0.0)
    assert [p.epoch for p in state.runs[0].history] == [1, 2]
    with metrics.open("a") as f:
        f.write(lines[2][40:])
    ans = probe(probe_request(state, (str(tmp_path / "runs"),)))
    (run,) = ans["runs"]
    assert "status" not in run and "weights" not in run  # unchanged: not sent again
    assert run["metrics"]["text"] == lines[2]
    state = fold_answer(state, ans, 1.0)
    assert [p.epoch for p in state.runs[0].history] == [1, 2, 3]
    quiet = probe(probe_request(state, (str(tmp_path / "runs"),)))
    assert "metrics" not in quiet["runs"][0] and "log" not in quiet["runs"][0]
    assert len(json.dumps(quiet["runs"][0])) < 400


def test_replaced_or_shrunk_metrics_restart_history(tmp_path: Path) -> None:
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    metrics = run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    roots = (str(tmp_path / "runs"),)
    state = fold_answer(BoxState(name="b"), probe(probe_request(BoxState(name="b"), roots)), 0)
    assert len(state.runs[0].history) == 6
    metrics.unlink()
    metrics.write_text(lines[0])
    state = fold_answer(state, probe(probe_request(state, roots)), 1)
    assert [p.epoch for p in state.runs[0].history] == [1]
    assert state.runs[0].restarts == 1
    # Same inode, same length, different first bytes: also a restart.
    with metrics.open("r+") as f:
        f.write(lines[0].replace('"epoch": 1', '"epoch": 9'))
    state = fold_answer(state, probe(probe_request(state, roots)), 2)
    assert [p.epoch for p in state.runs[0].history] == [9]


def test_long_history_arrives_in_capped_reads(tmp_path: Path) -> None:
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    line = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    (run_dir / "metrics.jsonl").write_text(
        "".join(json.dumps(dict(line, epoch=i)) + "\n" for i in range(1, 2001)))
    request = probe_request(BoxState(name="b"), (str(tmp_path / "runs"),), metrics_cap=200_000)
    ans = probe(request)
    assert ans["runs"][0]["metrics"]["more"] is True
    state = fold_answer(BoxState(name="b"), ans, 0)
    while True:
        ans = probe(probe_request(state, (str(tmp_path / "runs"),), metrics_cap=200_000))
        state = fold_answer(state, ans, 0)
        if not ans["runs"][0]["metrics"].get("more"):
            break
    assert [p.epoch for p in state.runs[0].history] == list(range(1, 2001))


def test_log_tail_is_capped_and_survives_bad_utf8(tmp_path: Path) -> None:
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    log = run_dir / "train.log"
    with log.open("ab") as f:
        f.write(b"bad bytes \xff\xfe here\n")
        f.truncate(2 * 1024**3)  # a 2 GB log (sparse): only the tail may be read
        f.seek(0, 2)
        f.write(b"\nlast line\n")
    ans = probe({"roots": [str(tmp_path / "runs")], "runs": {}, "log_cap": 4096})
    got = ans["runs"][0]["log"]
    assert got["skipped"] > 2 * 1024**3 - 8192
    assert got["text"].endswith("last line\n") and len(got["text"]) <= 4096
    log.write_bytes(b"fresh \xff start\n")
    state = fold_answer(BoxState(name="b"), ans, 0)
    ans = probe(probe_request(state, (str(tmp_path / "runs"),)))
    assert ans["runs"][0]["log"]["reset"] is True
    assert ans["runs"][0]["log"]["text"] == "fresh \ufffd start\n"


def test_broken_status_marks_only_its_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    copy_run("yolox_completed", root / "good")
    bad = copy_run("yolox_completed", root / "bad")
    (bad / "status.json").write_text('{"schema_version": 1, "state": "runn')
    empty = copy_run("yolox_completed", root / "empty")
    (empty / "status.json").write_text("")
    nan = copy_run("yolox_completed", root / "nan")
    (nan / "status.json").write_text(
        (nan / "status.json").read_text().replace('"train_loss": ', '"train_loss": NaN, "x": '))
    state = fold_answer(BoxState(name="b"), probe({"roots": [str(root)], "runs": {}}), 0)
    health = {r.name: r.health for r in state.runs}
    assert health == {"bad": Health.UNREADABLE, "empty": Health.UNREADABLE,
                      "good": Health.COMPLETED, "nan": Health.COMPLETED}
    assert "could not be read" in state.run(str(bad)).reason  # type: ignore[union-attr]


def test_weights_listed_only_when_changed(tmp_path: Path) -> None:
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    (run_dir / "weights").mkdir()
    (run_dir / "weights" / "last.pt").write_bytes(b"x" * 100)
    roots = (str(tmp_path / "runs"),)
    state = fold_answer(BoxState(name="b"), probe(probe_request(BoxState(name="b"), roots)), 0)
    assert [(w.name, w.size) for w in state.runs[0].weights] == [("last.pt", 100)]
    assert "weights" not in probe(probe_request(state, roots))["runs"][0]
    (run_dir / "weights" / "best.pt").write_bytes(b"y" * 7)
    state = fold_answer(state, probe(probe_request(state, roots)), 1)
    assert [w.name for w in state.runs[0].weights] == ["best.pt", "last.pt"]


def test_pid_liveness(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    boot = probe_script._boot_time()
    assert probe_script.pid_alive(os.getpid(), None, boot) is True
    assert probe_script.pid_alive(gone.pid, None, boot) is False
    # Our pid, but the run started long before this process did: a reused pid.
    assert probe_script.pid_alive(os.getpid(), "2001-01-01T00:00:00+00:00", boot) is False
    assert probe_script.pid_alive("12", None, boot) is None


def test_roots_that_are_missing_or_loop(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    afile = tmp_path / "file"
    afile.write_text("x")
    ans = probe({"roots": [str(tmp_path / "nope"), str(loop), str(afile)], "runs": {}})
    errors = [r.get("error", "") for r in ans["roots"]]
    assert "FileNotFoundError" in errors[0]
    assert "Too many levels of symbolic links" in errors[1]
    assert errors[2] == "not a directory"
    assert ans["runs"] == []


def test_vanished_run_directory_is_reported_not_fatal(tmp_path: Path) -> None:
    out = probe_script.probe_run(str(tmp_path / "gone"), str(tmp_path), "gone", {}, {}, None)
    assert out["status_missing"] is True
    ans = probe({"roots": [str(tmp_path)], "runs": {str(tmp_path / "old"): {"m_off": 5}}})
    assert ans["gone"] == [str(tmp_path / "old")]


def test_three_hundred_runs(tmp_path: Path) -> None:
    src = DATA / "yolox_completed"
    for i in range(300):
        shutil.copytree(src, tmp_path / "runs" / f"exp{i // 50}" / f"run{i:03d}")
    started = time.monotonic()
    ans = probe({"roots": [str(tmp_path / "runs")], "runs": {}})
    assert len(ans["runs"]) == 300
    assert time.monotonic() - started < 60


def fake_nvidia_smi(bin_dir: Path, script: str) -> dict[str, str]:
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin")


def test_gpu_rows_absent_failing_and_present(tmp_path: Path) -> None:
    ans = probe({"roots": [], "runs": {}}, env={"PATH": "/usr/bin:/bin"})
    assert ans["gpus"] == {"absent": True}
    env = fake_nvidia_smi(tmp_path / "bad", "echo 'NVML: Driver/library mismatch' >&2; exit 9\n")
    ans = probe({"roots": [], "runs": {}}, env=env)
    assert ans["gpus"]["error"] == "nvidia-smi exited 9: NVML: Driver/library mismatch"
    env = fake_nvidia_smi(tmp_path / "good", (
        'case "$*" in *--query-gpu=index,name,utilization.gpu,memory.used,memory.total,'
        'temperature.gpu,power.draw*--format=csv,noheader,nounits*) '
        'echo "0, NVIDIA H200, 88, 70000, 143771, 55, 410.20";; *) exit 3;; esac\n'))
    box = fold_answer(BoxState(name="b"), probe({"roots": [], "runs": {}}, env=env), 0)
    assert box.gpus[0].util_pct == 88.0 and box.gpus[0].mem_total_mib == 143771.0


def test_one_answer_carries_at_most_its_budgets_of_history_and_logs(tmp_path: Path) -> None:
    """A first look at a box of many runs with long logs and histories: the probe sent
    every run's 16 KiB log tail and 8 MiB of metrics in one answer, so a legitimate
    answer could reach the client's cap; the rest now waits for the next round."""
    root = tmp_path / "runs"
    for n in range(100):
        run = root / f"r{n:03d}"
        run.mkdir(parents=True)
        (run / "status.json").write_text('{"schema_version": 1, "state": "running"}')
        (run / "train.log").write_bytes(b"loss went down again, nicely\n" * 1000)
        (run / "metrics.jsonl").write_bytes(b'{"epoch": 1, "loss": 0.5}\n' * 2000)
    request = {"roots": [str(root)], "max_runs": 1000, "metrics_cap": 1 << 20, "runs": {}}
    answer = probe(request)
    logs = sum(len(r.get("log", {}).get("text", "")) for r in answer["runs"])
    metrics = sum(len(r.get("metrics", {}).get("text", "")) for r in answer["runs"])
    assert logs <= probe_script.LOG_BUDGET and metrics <= probe_script.METRICS_BUDGET
    waiting = [r for r in answer["runs"] if r["log"].get("more") and not r["log"]["text"]]
    assert waiting and all("off" not in r["log"] for r in waiting)  # read next round


def test_folders_in_weights_are_listed_bounded_and_only_when_changed(tmp_path: Path) -> None:
    """A push takes only weights/'s own files, so a folder there (weights/old/, a link to
    one) is named to the guard: at most 16 names and a count of the rest, sent with the
    weights listing only when it changes (an idle refresh stays as small as before)."""
    run_dir = copy_run("yolox_completed", tmp_path / "runs" / "r")
    weights = run_dir / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"b" * 10)
    (weights / "old").mkdir()
    (weights / "old" / "epoch_5.pt").write_bytes(b"5" * 10)
    (tmp_path / "elsewhere").mkdir()
    (weights / "archive").symlink_to(tmp_path / "elsewhere")
    roots = (str(tmp_path / "runs"),)
    state = fold_answer(BoxState(name="b"), probe(probe_request(BoxState(name="b"), roots)), 0)
    (run,) = state.runs
    assert [w.name for w in run.weights] == ["best.pt"]
    assert (run.weight_dirs, run.weight_dirs_more) == (("archive", "old"), 0)
    idle = probe(probe_request(state, roots))["runs"][0]
    assert "weights" not in idle and "w_dirs" not in idle
    for n in range(20):
        (weights / f"f{n:02d}").mkdir()
    state = fold_answer(state, probe(probe_request(state, roots)), 1)
    (run,) = state.runs
    assert run.weight_dirs == ("archive", *(f"f{n:02d}" for n in range(15)))
    assert run.weight_dirs_more == 6  # f15 to f19, old
    for folder in [*weights.glob("f*"), weights / "old"]:
        shutil.rmtree(folder)
    (weights / "archive").unlink()
    state = fold_answer(state, probe(probe_request(state, roots)), 2)
    assert state.runs[0].weight_dirs == () and state.runs[0].weight_dirs_more == 0
