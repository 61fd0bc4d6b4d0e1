"""Box interpreters for `profile` tests: a venv whose `libreyolo profile run` misbehaves on
cue (prints garbage, floods stdout, or writes a profile.json of impossible numbers), or
answers the H200's recorded profile."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from support.box_python import make_venv, site_packages
from support.libreyolo_train import wait_for

_HOSTILE_CLI = r'''
"""A hostile `libreyolo` CLI: what `profile run` does is read from mode.txt beside it."""
import json
import os
import sys

LOADER = "gpurent-standin-loader"


def entrypoint():
    mode = open(os.path.join(os.path.dirname(__file__), "mode.txt")).read().strip()
    args = sys.argv[1:]
    project = args[args.index("--project") + 1]
    if mode == "slow":  # a profile that takes its time: it is cancelled before it ends
        import subprocess
        import time
        # a dataloader worker of its own, as torch's DataLoader forks them
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", LOADER])
        time.sleep(120)
        return 0
    if mode == "echo":  # says back what echo.txt holds (a secret it was sent, say)
        sys.stderr.write("refused: " + open(os.path.join(os.path.dirname(__file__),
                                                         "echo.txt")).read() + "\n")
        return 1
    if mode == "garbage":
        sys.stdout.write("\x1b]52;c;cGF5bG9hZA==\x07{not json\n\x00\xff rubbish\n")
        sys.stderr.write("Traceback: \x1b[2J boom\n")
        return 1
    if mode == "flood":
        chunk = "A" * (1 << 20)
        for _ in range(64):  # 64 MiB on stdout, 64 MiB on stderr
            sys.stdout.write(chunk)
            sys.stderr.write(chunk)
        return 0
    if mode == "absurd":
        os.makedirs(os.path.join(project, "prof"))
        with open(os.path.join(project, "prof", "profile.json"), "w") as f:
            f.write(json.dumps({"img_per_s": float("nan"), "dataload_frac": -0.5,
                                "gpu_util": 1e300, "step_ms": -3, "bound": "\x1b[31m" * 300,
                                "kernels": ["x" * 1000] * 1000}))
        sys.stdout.write(json.dumps({"img_per_s": float("inf"), "bound": 7}) + "\n")
        return 0
    if mode == "recorded":  # the H200's own profile.json, as LibreYOLO wrote it there
        os.makedirs(os.path.join(project, "prof"))
        here = os.path.dirname(__file__)
        with open(os.path.join(here, "recorded.json")) as src, \
                open(os.path.join(project, "prof", "profile.json"), "w") as dst:
            dst.write(src.read())
        return 0
    return 2
'''


LOADER = "gpurent-standin-loader"  # in the argv of the slow profiler's loader worker
DATA = Path(__file__).resolve().parents[1] / "data" / "libreyolo-profile-h200"


def hostile_libreyolo(directory: Path, mode: str, echo: str = "") -> Path:
    """A venv's python whose `libreyolo` package misbehaves as `mode` says (or, `recorded`,
    answers what LibreYOLO answered on the H200 with one worker; `echo`, prints `echo`
    on stderr and fails)."""
    python = make_venv(directory)
    package = site_packages(python) / "libreyolo"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '1.6.0'\n")
    (package / "cli" / "__init__.py").write_text(_HOSTILE_CLI)
    (package / "cli" / "mode.txt").write_text(mode)
    (package / "cli" / "echo.txt").write_text(echo)
    if mode == "recorded":
        (package / "cli" / "recorded.json").write_bytes((DATA / "profile-1.json").read_bytes())
    return python


def box_processes(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose command line holds `marker` (a
    venv's path: the on-box program, the profiler it started, that one's workers); the
    test box is this machine, so its /proc is ours to read."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                "utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append((int(entry.name), cmdline.strip()))
    return found


GONE_WITHIN = 10.0  # seconds: the program's beat is 2 s; sshd and the kill take the rest


def profiling(venv: Path) -> list[tuple[int, str]]:
    """The slow profile's processes once all three run (the on-box program, the profiler
    it started, that one's loader worker); empty until then."""
    found = box_processes(str(venv))
    return found if any(LOADER in cmd for _, cmd in found) and \
        any("profile run" in cmd for _, cmd in found) and len(found) >= 3 else []


def nothing_left(venv: Path) -> None:
    """Every process of the profile ends within GONE_WITHIN seconds; else the test fails
    naming what still runs (and the test kills it, so nothing outlives the test)."""
    try:
        wait_for(lambda: not box_processes(str(venv)), GONE_WITHIN, 0.1)
    except TimeoutError:
        left = box_processes(str(venv))
        for pid, _ in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"still running on the box {GONE_WITHIN:g} s later: {left}")
