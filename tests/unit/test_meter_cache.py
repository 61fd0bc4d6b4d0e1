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

import random
from dataclasses import replace

from support.panel_states import NOW, fleet_states, instance

from tui.model.bill import Book, Event, Mark
from tui.model.box import BoxState, Connection, fold_failure
from tui.model.config import FleetConfig, parse_config
from tui.model.instance import InstanceInfo
from tui.model.meter import FleetCost, MeterCache, meter

NAMES = [f"box{i}" for i in range(8)]
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
