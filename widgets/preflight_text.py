"""How the preflight looks in the panel: a box's check verdict in its header, the doctor's
report as text. Pure Rich Text from the model's values (no markup is ever parsed)."""

from __future__ import annotations

import re

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from tui.model.preflight import ERROR, INFO, WARNING, CheckVerdict, DoctorReport
from widgets.fleet_text import clean, clock_time

VERDICT_STYLE = {"ok": "green", "warnings": "yellow", "problems": "bold red", "failed": "red",
                 "stand-in": "dim"}
VERDICT_MARK = {"ok": "✓", "warnings": "!", "problems": "✗", "failed": "✗", "stand-in": "·"}
SUMMARY_CELLS = 30


def short_summary(summary: str) -> str:
    """`CUDA not available (+1 more)`: what failed, before its colon, and how many more,
    cut to fit a box header at 80 columns (the check's own lines say the rest)."""
    words = clean(summary)
    more = re.search(r" \(\+\d+ more\)$", words)
    tail = more.group(0) if more else ""
    head = words[:more.start()] if more else words
    head = head.split(": ", 1)[0]
    room = SUMMARY_CELLS - cell_len(tail)
    if cell_len(head) > room:
        head = set_cell_size(head, room - 1) + "…"
    return head + tail


def check_item(verdict: CheckVerdict | None) -> Text | None:
    """`check ✓ 12:03`, `check ! 1 warning(s) ...`, `check ✗ CUDA not available ...`."""
    if verdict is None:
        return None
    text = Text(f"check {VERDICT_MARK.get(verdict.verdict, '?')}",
                style=VERDICT_STYLE.get(verdict.verdict, ""))
    if verdict.verdict == "stand-in":  # a demo box: its line after g says why
        text.append(" nothing to check here", style="dim")
    elif verdict.verdict != "ok":
        text.append(f" {short_summary(verdict.summary)}",
                    style=VERDICT_STYLE.get(verdict.verdict, ""))
    when = clock_time(verdict.at) if verdict.at is not None else None
    if when:
        text.append(f" {when}", style="dim")
    return text


def doctor_text(report: DoctorReport) -> Text:
    """The doctor's report, errors red, warnings yellow, paths dim."""
    styles = {ERROR: "bold red", WARNING: "yellow", INFO: ""}
    text = Text()
    for line in report.lines():
        style = ""
        stripped = line.lstrip()
        if stripped.startswith("✗"):
            style = styles[ERROR]
        elif stripped.startswith("!"):
            style = styles[WARNING]
        elif line.startswith("      "):
            style = "dim"
        text.append(clean(line) + "\n", style=style)
    if report.stand_in is not None:  # nothing was doctored: no verdict on the data set
        return text.append("nothing was checked", style="dim")
    verdict = "errors found: fix them before training" if report.exit_code else \
        "no errors: the data set is ready"
    text.append(verdict, style="bold red" if report.exit_code else "bold green")
    return text
