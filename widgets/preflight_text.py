"""How the preflight looks in the panel: a box's check verdict in its header, the doctor's
report as text. Pure Rich Text from the model's values (no markup is ever parsed)."""

from __future__ import annotations

from rich.text import Text

from tui.model.preflight import ERROR, INFO, WARNING, CheckVerdict, DoctorReport
from widgets.fleet_text import clean, clock_time

VERDICT_STYLE = {"ok": "green", "warnings": "yellow", "problems": "bold red", "failed": "red",
                 "stand-in": "dim"}
VERDICT_MARK = {"ok": "✓", "warnings": "!", "problems": "✗", "failed": "✗", "stand-in": "·"}
SUMMARY_CELLS = 48


def check_item(verdict: CheckVerdict | None) -> Text | None:
    """`check ✓ 12:03`, `check ! 1 warning(s) ...`, `check ✗ CUDA not available ...`."""
    if verdict is None:
        return None
    text = Text(f"check {VERDICT_MARK.get(verdict.verdict, '?')}",
                style=VERDICT_STYLE.get(verdict.verdict, ""))
    if verdict.verdict != "ok":
        summary = clean(verdict.summary)
        if len(summary) > SUMMARY_CELLS:
            summary = summary[:SUMMARY_CELLS - 1] + "…"
        text.append(f" {summary}", style=VERDICT_STYLE.get(verdict.verdict, ""))
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
