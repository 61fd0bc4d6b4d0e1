"""How a command prints what it did: a JSON document, or an action's report."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.actions.flows import Report


def print_json(document: dict[str, Any]) -> None:
    """A `--json` document (built in tui/model/*_doc.py) on stdout, indented."""
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_report(report: Report) -> int:
    """An action's lines on stdout; its exit code back."""
    for line in report.lines:
        print(line)
    return report.code
