"""`watch --metrics`: the runtime's fleet served at /metrics by prometheus_client's server.

Imported only when --metrics is given (prometheus_client stays out of the panel's path).
A scrape runs on the server's thread; the families are built on the runtime's event loop
(`run_coroutine_threadsafe`), so a scrape reads one consistent instant and never a dict
the loop is changing. Each scrape is answered by its own thread of the server, so a
scraper that hangs up mid-answer costs that thread only.

A scrape the loop cannot answer within the deadline fails as a scrape (HTTP 503), never a
200 with every series gone: Prometheus then reads the target's `up` as 0 and
GpurentWatchDown can fire. Watch's log says so once per spell, and again when scrapes are
answered again.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector, CollectorRegistry

from tui.model.meter import FleetCost
from tui.model.metrics_doc import Family, action_kind, metric_families
from tui.model.serverless_doc import pairs
from tui.runtime.events import ActionEnded, CostChanged, Event
from tui.runtime.fleet import Runtime

SCRAPE_TIMEOUT_SECONDS = 10.0  # the loop's answer to a scrape; none past it: HTTP 503

Log = Callable[[str], None]


class ScrapeFailed(Exception):
    """The fleet could not be read for this scrape: it is answered 503, not 200."""


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
    """Builds every family at scrape time from `build`, run on `loop` within `deadline`
    seconds; past it (or with the loop closed) ScrapeFailed, said once per spell in `log`."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 build: Callable[[], list[Family]],
                 deadline: float = SCRAPE_TIMEOUT_SECONDS, log: Log = print) -> None:
        self.loop = loop
        self.build = build
        self.deadline = deadline
        self.log = log
        self._failing = False  # the last scrape failed (and the log said so)
        self._lock = threading.Lock()  # scrapes come on several server threads

    def _said(self, failed: str | None) -> None:
        """Say a spell of failed scrapes once as it starts, and once as it ends."""
        with self._lock:
            was, self._failing = self._failing, failed is not None
        if failed is not None and not was:
            self.log(f"watch: metrics: {failed}: scrapes answered 503 (Prometheus reads "
                     "this target down) until the fleet can be read again")
        elif failed is None and was:
            self.log("watch: metrics: scrapes answered again")

    def _families(self) -> list[Family]:
        async def on_loop() -> list[Family]:
            return self.build()

        work = on_loop()
        try:
            future = asyncio.run_coroutine_threadsafe(work, self.loop)
        except RuntimeError:  # the loop is closed: watch is ending
            work.close()
            raise ScrapeFailed("watch is stopping") from None
        try:
            return future.result(timeout=self.deadline)
        except TimeoutError:
            future.cancel()  # the loop is busy: a failed scrape, not a hang
            raise ScrapeFailed(f"the event loop did not answer a scrape in "
                               f"{self.deadline:g} s") from None
        except (RuntimeError, asyncio.CancelledError):
            future.cancel()
            raise ScrapeFailed("watch is stopping") from None

    def collect(self) -> Iterator[Metric]:
        try:
            families = self._families()
        except ScrapeFailed as failed:
            self._said(str(failed))
            raise
        self._said(None)
        for family in families:
            yield _metric(family)


def _failing_as_503(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """prometheus_client's app, with a scrape whose fleet could not be read answered 503
    (one comment line saying why) rather than a server error with a traceback."""
    def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            return app(environ, start_response)
        except ScrapeFailed as failed:
            start_response("503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8")])
            return [f"# gpurent-tui watch: no figures: {failed}\n".encode()]
    return answer


class _Quiet(WSGIRequestHandler):
    """No access log on watch's stdout (prometheus_client's server is as quiet)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """prometheus_client's app and threading WSGI server (as its start_http_server builds
    them, a failed scrape answered 503); `close` stops it."""

    def __init__(self, host: str, port: int, collector: Collector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

        class Server(ThreadingWSGIServer):  # IPv4 or IPv6, as the host is
            address_family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

        app = _failing_as_503(make_wsgi_app(self.registry))
        self.httpd: ThreadingWSGIServer = make_server(host, port, app, Server,
                                                      handler_class=_Quiet)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                       name="gpurent-metrics")
        self.thread.start()
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


def serve_metrics(runtime: Runtime, tally: FleetTally, host: str, port: int,
                  deadline: float | None = None, log: Log = print) -> MetricsServer:
    """Start serving the runtime's fleet (on the running loop's behalf); `deadline`: how
    long a scrape waits for the loop (None: SCRAPE_TIMEOUT_SECONDS); `log`: watch's."""
    loop = asyncio.get_running_loop()
    collector = FleetCollector(loop, lambda: families_now(runtime, tally),
                               SCRAPE_TIMEOUT_SECONDS if deadline is None else deadline, log)
    return MetricsServer(host, port, collector)

