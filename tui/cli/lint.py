"""`lint SCRIPT.py...`: Modal or Beam training scripts checked against the guide, each
read as text and parsed, never imported or run (tui/model/lint.py holds the checks)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.cli.output import print_json
from tui.model.exit_codes import EXIT_USAGE
from tui.model.lint import MAX_BYTES, LintError, LintResult, lint
from tui.model.lint_doc import lint_document, lint_set_document
from tui.model.text import clean


def read_bounded(path: Path) -> bytes:
    """At most MAX_BYTES + 1 bytes: enough to say "too large" without reading a huge file."""
    try:
        if not path.is_file():
            raise LintError("no such file" if not path.exists() else "not a regular file")
        with path.open("rb") as handle:
            return handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise LintError(exc.strerror or str(exc)) from None


def cmd_lint(args: argparse.Namespace) -> int:
    """Each script in turn, one report each; the exit code is the worst of them."""
    documents = []
    worst = 0
    for script in args.scripts:
        code, document = _lint_one(script, args.json)
        documents.append(document)
        worst = max(worst, code)
    if args.json:
        print_json(documents[0] if len(documents) == 1 else lint_set_document(documents))
    return worst


def _lint_one(script: str, as_json: bool) -> tuple[int, dict[str, Any]]:
    """Lint one script: its text report printed (unless JSON), its exit code and its
    JSON document."""
    name = str(script)
    shown = clean(name)
    try:
        result = lint(read_bounded(Path(script)))
    except LintError as exc:
        print(f"lint: {shown}: cannot read it: {exc}", file=sys.stderr)
        return EXIT_USAGE, lint_document(name, None, str(exc))
    if not as_json:
        print("\n".join(lines(shown, result)), flush=True)
    return result.exit_code, lint_document(name, result)


def lines(shown: str, result: LintResult) -> list[str]:
    """One line per finding, as compilers print them, then the count."""
    out = [clean(f"{shown}:{f.line}:{f.col}: {f.severity} {f.code} {f.message}  "
                 f"fix: {f.fix}")
           for f in result.findings]
    if not result.findings:
        out.append(f"{shown}: clean")
    else:
        out.append(f"{shown}: {result.errors} error(s), {result.warnings} warning(s)")
    return out


def add_lint(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`lint`."""
    lint_cmd = sub.add_parser(
        "lint", parents=[common],
        help="check Modal or Beam training scripts against the guide (timeout=, runs on "
             "a volume committed every epoch, HF_HOME, OpenCV libraries, __main__ guard), "
             "without running them; the exit code is the worst script's")
    lint_cmd.add_argument("scripts", metavar="SCRIPT.py", nargs="+")
    lint_cmd.add_argument("--json", action="store_true")
    lint_cmd.set_defaults(func=cmd_lint)
