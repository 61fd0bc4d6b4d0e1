"""The money fold with its cache (what the meter keeps between folds) equals a fresh fold.

A seeded random walk over what moves under a running meter: box snapshots
replaced (runs, GPUs, a box going quiet), the ledger growing (segments at any
time, a box stopped or destroyed and started again, marks), the ledger read
afresh (new histories), the config reloaded with other rates and budgets, the
providers' facts and errors changing, boxes leaving and joining the config, and
the clock moving on by fractions of a second to hours (into segments recorded
ahead of it, too). After every step the
cached fold must equal, figure for figure, a fold that keeps nothing.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from support.fleets import DATA
from support.panel_states import NOW, fleet_states, instance

from tui.model.bill import Book, Event, Mark
from tui.model.box import BoxState, Connection, fold_answer, fold_failure
from tui.model.config import FleetConfig, parse_config
from tui.model.instance import InstanceInfo, PowerOutcome
from tui.model.meter import FleetCost, MeterCache, meter
from tui.providers.meter import FULL_LOOK_SECONDS, CostMeter, record_outcome
from tui.store.ledger import Ledger

NAMES = [f"box{i}" for i in range(8)]
RUNNING_STATUS = json.loads((DATA / "yolox_running" / "status.json").read_text())
T0 = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()

PROVIDERS = ["vast", "runpod", "manual"]
STATES = ["running", "stopped", "destroyed", "unknown", "starting"]


def _config(rng: random.Random, names: list[str]) -> FleetConfig:
    """A config as a reload reads it: new objects, rates and budgets drawn afresh."""
    text = f"idle_minutes = {rng.choice([1, 10, 30])}\n"
    if rng.random() < 0.5:
        text += f"budget_usd = {rng.choice([1, 5, 50])}\n"
    for i, name in enumerate(names):
        text += f'[[box]]\nname = "{name}"\nhost = "h{i}"\n'
        text += f'provider = "{PROVIDERS[int(name[3:]) % 3]}"\n'
        if rng.random() < 0.5:
            text += f"budget_usd = {rng.choice([0.5, 2, 20])}\n"
        if rng.random() < 0.7:
            text += f"[box.pricing]\nrunning_usd_per_hr = {rng.choice([0.45, 0.9, 3.5])}\n"
    return parse_config(text, "walk.toml")


def _snapshot(rng: random.Random, name: str, now: float) -> BoxState:
    """A new snapshot of the box: one of the recorded fleets' boxes, as seen lately."""
    template = replace(rng.choice(fleet_states()), name=name)
    roll = rng.random()
    if roll < 0.2:
        return fold_failure(template, rng.choice([Connection.TIMEOUT, Connection.UNREACHABLE,
                                                  Connection.AUTH_FAILED]),
                            f"box {name}: no answer", now - rng.uniform(0, 600))
    if roll < 0.35:
        return replace(template, gpus=())
    if roll < 0.5 and template.last_ok_at is not None:
        return replace(template, last_ok_at=template.last_ok_at + rng.uniform(0, 60))
    return template


def _facts(rng: random.Random) -> InstanceInfo:
    return instance(rng.choice(["running", "stopped"]),
                    running_usd_per_hr=rng.choice([1.89, 3.4828, None]),
                    disk_gb=rng.choice([None, 100, 250]))


def _step(rng: random.Random, world: dict, now: float) -> float:
    """Change one or a few things, as a second of a running meter might; the new clock."""
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(NAMES)
        roll = rng.random()
        if roll < 0.3:
            world["states"][name] = _snapshot(rng, name, now)
        elif roll < 0.35:
            world["states"].pop(name, None)
        elif roll < 0.5:
            # Now, earlier (a backfill), or just ahead (another process's clock): the
            # clock then moves into the segment with no change to the history.
            world["events"].append(Event(now - rng.choice([0.0, rng.uniform(0, 7200), -0.5]), name,
                                         rng.choice(STATES), rng.choice([0.0, 0.2, 0.45, 3.5]),
                                         "config"))
            world["book"].add(world["events"][-1])
        elif roll < 0.55:
            world["marks"].append(Mark(now, name, rng.choice(["training", "idle", "unseen"])))
            world["book"].add_mark(world["marks"][-1])
        elif roll < 0.6:
            world["book"] = Book(world["events"], world["marks"])  # the ledger read afresh
        elif roll < 0.7:
            names = [n for n in NAMES if rng.random() < 0.85] or [name]
            world["config"] = _config(rng, names)
        elif roll < 0.8:
            world["facts"][name] = _facts(rng)
        elif roll < 0.85:
            world["facts"].pop(name, None)
        elif roll < 0.9:
            if name in world["errors"]:
                del world["errors"][name]
            else:
                world["errors"][name] = "vast: HTTP 503"
        else:
            world["idle"][name] = now - rng.uniform(0, 3600)
    return now + rng.choice([0.0, 0.25, 1.0, 1.0, 1.0, 61.0, 3600.0])


def test_a_cached_fold_equals_a_fresh_one_step_for_step() -> None:
    rng = random.Random(20261205)
    events = [Event(NOW - rng.uniform(0, 20_000), n, "running", 0.45, "config")
              for n in NAMES if rng.random() < 0.8]
    world: dict = {"config": _config(rng, NAMES), "events": events, "marks": [],
                   "book": Book(events), "facts": {}, "errors": {}, "idle": {},
                   "states": {n: _snapshot(rng, n, NOW) for n in NAMES}}
    cache = MeterCache()
    now = NOW
    billed_folds = 0
    for step in range(400):
        args = (world["config"], list(world["states"].values()), dict(world["facts"]),
                world["book"], dict(world["idle"]), now, now - 36_000, dict(world["errors"]))
        cached: FleetCost = meter(*args, cache=cache)
        fresh: FleetCost = meter(*args)
        assert cached == fresh, f"step {step}: the cached fold differs from a fresh one"
        assert [c.history for c in cached.boxes.values()] == \
            [c.history for c in fresh.boxes.values()]
        billed_folds += cached.accrued_usd > 0 and any(c.units for c in cached.boxes.values())
        now = _step(rng, world, now)
    assert billed_folds > 100  # the walk priced runs, not only empty boxes


def test_the_cache_forgets_boxes_that_leave_the_config() -> None:
    rng = random.Random(7)
    states = [_snapshot(rng, n, NOW) for n in NAMES]
    cache = MeterCache()
    meter(_config(rng, NAMES), states, {}, Book(), {}, NOW, NOW - 3600, cache=cache)
    meter(_config(rng, NAMES[:2]), states, {}, Book(), {}, NOW + 1, NOW - 3600, cache=cache)
    assert set(cache.boxes) <= set(NAMES[:2]) and set(cache.rates) == set(NAMES[:2])


# --- the ledger side: an update told which boxes were refreshed ---------------

WATCHED = "".join(f'[[box]]\nname = "lab{i}"\nhost = "lab{i}.example.org"\n'
                  f'stop_command = "sudo poweroff"\n'
                  f"[box.pricing]\nrunning_usd_per_hr = {0.5 + i}\ndisk_gb = 100\n"
                  f"storage_usd_per_gb_month = 0.1\n" for i in range(5))


def _answer(name: str, at: float, training: bool) -> BoxState:
    """A box answering at `at`; its one run progressing, or finished a while ago."""
    status = {**RUNNING_STATUS, "updated_at": iso(at - (1 if training else 900)),
              "started_at": iso(at - 1800)}
    if not training:
        status["state"] = "completed"
    run = {"path": f"/root/runs/{name}", "root": "/root/runs", "name": name, "s_sig": "s",
           "w_sig": "w", "status": status, "pid_alive": training}
    return fold_answer(BoxState(name=name), {"v": 1, "time": at, "runs": [run],
                                             "gpus": {"absent": True}, "disks": []}, at)


def _records(ledger: Ledger) -> list[str]:
    return sorted(ledger.path.read_text().splitlines())


def test_an_update_told_what_was_refreshed_writes_what_a_full_one_does(
        tmp_path: Path) -> None:
    """Two meters see the same boxes answer, fail and come back (and a stop sent), for
    ten minutes (inside the 15-minute seen notes): one compares every box with the ledger
    at every update, the other only the boxes refreshed since its last. Same ledger lines,
    same money, update for update."""
    rng = random.Random(11)
    now = [T0]
    meters = [CostMeter(parse_config(WATCHED, "w.toml"),
                        ledger=Ledger(tmp_path / f"{side}.jsonl"), clock=lambda: now[0])
              for side in ("full", "told")]
    states = {f"lab{i}": _answer(f"lab{i}", T0, i % 2 == 0) for i in range(5)}
    looked_at = 0
    while now[0] < T0 + 600:
        refreshed = set()
        for name in rng.sample(sorted(states), rng.randint(0, 3)):
            roll = rng.random()
            if roll < 0.3:
                states[name] = fold_failure(states[name], Connection.TIMEOUT, "no answer",
                                            now[0])
            elif roll < 0.4:
                for meter_ in meters:
                    record_outcome(meter_.ledger, meters[0].fleet.boxes[int(name[3:])],
                                   PowerOutcome("stop", name, "unknown", ""), now[0] - 1,
                                   now[0])
            else:
                states[name] = _answer(name, now[0], rng.random() < 0.5)
            refreshed.add(name)
        full = meters[0].update(states.values())
        told = meters[1].update(states.values(), only=refreshed)
        looked_at += len(refreshed)
        assert told == full
        assert _records(meters[1].ledger) == _records(meters[0].ledger)
        now[0] += rng.choice([1.0, 1.0, 2.5, 7.0])
    assert looked_at < 5 * 150  # the told meter compared far fewer boxes than all of them
    assert len(_records(meters[0].ledger)) > 30  # segments and marks came and went


def test_an_update_told_what_was_refreshed_still_looks_at_every_box_each_minute(
        tmp_path: Path) -> None:
    now = [T0]
    meter_ = CostMeter(parse_config(WATCHED, "w.toml"),
                       ledger=Ledger(tmp_path / "ledger.jsonl"), clock=lambda: now[0])
    meter_.update([_answer("lab0", T0, True)])
    now[0] += 1
    late = _answer("lab1", T0 + 1, True)  # answered, but its refresh was not reported
    meter_.update([_answer("lab0", T0, True), late], only={"lab0"})
    assert meter_.ledger.last("lab1") is None
    now[0] += FULL_LOOK_SECONDS
    meter_.update([_answer("lab0", T0, True), late], only={"lab0"})
    last = meter_.ledger.last("lab1")
    assert last is not None and last.state == "running" and last.t == T0 + 1
