"""The `lint --json` document (schema gpurent.lint/1): a script's findings, or why it
could not be read."""

from __future__ import annotations

from typing import Any

from tui.model.exit_codes import EXIT_USAGE
from tui.model.lint import LintResult

SCHEMA = "gpurent.lint/1"


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
