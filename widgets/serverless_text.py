"""A serverless app (Modal, Beam) in the fleet list: a head row (selectable: `s` stops the
app), its trouble, and each run's lines with the timeout's countdown and its cost, an ETA
past the timeout in red. Lines only; the list draws them as it draws a box's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.text import Text

from tui.model.config import ServerlessConfig
from tui.model.cost import estimate_usd
from tui.model.guard import PushRecord
from tui.model.meter import BoxCost
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_script import entry_problems
from tui.model.serverless_view import app_words, judge_runs
from tui.model.text import clean
from widgets.fleet_text import (
    NAME_CELLS,
    BoxLines,
    Due,
    Line,
    fit,
    loss_tail,
    matches,
    run_detail_line,
    run_main_line,
    run_sparkline,
)

APP_ROW = ""  # the run key of an app's head row: the keys act on the app there


@dataclass(frozen=True)
class ServerlessView:
    """Everything an app's lines are drawn from. `cost`, `pushes` and `activity` mirror a
    box's view, so the list and the screen treat both alike (an app has no box cost)."""

    state: ServerlessState
    entry: ServerlessConfig
    cost: BoxCost | None = None
    pushes: Mapping[str, PushRecord] = field(default_factory=dict)
    activity: Text | None = None
    items: tuple[Text, ...] = ()


def app_head_line(view: ServerlessView, total_usd: float | None) -> Text:
    """`modal-yolo  modal app yolo-train: running, 1 task · H100:2 · ~$1.20 (est.)`."""
    state, entry = view.state, view.entry
    text = Text(fit(clean(entry.name), NAME_CELLS) + " ", style="bold")
    text.append(f"{entry.provider} app {entry.app}: ")
    app = state.app
    colour = "green" if app and app.state == "running" else \
        "yellow" if app is None or app.state == "unknown" or \
        (app.state == "missing" and state.problem) else ""
    text.append(app_words(app) if app else "not read yet", style=colour)
    text.append(f" · {entry.gpu}")
    if total_usd is not None:
        text.append(f" · ~{estimate_usd(total_usd)} est.", style="dim")
    return text


def app_lines(view: ServerlessView, filter_text: str, now: float) -> BoxLines:
    """The app as the fleet list shows it: head (its own row key), activity, trouble, a
    main, a detail and a timeout line per run the filter shows, a gap."""
    state, entry = view.state, view.entry
    due = Due(now)
    verdicts = judge_runs(entry, state.app, state.runs, now)
    costs = [v.cost_usd for v in verdicts if v.cost_usd is not None]
    lines = [Line(app_head_line(view, sum(costs) if costs else None), run=APP_ROW)]
    if view.activity is not None:
        lines += [Line(part, 2, run=APP_ROW, style="activity")
                  for part in view.activity.split("\n")]
    if state.error:
        words = f"! {state.error}"
        if state.ok_at is not None:
            words += f" (data below is {due.age(now - state.ok_at)} old)"
        lines.append(Line(Text(words, style="bold red"), 2, run=APP_ROW))
    if state.problem:
        lines.append(Line(Text(f"! {state.problem}", style="bold red"), 2, run=APP_ROW))
    lines += [Line(Text(f"! {problem}", style="bold red"), 2, run=APP_ROW)
              for problem in entry_problems(entry)]
    if state.runs_error:
        lines.append(Line(Text(state.runs_error), 2, run=APP_ROW, style="muted"))
    elif state.app is not None and not state.runs and not state.problem:
        lines.append(Line(Text(f"no runs under {entry.volume}:{entry.runs_path}"), 2,
                          run=APP_ROW, style="muted"))
    shown = [APP_ROW]
    hidden = 0
    for run, verdict in zip(state.runs, verdicts, strict=True):
        if not matches(run, filter_text):
            hidden += 1
            continue
        shown.append(run.path)
        # no loss read yet: no sparkline (a flat one would read as a flat loss)
        spark = run_sparkline(run) if loss_tail(run) else None
        lines.append(Line(run_main_line(run), run=run.path, spark=spark))
        lines.append(Line(run_detail_line(run, now, None, None, due), 2, run=run.path))
        if verdict.seconds_left is not None and verdict.seconds_left > 0:
            due.countdown(verdict.seconds_left)
        said = verdict.problem or verdict.countdown
        if said or verdict.cost_usd is not None:
            text = Text(said or "", style="bold red" if verdict.problem else "")
            if verdict.cost_usd is not None:
                text.append(f"{' · ' if said else ''}~{estimate_usd(verdict.cost_usd)} of GPU time "
                            "(est.)", style="dim")
            lines.append(Line(text, 2, run=run.path))
    if hidden:
        lines.append(Line(Text(f"{hidden} run(s) hidden by the filter"), 2, style="muted"))
    lines.append(Line(Text()))
    return BoxLines(tuple(lines), tuple(shown), due.at)
