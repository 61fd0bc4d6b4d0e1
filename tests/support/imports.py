"""What the shipped modules import, read from their source (each file parsed once per
test run): the layer test and the declared-packages test both ask."""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def all_modules() -> list[Path]:
    """Every module of the two shipped packages, tui and widgets."""
    return sorted([*(ROOT / "tui").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")])


# A line that starts an import statement; the statement is parsed alone (parsing whole
# modules cost most of the pure tests' time). Comments and strings that look like one
# only make the checks stricter, and any doubt falls back to parsing the whole file.
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+)?import[ \t(]", re.M)


def _statement(source: str, start: int) -> str:
    """The logical line that starts at `start`: through parentheses and continuations."""
    depth, i = 0, start
    while i < len(source):
        char = source[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "\\" and source.startswith("\n", i + 1):
            i += 2
            continue
        elif char == "\n" and depth <= 0:
            break
        i += 1
    return textwrap.dedent(source[start:i])


def _import_nodes(path: Path) -> list[ast.stmt]:
    source = path.read_text()
    nodes: list[ast.stmt] = []
    try:
        for match in _IMPORT_LINE.finditer(source):
            nodes.extend(ast.parse(_statement(source, match.start())).body)
    except SyntaxError:
        nodes = [n for n in ast.walk(ast.parse(source, str(path))) if isinstance(n, ast.stmt)]
    return nodes


@functools.cache  # each module is read once, not once per test that asks
def imports_of(path: Path) -> frozenset[str]:
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(path):
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
