"""`gpurent-tui lint` as a user runs it, in its own process: the guide's three cases and
their exit codes, the JSON document, and hostile files answered with one clear line and
exit 2. The script is never run: a script that would write a file if imported leaves
none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tui.model.lint import MAX_BYTES

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "serverless"


def gpurent(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tui", "lint", *argv], capture_output=True,
                          text=True, env=env, timeout=60, cwd=cwd or ROOT)


def test_the_guides_modal_example_is_clean() -> None:
    done = gpurent(str(DATA / "modal_train.py"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("modal_train.py: clean") and done.stderr == ""


def test_without_timeout_it_fails_naming_the_line_and_the_fix() -> None:
    script = DATA / "modal_no_timeout.py"
    done = gpurent(str(script))
    assert done.returncode == 1
    line = next(i for i, t in enumerate(script.read_text().splitlines(), 1)
                if t.startswith("@app.function("))
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"{script}:{line}:2: error GR101 ")
    assert "  fix: add timeout=SECONDS" in first
    assert done.stdout.splitlines()[-1].endswith("1 error(s), 0 warning(s)")


def test_committing_only_at_the_end_warns_and_exits_0() -> None:
    done = gpurent(str(DATA / "modal_commit_at_end.py"), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpurent.lint/1" and doc["exit_code"] == 0
    assert doc["errors"] == 0 and doc["warnings"] == 1 and doc["providers"] == ["modal"]
    [finding] = doc["findings"]
    assert finding["code"] == "GR104" and finding["severity"] == "warning"
    assert "cache.commit()" in finding["message"] and "on_train_epoch_end" in finding["fix"]


def test_the_beam_example_is_clean_in_json() -> None:
    done = gpurent(str(DATA / "beam_train.py"), "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["findings"] == [] and doc["providers"] == ["beam"]


def test_the_script_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\nimport modal\n"
                      "raise SystemExit(7)\n")
    done = gpurent(str(script), cwd=tmp_path)
    assert done.returncode == 0 and "GR100" in done.stdout
    assert not marker.exists()


def _hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    cases = {
        "huge": (b"x = 1\n" * (MAX_BYTES // 6 + 10), "too large"),
        "deep": (b"-" * 200_000 + b"1\n", "too deeply nested"),
        "deep-subscripts": (b"x" + b"[0]" * 50_000 + b"\n", "too deeply nested"),
        "not-python": (b"Modal, please train my model.\n", "not Python: line 1"),
        "binary": (bytes(range(256)) * 8, "binary"),
        "latin-1": ("p = 'caf\u00e9'\n".encode("latin-1"), "not UTF-8"),
    }
    out = {}
    for name, (data, says) in cases.items():
        path = tmp_path / f"{name}.py"
        path.write_bytes(data)
        out[name] = (path, says)
    out["missing"] = (tmp_path / "nope.py", "no such file")
    out["directory"] = (tmp_path, "not a regular file")
    return out


@pytest.mark.parametrize("case", ["huge", "deep", "deep-subscripts", "not-python", "binary",
                                  "latin-1", "missing", "directory"])
def test_a_hostile_file_gets_one_clear_line_and_exit_2(tmp_path: Path, case: str) -> None:
    path, says = _hostile(tmp_path)[case]
    done = gpurent(str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"lint: {path}: cannot read it: ") and says in line
    as_json = gpurent(str(path), "--json")
    assert as_json.returncode == 2
    doc = json.loads(as_json.stdout)
    assert says in doc["unreadable"] and doc["findings"] == [] and doc["exit_code"] == 2


def test_a_control_sequence_in_the_file_name_is_not_printed(tmp_path: Path) -> None:
    path = tmp_path / "evil\x1b]52;c;aGk=\x07.py"
    path.write_bytes(b"(\n")
    done = gpurent(str(path))
    assert done.returncode == 2 and "\x1b" not in done.stderr and "\x07" not in done.stderr


# Defect 25: several scripts in one call.
def test_several_scripts_get_one_report_each_and_the_worst_exit_code(tmp_path: Path) -> None:
    clean, failing, warning = (DATA / "modal_train.py", DATA / "modal_no_timeout.py",
                               DATA / "modal_commit_at_end.py")
    done = gpurent(str(clean), str(warning))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{clean}: clean"
    assert lines[-1] == f"{warning}: 0 error(s), 1 warning(s)"
    done = gpurent(str(failing), str(clean), str(warning))
    assert done.returncode == 1
    summaries = [t for t in done.stdout.splitlines() if ": " in t and "GR" not in t]
    assert summaries == [f"{failing}: 1 error(s), 0 warning(s)", f"{clean}: clean",
                         f"{warning}: 0 error(s), 1 warning(s)"]
    missing = tmp_path / "nope.py"
    done = gpurent(str(failing), str(missing), str(clean))
    assert done.returncode == 2  # unreadable beats an error
    assert done.stderr == f"lint: {missing}: cannot read it: no such file\n"
    assert done.stdout.splitlines()[-1] == f"{clean}: clean"  # the rest still read


def test_several_scripts_in_json_are_a_set_of_the_one_script_documents(
        tmp_path: Path) -> None:
    one = json.loads(gpurent(str(DATA / "modal_no_timeout.py"), "--json").stdout)
    assert one["schema"] == "gpurent.lint/1"  # one script: the document as before
    missing = tmp_path / "nope.py"
    done = gpurent(str(DATA / "modal_no_timeout.py"), str(missing),
                   str(DATA / "beam_train.py"), "--json")
    assert done.returncode == 2
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpurent.lint-set/1" and doc["exit_code"] == 2
    first, gone, beam = doc["scripts"]
    assert first == one
    assert gone["script"] == str(missing) and gone["unreadable"] == "no such file"
    assert beam["exit_code"] == 0 and beam["providers"] == ["beam"]
