"""A serverless run judged against its timeout and priced: the countdown ("killed by its
6 h timeout in 2h10m"), an ETA past the timeout as a problem before it happens, and the
cost as GPU-seconds x the per-second price. Pure: the clock is passed in.

The function started at or before the run's own `started_at` (its image loaded, its data
came first), so the real kill may come a little before the countdown says; without a
run's `started_at`, the app's creation time stands in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tui.model.config import ServerlessConfig
from tui.model.runs import Health, RunState, format_age, parse_time
from tui.model.serverless import AppState
from tui.model.serverless_prices import gpu_spec, usd_per_second
from tui.model.serverless_runs import AT_REST

LIVE = (Health.RUNNING, Health.STALLED)
# What `s` runs, and what starts an app, in each provider's own commands (its adapter in
# tui/providers/ runs the stop): the confirmation, the report and `start` say these.
STOP_COMMANDS = {
    "modal": "modal app stop {app}",
    "beam": "beam deployment stop <each active version of {app}>",
}
# What a kill (a stop, the timeout) costs a run, in each provider's volume terms: a Modal
# volume keeps only what was committed (volume.commit()); a Beam volume is a shared file
# system with no commit, so what was written there stays and only unsaved work is lost.
STOP_LOSS = {
    "modal": "a run not committed to the volume loses what it did since its last commit",
    "beam": "a run loses what it had not yet saved to the volume; what it saved there stays",
}
LATE_LOSS = {
    "modal": "the last epochs are lost unless the volume is committed each epoch",
    "beam": "the last epochs are never run; what it saved to the volume stays",
}
START_COMMANDS = {
    "modal": "`modal run` / `modal deploy`",
    "beam": "`beam deploy` and invoking the deployment",
}


@dataclass(frozen=True)
class RunVerdict:
    """One run on a serverless app: its deadline, whether its ETA fits, what it cost."""

    path: str
    started_at: float | None
    deadline: float | None  # started_at + timeout: when the provider kills it
    seconds_left: float | None  # to the deadline (negative: past it)
    countdown: str | None  # the words, for a live run
    problem: str | None  # an ETA past the timeout, or a run past its deadline: red
    gpu_seconds: float | None
    cost_usd: float | None


def timeout_words(timeout: float) -> str:
    """`6 h`, `90 min`, `45s`: the timeout as the script's author thinks of it."""
    if timeout >= 3600 and timeout % 3600 == 0:
        return f"{timeout / 3600:.0f} h"
    if timeout >= 60 and timeout % 60 == 0:
        return f"{timeout / 60:.0f} min"
    return format_age(timeout)


ENDED_APP = ("stopped", "missing")  # an app in these states runs nothing on its GPUs


def run_started(run: RunState, app: AppState | None, *,
                stand_in: bool = True) -> float | None:
    """The run's own `started_at`; the app's creation time stands in only for a run whose
    status.json was read and does not say (one app, one run). A run never read (torn,
    unreadable) has no start: it is charged nothing rather than the app's lifetime, once
    per such folder."""
    if not run.status:
        return None
    started = parse_time(run.status.get("started_at"))
    if started is None and app is not None and stand_in:
        started = app.started_at
    return started


def settle_runs(runs: tuple[RunState, ...], app: AppState | None) -> tuple[RunState, ...]:
    """Runs whose app reads stopped or missing were killed with it: one status.json still
    says "running" (nothing wrote it after the kill), so it reads dead, not running."""
    if app is None or app.state not in ENDED_APP:
        return runs
    why = f"killed: its app {app.app} reads {app.state}"
    return tuple(replace(r, health=Health.DEAD, reason=why) if r.health in LIVE else r
                 for r in runs)


def carry_stop(before: AppState | None, after: AppState, now: float) -> AppState:
    """The app as now read, with the time it stopped when its CLI gives none (Beam's
    lists do not): the stop time seen before, else `now` for an app seen running
    before, so a stopped app's cost never shrinks to its runs' last update."""
    if after.state not in ENDED_APP or after.stopped_at is not None or before is None:
        return after
    if before.state in ENDED_APP:
        return replace(after, stopped_at=before.stopped_at)
    return replace(after, stopped_at=now)


def run_end(run: RunState, now: float, app: AppState | None = None) -> float:
    """Until now for a live run; one killed by its app's stop until the stop (or its
    last update, when the CLI gives no stop time); a finished one until its last update
    (else now)."""
    if run.health in LIVE:
        return now
    updated = parse_time(run.updated_at)
    if app is not None and app.state in ENDED_APP and run.health is Health.DEAD and \
            app.stopped_at is not None:
        return min(now, app.stopped_at)
    return updated if updated is not None else now


def judge_run(entry: ServerlessConfig, app: AppState | None, run: RunState,
              now: float, *, stand_in: bool = True) -> RunVerdict:
    """`stand_in`: whether the app's start may stand in for a run that names none."""
    started = run_started(run, app, stand_in=stand_in)
    deadline = started + entry.timeout if started is not None and entry.timeout else None
    left = deadline - now if deadline is not None else None
    countdown = problem = None
    live = run.health in LIVE
    if live and entry.timeout and left is not None:
        limit = timeout_words(entry.timeout)
        if left > 0:
            countdown = f"killed by its {limit} timeout in {format_age(left)}"
        else:
            countdown = f"past its {limit} timeout by {format_age(-left)}"
            problem = (f"running {format_age(-left)} past its {limit} timeout: the provider "
                       "kills it at the timeout; is this the run that was started then?")
        eta = run.eta_seconds
        if problem is None and eta is not None and eta > left:
            problem = (f"ETA {format_age(eta)} is past its {limit} timeout (killed in "
                       f"{format_age(left)}, {format_age(eta - left)} short): "
                       f"{LATE_LOSS.get(entry.provider, LATE_LOSS['beam'])}; raise "
                       "timeout= or resume from last.pt")
    elif live and not entry.timeout and entry.script_unbounded:
        countdown = "no timeout to count down: the script sets none"
    elif live and not entry.timeout:
        countdown = "no timeout in the config (set `timeout` as the script's timeout=)"
    gpu_seconds = cost = None
    spec = gpu_spec(entry.gpu)
    if started is not None and spec is not None:
        wall = max(0.0, run_end(run, now, app) - started)
        gpu_seconds = wall * spec[1]
        rate = usd_per_second(entry.provider, entry.gpu, entry.usd_per_gpu_second)
        cost = wall * rate if rate is not None else None
    return RunVerdict(run.path, started, deadline, left, countdown, problem, gpu_seconds,
                      cost)


def judge_runs(entry: ServerlessConfig, app: AppState | None, runs: tuple[RunState, ...],
               now: float) -> list[RunVerdict]:
    """Each run judged; the app's start stands in for the latest run without its own
    start only, so the app's lifetime is never charged twice."""
    verdicts = []
    stood_in = False
    for run in runs:
        verdicts.append(judge_run(entry, app, run, now, stand_in=not stood_in))
        if run.status and parse_time(run.status.get("started_at")) is None:
            stood_in = True
    return verdicts


def app_words(app: AppState | None, error: str | None = None) -> str:
    """`running (deployed), 1 task`, `stopped`, `missing`: the app's line."""
    if app is None:
        return f"not read yet{': ' + error if error else ''}"
    if app.state == "missing" and app.detail == AT_REST:
        return AT_REST  # a finished temporary app dropped off its list: nothing wrong
    words = app.state
    if app.detail and app.detail != app.state:
        words += f" ({app.detail})"
    if app.tasks is not None:
        words += f", {app.tasks} task{'s' if app.tasks != 1 else ''}"
    return words


def stop_command(entry: ServerlessConfig) -> str:
    """The provider's stop as its users would type it (`modal app stop yolo-train`)."""
    form = STOP_COMMANDS.get(entry.provider, f"{entry.provider} stop {{app}}")
    return form.format(app=entry.app)


def stop_loss(entry: ServerlessConfig) -> str:
    """What stopping the app costs its run, in its provider's volume terms."""
    return STOP_LOSS.get(entry.provider, STOP_LOSS["beam"])


def start_words(entry: ServerlessConfig) -> str:
    """Why `start` does not apply, with what does start the app."""
    how = START_COMMANDS.get(entry.provider, f"{entry.provider}'s own CLI")
    return (f"{entry.name} is a serverless app: it starts when its script runs ({how}), "
            "not from here")


def destroy_words(entry: ServerlessConfig, stop: str = "s stops it") -> str:
    """What D (or `destroy NAME`) says on a serverless app: there is no box to destroy.
    `stop`: how this front end stops it (the panel's key, the CLI's command)."""
    return (f"destroy does not apply to a serverless app: {stop}; its volume "
            f"{entry.volume} is yours to delete in {entry.provider.capitalize()}'s own "
            "console or CLI")
