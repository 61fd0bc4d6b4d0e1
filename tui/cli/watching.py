"""Commands that look at the fleet: the panel, the demo, `status`, `watch`, `costs`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from typing import Any

from tui.cli.fleet import load_fleet
from tui.cli.output import print_json
from tui.model.box import BoxState, Connection
from tui.model.config import FleetConfig
from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_SIGNAL_BASE, EXIT_USAGE
from tui.model.meter import FleetCost
from tui.model.serverless_doc import APPS_HEAD, pairs
from tui.model.serverless_runs import ServerlessState
from tui.model.status_doc import status_document, status_table
from tui.model.text import clean_block


def cmd_panel(args: argparse.Namespace) -> int:
    from tui.app import GpurentApp

    fleet = load_fleet(args.config)
    GpurentApp(fleet).run()
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """The panel over the built-in demo fleet on 127.0.0.1: no config, no network."""
    from tui.demo.real import real_training_problem

    if args.real and (problem := real_training_problem()):
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_demo(args.real))
    except asyncio.CancelledError:  # SIGTERM or SIGHUP: the fleet has been taken down
        return EXIT_SIGNAL_BASE + signal.SIGTERM


async def _demo(real: bool) -> int:
    from tui.app import GpurentApp
    from tui.demo.fleet import DemoFleet

    # A closed terminal or a kill still takes the fleet down: cancel, let `async with` clean up.
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    caught: list[int] = []

    def stop(sig: int) -> None:
        caught.append(sig)
        if main is not None:
            main.cancel()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on this platform
            loop.add_signal_handler(sig, stop, sig)
    demo = DemoFleet(real=real)
    async with demo as fleet:
        saved = {var: os.environ.get(var) for var in demo.env}
        os.environ.update(demo.env)  # the panel's ledger and provider keys stay in the demo
        try:
            app = GpurentApp(fleet)
            await app.run_async()
        finally:
            for var, value in saved.items():
                if value is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = value
    return EXIT_SIGNAL_BASE + caught[0] if caught else app.return_code or EXIT_OK


async def _status(fleet: FleetConfig, entries: list[dict[str, Any]]
                  ) -> tuple[list[BoxState], FleetCost, list[ServerlessState]]:
    """Every box, every provider and every serverless app once, in parallel; then the money
    picture. A box that does not answer is at rest by the panel's rule
    (tui.providers.meter.rest_of)."""
    from dataclasses import replace

    from tui.providers.meter import CostMeter, rest_of
    from tui.remote.watch import snapshot_fleet
    from tui.runtime.serverless import poll_all

    meter = CostMeter(fleet)
    try:
        boxes, _, apps = await asyncio.gather(snapshot_fleet(fleet), meter.poll(),
                                              poll_all(fleet, time.time))
    finally:
        await meter.aclose()
    boxes = [b if b.connection is Connection.OK else
             replace(b, rest=rest_of(fleet, entries, meter, b.name)) for b in boxes]
    return boxes, meter.update(boxes), apps


def cmd_status(args: argparse.Namespace) -> int:
    from tui.runtime.open_files import raise_open_files
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    files = raise_open_files(fleet)  # the panel and `watch` do it as their runtime starts
    if files is not None:
        print(files, file=sys.stderr)  # as the ledger's problems are said
    entries = Journal().entries
    boxes, cost, apps = asyncio.run(_status(fleet, entries))
    now = time.time()
    serverless = pairs(fleet.serverless, apps)
    if args.json:
        from tui.model.guard import last_verified_pushes

        pushes = {b.name: last_verified_pushes(entries, b.name) for b in boxes}
        print_json(status_document(boxes, now, cost, pushes, serverless))
    else:
        # no box's (or CLI's) control sequences
        print(clean_block(status_table(boxes, now, cost, serverless)))
    # A box stopped or destroyed on purpose is not a failure: cron scripts see exit 0. A
    # serverless app whose CLI could not be read is, and so is a missing app or volume.
    ok = all(b.connection is Connection.OK or b.rest is not None for b in boxes) and \
        all(a.error is None and a.problem is None for a in apps)
    return EXIT_OK if ok else EXIT_FAILED


def cmd_watch(args: argparse.Namespace) -> int:
    """The panel's policies without the screen, one log line per event, until a signal."""
    if args.metrics is not None:
        try:
            import prometheus_client  # noqa: F401  (only --metrics needs it)
        except ImportError:
            print("watch: --metrics needs prometheus_client: pip install 'prometheus_client"
                  ">=0.20,<1'", file=sys.stderr)
            return EXIT_FAILED
    fleet = load_fleet(args.config)
    return asyncio.run(_watch(fleet, args.metrics))


def listen_address(text: str) -> tuple[str, int]:
    """`--metrics HOST:PORT` for argparse."""
    from tui.model.metrics_doc import parse_listen

    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def _watch(fleet: FleetConfig, metrics: tuple[str, int] | None = None) -> int:
    from datetime import UTC, datetime

    from tui.runtime.watch_sink import watch

    def log(line: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        print(f"{stamp} {clean_block(line)}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on this platform
            loop.add_signal_handler(sig, stop.set)
    return await watch(fleet, stop, log=log, metrics=metrics)


def parse_since(text: str) -> float:
    """`--since`: a date (local midnight) or an ISO date and time (local unless it says)."""
    from datetime import datetime

    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--since {text!r} is not a date: use YYYY-MM-DD or YYYY-MM-DDTHH:MM") from None
    return stamp.timestamp()  # a naive time is taken as local, as a person means it


def cmd_costs(args: argparse.Namespace) -> int:
    """Per box and for the fleet: running, stopped and idle hours and dollars, and the GPUs'
    busy share with what their idle share cost, from the ledger."""
    from tui.model.bill import costs_report
    from tui.model.costs_doc import costs_document, costs_table
    from tui.model.rightsize import right_size_text, verdict_document, verdicts
    from tui.store.ledger import Ledger
    from tui.store.throughput import ThroughputStore

    fleet = load_fleet(args.config)
    ledger = Ledger()
    if ledger.problem:
        print(ledger.problem, file=sys.stderr)
    if ledger.skipped:
        print(f"cost ledger {ledger.path}: {ledger.skipped} unreadable line(s) skipped",
              file=sys.stderr)
    report = costs_report(ledger.book, [b.name for b in fleet.boxes], args.since, time.time())
    store = ThroughputStore(ledger.path.with_name("throughput.jsonl"))
    if store.problem:
        print(store.problem, file=sys.stderr)
    found = verdicts(store.latest())
    apps = _app_costs(fleet)
    if args.json:
        doc = {**costs_document(report), "right_size": verdict_document(found)}
        if apps is not None:
            doc["serverless"] = apps[0]
        print_json(doc)
    else:
        print(costs_table(report))
        print("\n" + right_size_text(found))
        if apps is not None:
            print("\n" + clean_block("\n".join([APPS_HEAD, *apps[1]])))
    return EXIT_OK


def _app_costs(fleet: FleetConfig) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The serverless apps' estimates for `costs` (polled once, as `status` does): their
    own section, since the ledger holds only the boxes' metered money."""
    if not fleet.serverless:
        return None
    from tui.model.serverless_doc import app_cost_lines, money_document, serverless_money
    from tui.runtime.serverless import poll_all

    now = time.time()
    entries = pairs(fleet.serverless, asyncio.run(poll_all(fleet, time.time)))
    docs = [{"name": e.name, "provider": e.provider, "app": e.app,
             **money_document(serverless_money([(e, s)], now))} for e, s in entries]
    return docs, app_cost_lines(entries, now)


def add_watching(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`demo`, `status`, `watch` and `costs`, in the help's order."""
    demo = sub.add_parser("demo", help="the panel over a built-in demo fleet on 127.0.0.1 "
                                       "(replayed LibreYOLO runs; no config, no network)")
    demo.add_argument("--real", action="store_true",
                      help="one box also trains a real tiny LibreYOLO model on the CPU "
                           "(needs pip install -e '.[train]')")
    demo.set_defaults(func=cmd_demo)
    status = sub.add_parser("status", parents=[common],
                            help="probe every box once and print what each run is doing")
    status.add_argument("--json", action="store_true",
                        help="print the gpurent.status/1 JSON document")
    status.set_defaults(func=cmd_status)
    watch = sub.add_parser("watch", parents=[common],
                           help="the panel's policies without its screen (milestone pushes, "
                                "idle and budget alarms, on_budget, alerts), one log line per "
                                "event, until SIGTERM or SIGINT")
    watch.add_argument("--metrics", type=listen_address, metavar="HOST:PORT",
                       help="also serve the fleet's figures at http://HOST:PORT/metrics in "
                            "the Prometheus text format (HOST defaults to 127.0.0.1; port 0: "
                            "a free one, printed in the log; needs prometheus_client)")
    watch.set_defaults(func=cmd_watch)
    costs = sub.add_parser("costs", parents=[common],
                           help="what each box and the fleet cost: running, stopped and idle "
                                "hours and dollars, what was billed after the last run "
                                "ended, how busy the GPUs were and what their idle share "
                                "cost (from the ledger); then the right-size verdict: each "
                                "model's measured $ per 1k images on every box it ran on")
    costs.add_argument("--since", type=parse_since, metavar="DATE",
                       help="count from this date (YYYY-MM-DD, local midnight) or time")
    costs.add_argument("--json", action="store_true",
                       help="print the gpurent.costs/1 JSON document")
    costs.set_defaults(func=cmd_costs)
