"""docs/security.md lists each promise with the tests that keep it: every test it names
must exist (the file, and the function, found by reading the file's syntax tree, without
importing it), so the page cannot name a test that was renamed or removed, and every
promise names at least one test."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "security.md"
PROMISES = "## Promises and the tests that keep them"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


@cache
def defined_tests(path: str) -> frozenset[str]:
    """The test functions a test file defines at its top level (async ones too)."""
    tree = ast.parse((ROOT / path).read_text(), path)
    return frozenset(node.name for node in tree.body
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                     and node.name.startswith("test_"))


def promises(text: str) -> list[str]:
    """The list items of the promises section (to the next `## ` heading)."""
    section = text.split(PROMISES, 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("- ")]


def missing(refs: list[tuple[str, str]]) -> list[str]:
    """The references among `refs` (path, function or '') that name nothing."""
    gone = []
    for path, name in refs:
        if not (ROOT / path).is_file():
            gone.append(f"{path}: no such file")
        elif name and name not in defined_tests(path):
            gone.append(f"{path}::{name}: no such test")
    return gone


def test_the_check_finds_a_test_that_is_gone() -> None:
    assert missing([("tests/unit/test_security_doc.py", "test_the_check_finds_a_test_that_is_gone"),
                    ("tests/unit/test_redact.py", "")]) == []
    assert missing([("tests/unit/test_security_doc.py", "test_renamed_long_ago"),
                    ("tests/unit/test_gone.py", "test_x")]) == [
        "tests/unit/test_security_doc.py::test_renamed_long_ago: no such test",
        "tests/unit/test_gone.py: no such file"]


def test_every_promise_names_a_test() -> None:
    items = promises(PAGE.read_text())
    assert len(items) > 50, "the promises section lists the promises"
    bare = [item[:80] for item in items if not TEST_REF.search(item)]
    assert not bare, f"promises without a test: {bare}"


def test_every_test_named_exists() -> None:
    refs = TEST_REF.findall(PAGE.read_text())
    assert missing(refs) == []
