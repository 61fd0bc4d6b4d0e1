"""`profile`: LibreYOLO's `libreyolo profile run` on a box for a few steps, and its verdict.

One look at the box first (its runs, as `status` reads them): a run training
on the GPU the profile would use competes for it, so profiling is refused unless
forced, naming the run; so is one whose GPUs cannot be told (tui/model/gpu_claim.py
reads each run's train_config.yaml `device` with its process's environment).
Given a RUN, its train_config.yaml supplies the settings not given. Then the
on-box program (tui/onbox/profile.py) runs each setting of the grid with the
box's `python`; the figures are checked and turned into advice in
tui/model/profile.py. Every profile is journaled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from tui.actions.onbox_run import describe_end, interpreter_missing, run_onbox
from tui.actions.preflight import _alarm, params_bytes, program
from tui.model.box_redact import redact_words
from tui.model.config import BoxConfig, FleetConfig
from tui.model.gpu_claim import (
    Placement,
    beside,
    own_env,
    parse_device,
    place,
    refusal,
    run_placement,
)
from tui.model.preflight import interpreter_command
from tui.model.profile import (
    ProfileError,
    ProfileReport,
    ProfileRequest,
    parse_cell,
    parse_grid,
    run_settings,
    verdict,
)
from tui.model.runs import Health, RunState
from tui.model.text import clean
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal, ProfileOutcome
from tui.store.secrets import held_secrets, scrub

CELL_SECONDS = 900.0  # one setting's run, at most (a few steps, plus loading the model)
CONFIG_DEADLINE = 60.0
MAX_PLACED = 32  # training runs whose GPUs are looked up (tui/onbox/profile.py's cap)


async def _look(fleet: FleetConfig, box: BoxConfig) -> tuple[list[Any], str | None]:
    """The box's runs as a refresh reads them, or why they could not be read."""
    watcher = BoxWatcher(box, fleet, store=host_key_store(fleet))
    try:
        state = await watcher.refresh(catch_up=True)
    finally:
        await watcher.close()
    if state.error and not state.runs:
        return [], f"box {box.name} could not be read: {clean(state.error)[:300]}"
    return list(state.runs), None


def _settings(request: ProfileRequest, from_run: dict[str, Any]) -> dict[str, Any]:
    """The flags, else the run's train_config.yaml, else LibreYOLO's defaults."""
    def pick(key: str, default: Any) -> Any:
        given = getattr(request, key)
        return given if given is not None else from_run.get(key, default)
    return {"data": pick("data", None), "weights": request.weights, "size": pick("size", "n"),
            "batch": pick("batch", 16), "imgsz": pick("imgsz", 640),
            "workers": pick("workers", 8), "device": pick("device", "0"),
            "steps": request.steps, "warmup": request.warmup}


def _refusal(box: BoxConfig, device: Any, training: Sequence[RunState], placing: Any,
             silent: str, report: ProfileReport) -> str | None:
    """Why the profile must not run beside the training runs (one of them holds the GPU it
    would use, or which GPU cannot be told), else None, and the report says what it runs
    beside. `silent`: why the box sent no `placing` part, if it sent none."""
    if len(training) > MAX_PLACED:
        return (f"{len(training)} runs are training on box {box.name}: profiling now would "
                "compete for their GPUs and cores; --force to profile anyway")
    entries = placing.get("runs") if isinstance(placing, dict) else None
    entries = entries if isinstance(entries, list) else []
    silent = clean(silent)[:300]
    held = [(clean(r.name)[:100], run_placement(entries[i]) if i < len(entries)
             else Placement(unknown=silent)) for i, r in enumerate(training)]
    env = own_env(placing)
    asked = place(parse_device(device), env) if env is not None \
        else Placement(unknown=silent)
    why = refusal(box.name, asked, held)
    if why is None:
        report.beside = beside(asked, held)
    return why


async def profile_box(fleet: FleetConfig, box: BoxConfig, request: ProfileRequest, *,
                      say: Callable[[str], None] = lambda line: None,
                      usd_per_hr: float | None = None) -> ProfileReport:
    """The headless command: one look at the box's runs, then its own session."""
    runs, problem = await _look(fleet, box)
    if problem is not None:
        return ProfileReport(box=box.name, outcome="failed", run=request.run, message=problem)
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        return await profile_on(session, box, request, runs, say=say, usd_per_hr=usd_per_hr)
    finally:
        await session.close()


async def profile_on(session: BoxSession, box: BoxConfig, request: ProfileRequest,
                     runs: Sequence[RunState], *,
                     say: Callable[[str], None] = lambda line: None,
                     usd_per_hr: float | None = None) -> ProfileReport:
    """Refuse or profile over `session`, given the box's runs as last read; a report always
    comes back (never raises for the box's trouble). Money: the config's running rate,
    else `usd_per_hr` (what the ledger says the box billed running)."""
    configured = box.pricing.running_usd_per_hr if box.pricing else None
    report = ProfileReport(box=box.name, outcome="failed", run=request.run,
                           usd_per_hr=configured if configured is not None else usd_per_hr)
    if box.stand_in is not None:  # a demo box: no LibreYOLO there to profile, forced or not
        report.outcome = "refused"
        report.message = f"box {box.name}: {box.stand_in}"
        return report
    training = [r for r in runs if r.health is Health.RUNNING]
    checking = bool(training) and not request.force
    run = None
    if request.run is not None:
        run = next((r for r in runs if r.name == request.run), None)
        if run is None:
            report.message = f"no run {request.run!r} on box {box.name}"
            return report
    parts: dict[str, Any] = {}
    silent = "the box did not say"  # why the box's look did not place the runs
    if run is not None or checking:
        look: dict[str, Any] = {"mode": "config", "deadline": _alarm(CONFIG_DEADLINE)}
        if run is not None:
            look["run_dir"] = run.path
        if checking:
            look["training"] = [{"dir": r.path, "pid": r.pid} for r in training[:MAX_PLACED]]
        looked = await run_onbox(session, interpreter_command(box.python), program("profile"),
                                 params_bytes(look), deadline=CONFIG_DEADLINE, what="profile")
        parts = looked.parts()
        if "placing" not in parts:
            silent = (f"the interpreter {box.python} was not found on box {box.name}"
                      if interpreter_missing(looked) else
                      describe_end(looked, "the look at its runs", CONFIG_DEADLINE))
    from_run: dict[str, Any] = {}
    weights = request.weights
    if run is not None:
        part = parts.get("config")
        values = part.get("values") if isinstance(part, dict) else None
        from_run = run_settings(values if isinstance(values, dict) else {})
        if weights is None:
            held = {w.name for w in run.weights}
            chosen = next((n for n in ("last.pt", "best.pt") if n in held), None)
            weights = f"{run.path}/weights/{chosen}" if chosen else None
    settings = _settings(request, from_run)
    settings["weights"] = weights
    report.settings = settings
    if checking:
        refused = _refusal(box, settings["device"], training, parts.get("placing"), silent,
                           report)
        if refused is not None:
            report.outcome, report.message = "refused", refused
            return report
        say(f"profile: {report.beside}")
    if not settings["data"] or not weights:
        missing = "--data YAML" if not settings["data"] else "--weights PT"
        report.message = (f"profile on box {box.name} needs {missing}"
                          + (f" (run {request.run} did not name one)" if request.run
                             else ""))
        report.outcome = "usage"
        return report
    try:
        grid = parse_grid(request.grid, settings["batch"], settings["workers"])
    except ProfileError as exc:
        report.message, report.outcome = str(exc), "usage"
        return report
    deadline = CELL_SECONDS * len(grid) + 30
    params = dict(settings, mode="profile", deadline=_alarm(deadline),
                  tool_timeout=CELL_SECONDS - 5,
                  cells=[{"batch": b, "workers": w} for b, w in grid])
    say(f"profile: libreyolo profile run on box {box.name}, {len(grid)} setting(s) of "
        f"{settings['steps']} steps ...")

    def seen(frame: dict[str, Any]) -> None:
        stage = frame.get("stage")
        index = stage.rpartition(" ")[2] if isinstance(stage, str) else ""
        if index.isdigit() and int(index) < len(grid):
            batch, workers = grid[int(index)]
            say(f"profile: setting {int(index) + 1} of {len(grid)}: batch {batch}, "
                f"workers {workers} ...")

    ran = await run_onbox(session, interpreter_command(box.python), program("profile"),
                          params_bytes(params), deadline=deadline, what="profile",
                          on_frame=seen)
    parts = redact_words(ran.parts(), held_secrets())  # the box's words: no held secret
    host_part = parts.get("host")
    host: dict[str, Any] = host_part if isinstance(host_part, dict) else {}
    cpus = host.get("cpus")
    report.cpus = cpus if isinstance(cpus, int) and not isinstance(cpus, bool) and \
        0 < cpus < 100_000 else None
    if interpreter_missing(ran):
        report.message = (f"the interpreter {box.python} was not found on box {box.name}: "
                          "set `python` for this box to the one that has torch")
        return report
    if host.get("libreyolo") is False:
        report.message = (f"libreyolo is not installed for {box.python} on box {box.name}: "
                          "pip install libreyolo there (or set the box's `python`)")
        return report
    report.cells = [parse_cell(parts.get(f"cell-{i}"), b, w) for i, (b, w) in enumerate(grid)]
    if not ran.done and not any(c.measured for c in report.cells):
        report.message = scrub(describe_end(ran, f"profile on box {box.name}", deadline))
        return report
    report.verdict = verdict(report.cells, (settings["batch"], settings["workers"]),
                             report.cpus, report.usd_per_hr,
                             on_cpu=str(settings["device"]).lower() == "cpu")
    if any(c.measured for c in report.cells):
        report.outcome = "done"
        report.message = report.verdict
    else:
        report.message = f"profile on box {box.name}: " + (
            report.cells[0].problem or "nothing measured")
    return report


def journal_profile(journal: Journal, report: ProfileReport) -> None:
    """One line per profile: the outcome, the verdict, each cell's figures."""
    if report.outcome == "usage":
        return
    journal.record(
        box=report.box, action="profile", outcome=cast(ProfileOutcome, report.outcome),
        run=report.run, message=report.message[:500],
        details={"cells": [{"batch": c.batch, "workers": c.workers,
                            "img_per_s": c.img_per_s, "dataload_frac": c.dataload_frac,
                            "gpu_util": c.gpu_util} for c in report.cells],
                 **({"beside": report.beside} if report.beside else {})},
        at=time.time())
