"""The set-up scripts the README's first lines run, read as text: what a fresh Debian
machine needs them to do in order."""

from __future__ import annotations

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
