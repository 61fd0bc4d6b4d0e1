"""`watch --metrics`: the runtime's fleet served at /metrics by prometheus_client's server.

Imported only when --metrics is given (prometheus_client stays out of the panel's path).
A scrape runs on the server's thread; the families are built on the runtime's event loop
(`run_coroutine_threadsafe`), so a scrape reads one consistent instant and never a dict
the loop is changing. Each scrape is answered by its own thread of the server, so a
scraper that hangs up mid-answer costs that thread only.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

from tui.model.meter import FleetCost
from tui.model.metrics_doc import Family, action_kind, metric_families
from tui.model.serverless_doc import pairs
from tui.runtime.events import ActionEnded, CostChanged, Event
from tui.runtime.fleet import Runtime

SCRAPE_TIMEOUT_SECONDS = 10.0  # the loop's answer to a scrape; none past it: no samples


class FleetTally:
    """What the runtime's events say that its state does not keep: the last money picture
    and the actions ended since the start. A sink: call it with every event."""

    def __init__(self) -> None:
        self.cost: FleetCost | None = None
        self.actions: Counter[tuple[str, str, str]] = Counter()

    def __call__(self, item: Event) -> None:
        if isinstance(item, CostChanged):
            self.cost = item.cost
        elif isinstance(item, ActionEnded):
            outcome = item.outcome or ("done" if item.code == 0 else "failed")
            self.actions[(item.box, action_kind(item.what), outcome)] += 1


def families_now(runtime: Runtime, tally: FleetTally) -> list[Family]:
    """One scrape's families, from the runtime's states and the tally (on the loop)."""
    return metric_families(list(runtime.states.values()), tally.cost, runtime.pushes,
                           {b.name: b.provider for b in runtime.fleet.boxes},
                           dict(tally.actions), runtime.clock(),
                           pairs(runtime.fleet.serverless, list(runtime.serverless.values())))


def _metric(family: Family) -> Metric:
    made: GaugeMetricFamily | CounterMetricFamily
    if family.kind == "counter":
        made = CounterMetricFamily(family.name.removesuffix("_total"), family.help,
                                   labels=family.labels)
    else:
        made = GaugeMetricFamily(family.name, family.help, labels=family.labels)
    for values, value in family.series:
        made.add_metric(list(values), value)
    return made


class FleetCollector(Collector):
    """Builds every family at scrape time from `build`, run on `loop`."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 build: Callable[[], list[Family]]) -> None:
        self.loop = loop
        self.build = build

    def collect(self) -> Iterator[Metric]:
        async def on_loop() -> list[Family]:
            return self.build()

        work = on_loop()
        try:
            future = asyncio.run_coroutine_threadsafe(work, self.loop)
        except RuntimeError:  # the loop is closed: watch is ending
            work.close()
            return
        try:
            families = future.result(timeout=SCRAPE_TIMEOUT_SECONDS)
        except (TimeoutError, RuntimeError, asyncio.CancelledError):
            future.cancel()  # the loop is busy or closing: an empty scrape, not a hang
            return
        for family in families:
            yield _metric(family)


class MetricsServer:
    """prometheus_client's HTTP server on its own threads; `close` stops it."""

    def __init__(self, host: str, port: int, collector: Collector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.httpd, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.port: int = self.httpd.server_address[1]
        self.host = host

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve_metrics(runtime: Runtime, tally: FleetTally, host: str, port: int) -> MetricsServer:
    """Start serving the runtime's fleet (on the running loop's behalf)."""
    loop = asyncio.get_running_loop()
    return MetricsServer(host, port, FleetCollector(loop, lambda: families_now(runtime, tally)))

