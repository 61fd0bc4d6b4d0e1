"""The command line's shape: one module per command group under tui/cli, the exit codes
defined once (tui/model/exit_codes.py), and every JSON document built in the model."""

from __future__ import annotations

import ast
import re

from support.imports import ROOT

CLI = ROOT / "tui" / "cli"


def test_no_cli_module_is_over_300_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in CLI.glob("*.py")}
    assert len(sizes) > 5 and max(sizes.values()) <= 300, sizes


def test_the_exit_codes_are_defined_once() -> None:
    """`EXIT_... = ...` only in tui/model/exit_codes.py: every layer imports it from there."""
    defined = {}
    for path in (ROOT / "tui").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                        defined.setdefault(target.id, []).append(
                            str(path.relative_to(ROOT)))
    assert defined and all(where == ["tui/model/exit_codes.py"]
                           for where in defined.values()), defined


def test_the_cli_builds_no_json_document_itself() -> None:
    """Every --json document comes from a tui/model/*_doc.py function; the CLI only
    prints it (tui/cli/output.py)."""
    for path in CLI.glob("*.py"):
        text = path.read_text()
        if path.name != "output.py":
            assert "json.dump" not in text, path.name
        assert not re.search(r'"schema":', text), path.name


def test_python_m_tui_and_the_entry_point_start_the_same_main() -> None:
    import tui.__main__
    from tui.cli.main import main

    assert tui.__main__.main is main
    assert 'gpurent-tui = "tui.cli.main:main"' in (ROOT / "pyproject.toml").read_text()
