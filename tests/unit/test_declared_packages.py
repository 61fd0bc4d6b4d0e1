"""Every package the shipped code imports is declared in pyproject.toml: the panel's own
dependencies, or the train extra for what only `demo --real` and the on-box side use."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Import name -> distribution name where they differ.
DISTRIBUTION = {"textual_plotext": "textual-plotext", "PIL": "pillow"}


def declared(names: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", n, maxsplit=1)[0].lower().replace("_", "-")
            for n in names}


def imported_tops() -> set[str]:
    tops = set()
    for path in [*(ROOT / "tui").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                tops |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                tops.add(node.module.split(".")[0])
    return tops - set(sys.stdlib_module_names) - {"tui", "widgets", "__future__"}


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    panel = declared(project["dependencies"])
    train = declared(project["optional-dependencies"]["train"])
    for top in sorted(imported_tops()):
        name = DISTRIBUTION.get(top, top).lower().replace("_", "-")
        assert name in panel | train, f"{top} is imported but not declared"
