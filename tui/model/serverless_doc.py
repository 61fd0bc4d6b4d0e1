"""A serverless entry in `status`: its part of the JSON document (`serverless`, beside
`boxes`) and its lines in the table. Pure: the states and the clock are passed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tui.model.config import ServerlessConfig
from tui.model.cost import estimate_usd, usd
from tui.model.runs import RunState, format_age
from tui.model.serverless_prices import prices_dated, published_price, usd_per_second
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_script import entry_problems
from tui.model.serverless_view import LIVE, RunVerdict, app_words, judge_runs

Entry = tuple[ServerlessConfig, ServerlessState]
APPS_HEAD = ("Serverless apps (estimates: GPU-seconds x price; not in the ledger, the "
             "totals above or the budget):")


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat(
        timespec="seconds")


def price_source(entry: ServerlessConfig) -> str:
    if entry.usd_per_gpu_second is not None:
        return "config"
    return f"{entry.provider} published {prices_dated(entry.provider) or '(undated)'}"


def _total(verdicts: Sequence[RunVerdict]) -> tuple[float | None, float | None]:
    seconds = [v.gpu_seconds for v in verdicts if v.gpu_seconds is not None]
    costs = [v.cost_usd for v in verdicts if v.cost_usd is not None]
    return (round(sum(seconds), 3) if seconds else None,
            round(sum(costs), 6) if costs else None)


def serverless_document(entry: ServerlessConfig, state: ServerlessState, now: float,
                        run_document: Callable[[RunState], dict[str, Any]]) -> dict[str, Any]:
    """`run_document`: status_doc's own, so a run reads the same as on a box."""
    app = state.app
    verdicts = judge_runs(entry, app, state.runs, now)
    gpu_seconds, cost = _total(verdicts)
    rate = entry.usd_per_gpu_second if entry.usd_per_gpu_second is not None \
        else published_price(entry.provider, entry.gpu)
    return {
        "name": entry.name,
        "provider": entry.provider,
        "app": entry.app,
        "volume": entry.volume,
        "runs_path": entry.runs_path,
        "gpu": entry.gpu,
        "timeout_seconds": entry.timeout,
        # "config", "script" (the script's literal timeout=), null: none known
        "timeout_source": entry.timeout_from,
        "script": entry.script,
        # the script (lint's reading) sets no timeout=; null: no script named
        "no_timeout": entry.script_unbounded if entry.script else None,
        "problems": entry_problems(entry),
        # `state`: running, stopped, missing, unknown (the CLI's app list); null: not read
        "state": app.state if app else None,
        "tasks": app.tasks if app else None,
        "app_detail": app.detail if app else None,
        "app_started_at": _iso(app.started_at) if app else None,
        "checked_at": _iso(state.checked_at),
        "last_ok_at": _iso(state.ok_at),
        "error": state.error,
        "error_kind": state.error_kind,
        "runs_error": state.runs_error,
        "problem": state.problem,  # the app or its volume is missing: `status` exits 1
        "usd_per_gpu_second": rate,
        "price_source": price_source(entry),
        # estimates: GPU-seconds of each run read (start to now, or to its last update)
        # x the per-second price; the provider's bill also has CPU, memory, start-up
        "gpu_seconds": gpu_seconds,
        "estimated_cost_usd": cost,
        "runs": [{**run_document(run),
                  "started_at": _iso(v.started_at),
                  "timeout_at": _iso(v.deadline),
                  "timeout_seconds_left": None if v.seconds_left is None
                  else round(v.seconds_left, 1),
                  "timeout_countdown": v.countdown,
                  "timeout_problem": v.problem,
                  "gpu_seconds": None if v.gpu_seconds is None else round(v.gpu_seconds, 3),
                  "estimated_cost_usd": None if v.cost_usd is None else round(v.cost_usd, 6)}
                 for run, v in zip(state.runs, verdicts, strict=True)],
    }


def serverless_lines(entry: ServerlessConfig, state: ServerlessState, now: float,
                     run_line: Callable[[RunState], str]) -> list[str]:
    """The entry's block in `status`'s table: its head, its money, each run."""
    app = state.app
    out = [f"{entry.name}  [{entry.provider} app {entry.app}: "
           f"{app_words(app) if app else 'not read'}]  {entry.gpu}"]
    if state.error:
        out.append(f"  ! {state.error}")
        if state.ok_at is not None:
            out.append(f"  (data below is {format_age(now - state.ok_at)} old)")
    if state.problem:
        out.append(f"  ! {state.problem}")
    if state.runs_error:
        out.append(f"  · {state.runs_error}")
    out.extend(f"  ! {problem}" for problem in entry_problems(entry))
    verdicts = judge_runs(entry, app, state.runs, now)
    _, cost = _total(verdicts)
    rate = usd_per_second(entry.provider, entry.gpu, entry.usd_per_gpu_second)
    if rate is not None:
        spent = f"~{estimate_usd(cost)} for the runs read" if cost is not None \
            else "nothing read yet"
        out.append(f"  cost: {spent} (estimate: GPU-seconds x {usd(rate)}/s for {entry.gpu}, "
                   f"{price_source(entry)})")
    if not state.runs and app is not None and not state.runs_error and \
            not state.problem:
        out.append(f"  no runs found under {entry.volume}:{entry.runs_path}")
    for run, verdict in zip(state.runs, verdicts, strict=True):
        out.append(run_line(run))
        if verdict.problem:
            out.append(f"      ! {verdict.problem}")
        elif verdict.countdown:
            out.append(f"      · {verdict.countdown}")
    return out


def pairs(entries: Sequence[ServerlessConfig],
          states: Sequence[ServerlessState]) -> list[Entry]:
    """Each entry with its state (by name), in the config's order."""
    by_name = {s.name: s for s in states}
    return [(e, by_name.get(e.name) or ServerlessState(name=e.name, provider=e.provider))
            for e in entries]


@dataclass(frozen=True)
class ServerlessMoney:
    """The serverless apps' money, estimated (GPU-seconds x price, as each app's line):
    beside the boxes' metered money, never added to it nor to the budget."""

    apps: int
    apps_running: int
    runs_live: int
    usd_per_hr: float | None  # the live runs' GPUs now; None: no price for any of them
    spent_usd: float | None  # every run read; None: nothing priced yet


def serverless_money(entries: Sequence[Entry], now: float) -> ServerlessMoney:
    """Each app's live runs x its per-second price (a running app with tasks but no run
    read yet counts one), and what every run read has cost."""
    running = live = 0
    rates: list[float] = []
    spent: list[float] = []
    for entry, state in entries:
        app = state.app
        verdicts = judge_runs(entry, app, state.runs, now)
        spent += [v.cost_usd for v in verdicts if v.cost_usd is not None]
        if app is None or app.state != "running":
            continue
        running += 1
        here = sum(r.health in LIVE for r in state.runs)
        live += here
        holding = here or (1 if (app.tasks or 0) > 0 else 0)
        rate = usd_per_second(entry.provider, entry.gpu, entry.usd_per_gpu_second)
        if holding and rate is not None:
            rates.append(holding * rate * 3600)
    return ServerlessMoney(len(entries), running, live,
                           round(sum(rates), 6) if rates else None,
                           round(sum(spent), 6) if spent else None)


def money_words(money: ServerlessMoney) -> str:
    """`serverless: ~$8.21/hr est., ~$4.10 spent est. (2 apps, 1 running)`."""
    rate = f"~{usd(money.usd_per_hr)}/hr est." if money.usd_per_hr is not None \
        else "$0/hr est." if money.apps_running == 0 else "rate unknown (no price)"
    spent = f"~{estimate_usd(money.spent_usd)} spent est." if money.spent_usd is not None \
        else "nothing priced yet"
    return (f"serverless: {rate}, {spent} ({money.apps} app{'s' if money.apps != 1 else ''}"
            f", {money.apps_running} running; not in the fleet's totals or budget)")


def money_document(money: ServerlessMoney) -> dict[str, Any]:
    """`fleet.serverless_usd` in `status --json`: estimates, apart from the metered keys."""
    return {"usd_per_hr_est": money.usd_per_hr, "spent_usd_est": money.spent_usd,
            "apps": money.apps, "apps_running": money.apps_running,
            "runs_live": money.runs_live, "estimate": True}


def app_cost_lines(entries: Sequence[Entry], now: float) -> list[str]:
    """The apps' section of `costs` and the costs screen: each app's estimate."""
    out = []
    for entry, state in entries:
        money = serverless_money([(entry, state)], now)
        spent = f"~{estimate_usd(money.spent_usd)} spent" if money.spent_usd is not None \
            else "nothing priced"
        rate = f", ~{usd(money.usd_per_hr)}/hr now" if money.usd_per_hr else ""
        said = app_words(state.app) if state.app else (state.error or "not read")
        out.append(f"{entry.name}  [{entry.provider} app {entry.app}: {said}]  {entry.gpu}: "
                   f"{spent}{rate} (est., {price_source(entry)})")
    return out
