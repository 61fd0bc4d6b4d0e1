"""Every exit code a command can give is in the commands table (docs/commands.md): each
case here runs the command for real (no box needed: each ends before any connection) and
finds its code in that command's row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / "docs" / "commands.md"  # the README links there
CONFIG = '''[[box]]
name = "box"
host = "127.0.0.1"
port = 1
'''


def documented_codes() -> dict[str, set[int]]:
    """Command word (`push`, `stop`, `` for the panel) -> the codes its row lists."""
    rows: dict[str, set[int]] = {}
    for line in COMMANDS.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or not cells[0].startswith("`gpurent-tui"):
            continue
        codes = {int(n) for n in re.findall(r"(?<![\w.$-])(\d+)(?![\w.%])", cells[2])}
        for command in re.findall(r"`gpurent-tui ?([a-z-]*)", cells[0]):
            rows[command] = codes
        if "start BOX" in cells[0]:
            rows["start"] = codes
    return rows


def exit_code(argv: list[str]) -> int:
    """What the process would exit with: main's return, or argparse's exit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "fleet.toml"
    path.write_text(CONFIG)
    return str(path)


CASES = [
    ("push", ["push", "nosuchbox"], 2),
    ("push", ["push", "box"], 1),  # no [box.push] destination
    ("stop", ["stop", "nosuchbox"], 2),
    ("stop", ["stop", "box"], 1),  # a manual box without stop_command: refused
    ("start", ["start", "box"], 1),  # a manual box cannot be started
    ("destroy", ["destroy", "box"], 2),  # no --yes
    ("destroy", ["destroy", "nosuchbox", "--yes"], 2),
    ("launch", ["launch", "box", "--script", "/nonexistent/train.py"], 2),
    ("monitor", ["monitor", "nosuchbox", "run"], 2),
    ("guard", ["guard", "nosuchbox", "--max-hours", "1"], 2),
    ("guard", ["guard", "box", "--max-hours", "1", "--on", "soon=stop"], 2),
    ("check", ["check", "nosuchbox"], 2),
    ("doctor", ["doctor", "nosuchbox", "data.yaml"], 2),
    ("fetch", ["fetch", "nosuchbox", "org/name"], 2),
    ("size", ["size", "--data", "not-a-size-or-a-path"], 2),
    ("lint", ["lint", "/nonexistent/train.py"], 2),
    ("lint", ["lint", str(ROOT / "tests/data/serverless/modal_no_timeout.py")], 1),
    ("lint", ["lint", str(ROOT / "tests/data/serverless/modal_commit_at_end.py")], 0),
    ("costs", ["costs", "--since", "not-a-date"], 2),
    ("check-config", ["check-config"], 0),
    ("init", ["init"], 2),  # the config exists
    ("status", ["status", "--config", "/nonexistent/fleet.toml"], 2),
    ("", ["--config", "/nonexistent/fleet.toml"], 2),
]


@pytest.mark.parametrize(("command", "argv", "code"), CASES,
                         ids=[" ".join(a) for _, a, _ in CASES])
def test_the_exit_code_is_documented(command: str, argv: list[str], code: int,
                                        config: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    if "--config" not in argv:
        argv = [*argv, "--config", config]
    assert exit_code(argv) == code, capsys.readouterr()
    listed = documented_codes().get(command)
    assert listed is not None, f"no row for `gpurent-tui {command}` in docs/commands.md"
    assert code in listed, f"`gpurent-tui {command}` exits {code}; its row lists {listed}"


def test_every_command_has_a_row_and_usage_errors_are_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tui.__main__ import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) <= set(documented_codes()), \
        set(sub.choices) - set(documented_codes())
    assert exit_code(["push"]) == 2
    text = COMMANDS.read_text()
    assert "exits 2 on a usage error" in text and "130 when interrupted" in text
