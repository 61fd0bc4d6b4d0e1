"""The `lint --json` documents: one script's findings, or why it could not be read
(schema gpurent.lint/1), and, for several scripts, the set of those (gpurent.lint-set/1)."""

from __future__ import annotations

from typing import Any

from tui.model.exit_codes import EXIT_USAGE
from tui.model.lint import LintResult

SCHEMA = "gpurent.lint/1"
SET_SCHEMA = "gpurent.lint-set/1"


def lint_document(script: str, result: LintResult | None,
                  unreadable: str | None = None) -> dict[str, Any]:
    """`result` is None exactly when the script was unreadable (`unreadable` says why);
    lines and columns are 1-based, columns in characters."""
    if result is None:
        return {"schema": SCHEMA, "script": script, "unreadable": unreadable,
                "providers": [], "errors": 0, "warnings": 0, "exit_code": EXIT_USAGE,
                "findings": []}
    return {"schema": SCHEMA, "script": script, "unreadable": None,
            "providers": list(result.providers), "errors": result.errors,
            "warnings": result.warnings, "exit_code": result.exit_code,
            "findings": [{"line": f.line, "col": f.col, "severity": f.severity,
                          "code": f.code, "message": f.message, "fix": f.fix}
                         for f in result.findings]}


def lint_set_document(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """Several scripts' documents, in the order given, and the worst exit code (2 an
    unreadable script, 1 an error, 0 none): a one-script run keeps its own document."""
    return {"schema": SET_SCHEMA,
            "exit_code": max((d["exit_code"] for d in documents), default=0),
            "scripts": documents}
