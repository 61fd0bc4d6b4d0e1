"""`gpurent-tui watch`: the runtime with a log for a sink, no screen.

The same runtime as the panel's (watchers, meter, journal, guardian, the
per-box lock); each event that says something is one log line on stdout.

Stopping (`stop` set: SIGTERM or SIGINT) waits for actions in flight for up to
STOP_GRACE_SECONDS (a push writes `.part` files and renames each only once
verified, so one cut short leaves nothing half-written, only a `.part` the next
push resumes), then closes every SSH session and HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tui.actions.alerts import AlertSender
from tui.model.box import BoxState, Connection
from tui.model.config import FleetConfig
from tui.model.exit_codes import EXIT_FAILED
from tui.model.milestones import RETRY_BASE_SECONDS
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_view import app_words
from tui.model.watchdog_silence import likely_fired
from tui.providers.meter import PROVIDER_POLL_SECONDS, CostMeter
from tui.runtime.events import (
    ActionEnded,
    ActionRefused,
    ActionStarted,
    Alarm,
    BoxChanged,
    Crashed,
    Event,
    Notice,
    ServerlessChanged,
    Sink,
)
from tui.runtime.fleet import Runtime
from tui.store.journal import Journal
from tui.store.secrets import scrub

if TYPE_CHECKING:
    from tui.runtime.metrics import FleetTally, MetricsServer

STOP_GRACE_SECONDS = 30.0

Log = Callable[[str], None]


class LogSink:
    """Turns the runtime's events into watch's log lines (box words redacted)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self._connection: dict[str, Connection] = {}  # box -> as last said
        self._serverless: dict[str, str] = {}  # serverless entry -> its words as last said

    def __call__(self, item: Event) -> None:
        for line in self.lines(item):
            self.log(line)

    def lines(self, item: Event) -> list[str]:
        """The event's log lines (none for one that only redraws)."""
        if isinstance(item, BoxChanged):
            return self._box(item.state)
        if isinstance(item, Alarm):
            return [f"box {n.box}: {n.text}" for n in item.notices] + \
                [e.log_line() for e in item.alerts]
        if isinstance(item, ActionStarted):
            return [f"box {item.box}: {item.title}: started"]
        if isinstance(item, ActionEnded):
            said = " | ".join(line.replace("\n", " ") for line in item.lines)
            return [f"box {item.box}: {item.title}: {'done' if item.code == 0 else 'FAILED'}"
                    + (f": {said}" if said else "")]
        if isinstance(item, ActionRefused):
            return [f"box {item.box}: {item.what} not started: {item.running} is still "
                    "running"]
        if isinstance(item, Crashed):
            what = "providers: poll failed" if item.who == "providers" else \
                f"box {item.who}: watcher crashed"
            return [f"{what} ({item.error}); restarted in {item.delay:.0f} s"]
        if isinstance(item, Notice):
            return [item.text]
        if isinstance(item, ServerlessChanged):
            return self._app(item.state)
        return []

    def _app(self, state: ServerlessState) -> list[str]:
        """A serverless app's line when its state or its CLI's trouble changes."""
        words = state.error or app_words(state.app)
        if state.problem and not state.error:
            words += f"; ! {state.problem}"
        if self._serverless.get(state.name) == words:
            return []
        self._serverless[state.name] = words
        return [f"serverless {state.name}: {words}"]

    def _box(self, state: BoxState) -> list[str]:
        before = self._connection.get(state.name)
        self._connection[state.name] = state.connection
        if state.connection in (before, Connection.WATCHER_CRASHED):  # (Crashed says that)
            return []
        words = f"{state.connection}" + (f": {state.error}" if state.error and
                                        state.connection != "ok" else "")
        fired = likely_fired(state)
        if fired is not None:  # the same words as the panel's guard line
            return [f"box {state.name}: {fired.words()}; not answering: {state.error}"]
        return [f"box {state.name}: {words}"]


class Watch:
    """One headless watch over a fleet: a runtime and its log."""

    def __init__(self, fleet: FleetConfig, *, journal: Journal | None = None,
                 meter: CostMeter | None = None, log: Log = print,
                 clock: Callable[[], float] = time.time,
                 poll_seconds: float = PROVIDER_POLL_SECONDS,
                 retry_seconds: float = RETRY_BASE_SECONDS,
                 metrics: tuple[str, int] | None = None,
                 metrics_deadline: float | None = None) -> None:
        self.fleet = fleet
        self.log: Log = lambda line: log(scrub(line))  # box words in every line: redacted
        self.sender = AlertSender(fleet.alerts, log=self.log)
        self.metrics = metrics  # (host, port) to serve /metrics on; port 0: a free one
        self.metrics_deadline = metrics_deadline  # a scrape's wait for the loop; None: 10 s
        self.metrics_server: MetricsServer | None = None
        self.tally: FleetTally | None = None
        sink: Sink = LogSink(self.log)
        if metrics is not None:
            from tui.runtime.metrics import FleetTally  # prometheus_client: only when asked

            self.tally = tally = FleetTally()
            sink = _both(sink, tally)
        self.runtime = Runtime(fleet, sink, journal=journal, meter=meter,
                               sender=self.sender, clock=clock, poll_seconds=poll_seconds,
                               retry_seconds=retry_seconds)

    @property
    def states(self) -> dict[str, BoxState]:
        return self.runtime.states

    @property
    def busy(self) -> dict[str, str]:
        return self.runtime.busy

    @property
    def journal(self) -> Journal:
        return self.runtime.journal

    async def run(self, stop: asyncio.Event) -> int:
        """Watch until `stop` is set; 0 once everything is closed."""
        boxes = ", ".join(b.name for b in self.fleet.boxes)
        boxes = f" ({boxes})" if boxes else ""
        apps = ", ".join(f"{e.name}: {e.provider} app {e.app}" for e in self.fleet.serverless)
        apps = f", {len(self.fleet.serverless)} serverless app(s) ({apps})" if apps else ""
        self.log(f"watch: {len(self.fleet.boxes)} box(es){boxes}{apps} from "
                 f"{self.fleet.source}"
                 + (f"; alerts to {self.sender.where or ''}"
                    f"{' and a command' if self.fleet.alerts.command else ''}"
                    if self.sender.active else ""))
        if self.metrics is not None and self.tally is not None:
            from tui.runtime.metrics import serve_metrics

            host, port = self.metrics
            try:
                self.metrics_server = serve_metrics(self.runtime, self.tally, host, port,
                                                    self.metrics_deadline, self.log)
            except OSError as exc:
                self.log(f"watch: --metrics {host}:{port}: cannot listen there: "
                         f"{exc.strerror or exc}")
                await self.runtime.aclose()
                return EXIT_FAILED
            self.log(f"watch: metrics on {self.metrics_server.url} (port "
                     f"{self.metrics_server.port})")
        try:
            self.runtime.start()
            await stop.wait()
        finally:
            self.log("watch: stopping")
            if self.busy:
                self.log(f"watch: waiting up to {STOP_GRACE_SECONDS:g} s for "
                         f"{', '.join(sorted(self.busy))}")
            if self.metrics_server is not None:
                await asyncio.to_thread(self.metrics_server.close)
            await self.runtime.aclose(grace=STOP_GRACE_SECONDS)
            self.log("watch: stopped, every connection closed")
        return 0


def _both(first: Sink, second: Sink) -> Sink:
    def sink(item: Event) -> None:
        first(item)
        second(item)
    return sink


async def watch(fleet: FleetConfig, stop: asyncio.Event, *, log: Log = print,
                metrics: tuple[str, int] | None = None) -> int:
    """`gpurent-tui watch`: until `stop` is set; 0 once everything is closed (`metrics`:
    where to serve /metrics)."""
    with contextlib.suppress(asyncio.CancelledError):
        return await Watch(fleet, log=log, metrics=metrics).run(stop)
    return 0
