"""What the shipped modules import, read from their source (each file parsed once per
test run): the layer test and the declared-packages test both ask."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def all_modules() -> list[Path]:
    """Every module of the two shipped packages, tui and widgets."""
    return sorted([*(ROOT / "tui").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")])


@functools.cache  # each module is parsed once, not once per test that asks
def imports_of(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                found.add(node.module)
                # `from tui.onbox import probe`: the submodule is what is imported
                found |= {f"{node.module}.{a.name}" for a in node.names}
    return frozenset(found)
