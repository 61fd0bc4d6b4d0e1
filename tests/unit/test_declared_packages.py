"""Every package the shipped code imports is declared in pyproject.toml: the panel's own
dependencies, or the train extra for what only `demo --real` and the on-box side use."""

from __future__ import annotations

import re
import sys
import tomllib

from support.imports import ROOT, all_modules, imports_of

# Import name -> distribution name where they differ.
DISTRIBUTION = {"textual_plotext": "textual-plotext", "PIL": "pillow"}


def declared(names: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", n, maxsplit=1)[0].lower().replace("_", "-")
            for n in names}


def imported_tops() -> set[str]:
    tops = {name.split(".")[0] for path in all_modules() for name in imports_of(path)}
    return tops - set(sys.stdlib_module_names) - {"tui", "widgets", "__future__"}


def test_every_imported_package_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    panel = declared(project["dependencies"])
    train = declared(project["optional-dependencies"]["train"])
    for top in sorted(imported_tops()):
        name = DISTRIBUTION.get(top, top).lower().replace("_", "-")
        assert name in panel | train, f"{top} is imported but not declared"
