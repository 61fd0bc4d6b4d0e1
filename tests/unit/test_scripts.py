"""The set-up scripts the README's first lines run, read as text: what a fresh Debian
machine needs them to do in order."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def commands(name: str) -> list[str]:
    lines = (SCRIPTS / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_the_demos_apt_fallback_refreshes_the_package_lists_first() -> None:
    """A fresh Debian container has empty package lists: `apt-get install pipx` alone
    finds no pipx there."""
    lines = commands("demo")
    install = next(i for i, line in enumerate(lines) if "apt-get install" in line)
    assert any("apt-get update" in line for line in lines[:install]), lines


def test_the_full_suite_requires_the_terminal_test() -> None:
    """scripts/test-all (CI) runs pytest with GPURENT_REQUIRE_TMUX=1, so the demo's tmux
    test fails instead of skipping there."""
    assert any("GPURENT_REQUIRE_TMUX=1" in line and "pytest" in line
               for line in commands("test-all"))


def test_the_full_suite_installs_and_requires_prometheus() -> None:
    """scripts/test-all (CI) installs Debian's prometheus (promtool too) and runs pytest with
    GPURENT_REQUIRE_PROMETHEUS=1, so the rules' and the real scrape's tests fail instead of
    skipping there."""
    lines = commands("test-all")
    install = " ".join(lines[i] + " " + lines[i + 1] for i, line in enumerate(lines[:-1])
                       if "apt-get install" in line)
    assert "prometheus" in install.split(), install
    assert any("GPURENT_REQUIRE_PROMETHEUS=1" in line and "pytest" in line for line in lines)


FAKE_PYTHON = """#!/bin/sh
# python3 -m pipx ...: what scripts/demo asks of pipx, recorded; nothing installed.
echo "$*" >> "{log}"
case "$*" in
  "-m pipx environment --value PIPX_BIN_DIR") echo "{bin}" ;;
esac
exit 0
"""


def run_demo_script(tmp_path: Path, path: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """scripts/demo with a stand-in python3 (its pipx) and a stand-in gpurent-tui."""
    bin_dir, log = tmp_path / "pipx-bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON.format(log=log, bin=bin_dir))
    python.chmod(0o755)
    panel = bin_dir / "gpurent-tui"
    panel.write_text('#!/bin/sh\necho "panel $*"\nexit 0\n')
    panel.chmod(0o755)
    done = subprocess.run([str(SCRIPTS / "demo")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHON": str(python),
                               "PATH": path.format(bin=bin_dir)})
    return done, log.read_text()


def test_the_demo_puts_gpurent_tui_on_path_and_says_how_to_reach_it(tmp_path: Path) -> None:
    """The README's next step is `gpurent-tui`: pipx's PATH warning scrolled away behind
    the demo, and the command was not found. The script runs `pipx ensurepath`, and once
    the demo ends says how to open a new shell, or the exact path to run."""
    done, calls = run_demo_script(tmp_path, "/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert "-m pipx ensurepath" in calls.splitlines()
    assert done.stdout.startswith("panel demo")
    bin_dir = tmp_path / "pipx-bin"
    assert f"{bin_dir}/gpurent-tui" in done.stderr and "new shell" in done.stderr
    # Already on PATH: nothing to say.
    on_path, _ = run_demo_script(tmp_path, "{bin}:/usr/bin:/bin")
    assert on_path.returncode == 0 and on_path.stderr == ""
