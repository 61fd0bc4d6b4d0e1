"""The cost meter's I/O: poll the providers, append billing segments to the ledger.

`CostMeter.update(boxes)` is cheap (no I/O but an occasional ledger append)
and runs on every box refresh; `poll()` asks each provider about its
instances and runs on its own slower timer, because providers rate-limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.model.cost import InstanceFacts, next_event
from tui.model.meter import FleetCost, meter
from tui.providers import ProviderClient, ProviderError, make_client
from tui.store.ledger import Ledger

PROVIDER_POLL_SECONDS = 60.0


def local_midnight(now: float) -> float:
    """Start of today on the local clock: "spent today" counts from here."""
    stamp = datetime.fromtimestamp(now)
    return stamp.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


class CostMeter:
    """Keeps the providers' facts, the idle clocks and the ledger; folds FleetCost."""

    def __init__(self, fleet: FleetConfig, *, ledger: Ledger | None = None,
                 clients: Mapping[str, ProviderClient] | None = None,
                 clock: Callable[[], float] = time.time,
                 env: Mapping[str, str] | None = None) -> None:
        self.fleet = fleet
        self.ledger = ledger or Ledger()
        self._clock = clock
        self._env = env
        self.clients: dict[str, ProviderClient] = dict(clients or {})
        self.facts: dict[str, InstanceFacts] = {}
        self.errors: dict[str, str] = {}
        self.idle: dict[str, float] = {}
        self.latest: FleetCost | None = None

    def _client(self, provider: str) -> ProviderClient:
        if provider not in self.clients:
            self.clients[provider] = make_client(provider, self.fleet, env=self._env)
        return self.clients[provider]

    async def poll(self) -> None:
        """Ask each provider about each of its boxes, in parallel; errors are kept per box."""
        async def one(name: str, provider: str, instance_id: str) -> None:
            try:
                self.facts[name] = await self._client(provider).get(instance_id)
            except ProviderError as exc:
                self.errors[name] = exc.message
            else:
                self.errors.pop(name, None)

        jobs = []
        for box in self.fleet.boxes:
            if box.provider == "manual":
                continue
            if box.instance_id is None:
                self.errors[box.name] = (f"box {box.name}: set instance_id to read its rates "
                                         f"from {box.provider}")
                continue
            jobs.append(one(box.name, box.provider, box.instance_id))
        await asyncio.gather(*jobs)

    def update(self, boxes: Iterable[BoxState]) -> FleetCost:
        """Fold the current picture; start a ledger segment where a state or rate changed."""
        now = self._clock()
        boxes = list(boxes)
        cost = meter(self.fleet, boxes, self.facts, self.ledger.events, self.idle, now,
                     local_midnight(now), self.errors)
        appended = False
        for name, box_cost in cost.boxes.items():
            rate = box_cost.rate_now
            if rate is None:
                continue
            facts = self.facts.get(name)
            event = next_event(self.ledger.last(name), name, box_cost.rates.state,
                               rate.usd_per_hr, rate.source, now,
                               facts.started_at if facts is not None else None)
            if event is not None:
                self.ledger.record(event)
                appended = True
        if appended:  # accrual starts with the new segments
            cost = meter(self.fleet, boxes, self.facts, self.ledger.events, self.idle, now,
                         local_midnight(now), self.errors)
        self.idle = {n: c.idle_since for n, c in cost.boxes.items() if c.idle_since is not None}
        self.latest = cost
        return cost

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.clients.values()))
