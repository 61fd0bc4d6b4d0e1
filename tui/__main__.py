"""Command line: gpurent-tui [--config PATH] [demo | status | watch | check-config | init].

With no command it opens the panel.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tui import __version__
from tui.model.box import BoxState, Connection
from tui.model.config import BoxConfig, ConfigError, ConfigProblem, FleetConfig, parse_config
from tui.model.meter import FleetCost
from tui.model.status_doc import status_document, status_table
from tui.model.text import clean_block
from tui.store import paths

if TYPE_CHECKING:
    from tui.actions.flows import Report
    from tui.model.staging import FetchReport

EXIT_OK = 0
EXIT_BOX_FAILED = 1
EXIT_CONFIG = 2

EXAMPLE_CONFIG = Path(__file__).with_name("fleet.example.toml")


def load_fleet(explicit: str | None) -> FleetConfig:
    """Find, read and validate the fleet config; ConfigError says what is wrong where."""
    path = paths.locate_config(explicit)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "" if explicit else " (run `gpurent-tui init` to write an example)"
        raise ConfigError([ConfigProblem(str(path), f"no such file{hint}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), f"cannot read: {exc}")]) from None
    return parse_config(text, str(path))


def cmd_check_config(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.config)
    print(f"{fleet.source}: ok, {len(fleet.boxes)} box(es): "
          + ", ".join(b.name for b in fleet.boxes))
    return EXIT_OK


async def _status(fleet: FleetConfig) -> tuple[list[BoxState], FleetCost]:
    """Every box once and every provider once, in parallel; then the money picture."""
    from tui.providers.meter import CostMeter
    from tui.remote.watch import snapshot_fleet

    meter = CostMeter(fleet)
    try:
        boxes, _ = await asyncio.gather(snapshot_fleet(fleet), meter.poll())
    finally:
        await meter.aclose()
    return boxes, meter.update(boxes)


def cmd_status(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.config)
    boxes, cost = asyncio.run(_status(fleet))
    now = time.time()
    if args.json:
        from tui.model.guard import last_verified_pushes
        from tui.store.journal import Journal

        entries = Journal().entries
        pushes = {b.name: last_verified_pushes(entries, b.name) for b in boxes}
        json.dump(status_document(boxes, now, cost, pushes), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(clean_block(status_table(boxes, now, cost)))  # no box's control sequences
    ok = all(b.connection is Connection.OK for b in boxes)
    return EXIT_OK if ok else EXIT_BOX_FAILED


def cmd_watch(args: argparse.Namespace) -> int:
    """The panel's policies without the screen, one log line per event, until a signal."""
    fleet = load_fleet(args.config)
    return asyncio.run(_watch(fleet))


async def _watch(fleet: FleetConfig) -> int:
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
    return await watch(fleet, stop, log=log)


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
    """Per box and for the fleet: running, stopped and idle hours and dollars, from the ledger."""
    from tui.model.bill import costs_report
    from tui.model.costs_doc import costs_document, costs_table
    from tui.store.ledger import Ledger

    fleet = load_fleet(args.config)
    ledger = Ledger()
    if ledger.problem:
        print(ledger.problem, file=sys.stderr)
    if ledger.skipped:
        print(f"cost ledger {ledger.path}: {ledger.skipped} unreadable line(s) skipped",
              file=sys.stderr)
    report = costs_report(ledger.book, [b.name for b in fleet.boxes], args.since, time.time())
    if args.json:
        json.dump(costs_document(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(costs_table(report))
    return EXIT_OK


def _box(fleet: FleetConfig, name: str) -> BoxConfig:
    try:
        return fleet.box(name)
    except KeyError as exc:
        raise ConfigError([ConfigProblem(fleet.source, str(exc.args[0]))]) from None


def _print_report(report: Report) -> int:
    for line in report.lines:
        print(line)
    return report.code


def cmd_push(args: argparse.Namespace) -> int:
    from tui.actions.flows import push_runs
    from tui.actions.hub import token_notice
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    journal = Journal()
    notice = token_notice(box, journal.entries)
    # The first push that sends the Hub token to this box: asked, as the panel asks.
    if notice is not None and (code := _token_asked(notice, box.name, args.yes,
                                                      "pushed")) is not None:
        return code

    def progress(name: str, done: int, total: int) -> None:
        if done == total:
            print(f"  {name}: {total} bytes", file=sys.stderr)

    report = asyncio.run(push_runs(fleet, box, journal,
                                   run_names=[args.run] if args.run else None,
                                   include_epochs=args.epochs, progress=progress))
    return _print_report(report)


def cmd_power(args: argparse.Namespace) -> int:
    from tui.actions.flows import power
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    return _print_report(asyncio.run(power(fleet, _box(fleet, args.box), args.command,
                                           Journal())))


def cmd_destroy(args: argparse.Namespace) -> int:
    from tui.actions.flows import destroy
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    if not args.yes:
        print(f"destroy {box.name} deletes the box and its disk for good: pass --yes",
              file=sys.stderr)
        return EXIT_CONFIG
    journal = Journal()
    if args.push_first:  # its push may be the first to send the Hub token to the box
        from tui.actions.hub import token_notice

        notice = token_notice(box, journal.entries)
        # On a terminal asked as push asks; off one, destroy's --yes is that yes too.
        if notice is not None and (code := _token_asked(
                notice, box.name, not sys.stdin.isatty(), "destroyed")) is not None:
            return code
    report = asyncio.run(destroy(fleet, box, journal, force_unpushed=args.force_unpushed,
                                 push_first=args.push_first,
                                 without_snapshots=args.without_snapshots))
    return _print_report(report)


def cmd_launch(args: argparse.Namespace) -> int:
    """Start a run detached on a box; print its path once its status.json exists."""
    from tui.actions.launch import TAIL_LINES, launch, tail_lines
    from tui.model.launch import LaunchError, plan_launch
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    if args.script is not None and not Path(args.script).is_file():
        print(f"--script {args.script}: no such file", file=sys.stderr)
        return EXIT_CONFIG
    try:
        plan = plan_launch(box.name, box.runs_roots, train_args=args.train_args,
                           script_name=Path(args.script).name if args.script else None,
                           name=args.name, project=args.project, data=args.data,
                           resume=args.resume, now=time.time())
    except LaunchError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    outcome = asyncio.run(launch(
        fleet, box, plan, Journal(), script_path=str(Path(args.script).resolve())
        if args.script else None, force=args.force, doctor=not args.no_doctor,
        wait=args.wait, on_event=lambda line: print(line, file=sys.stderr)))
    if outcome.outcome == "started":
        print(outcome.run_dir)
        return EXIT_OK
    print(f"launch on box {box.name} {outcome.outcome}: {outcome.message}", file=sys.stderr)
    if outcome.tail:
        print(f"--- its output (last {TAIL_LINES} lines) ---", file=sys.stderr)
        for line in tail_lines(outcome.tail):
            print(line, file=sys.stderr)
    return EXIT_BOX_FAILED


def cmd_guard(args: argparse.Namespace) -> int:
    """Arm (or remove) the watchdog on a box: it acts without a panel."""
    from tui.actions.watchdog import GuardRequest, guard_token, install_guard, remove_guard
    from tui.model.watchdog import GuardPlanError, check_limits, parse_on
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    if args.remove:
        return _print_report(asyncio.run(remove_guard(fleet, box, Journal())))
    if args.max_hours is None:
        print("guard: --max-hours H is required (fractions allowed, e.g. 0.5); "
              "--remove takes the watchdog away", file=sys.stderr)
        return EXIT_CONFIG
    try:
        check_limits(args.max_hours, args.no_progress_minutes, args.poll_seconds)
        actions = parse_on(args.on or [])
    except GuardPlanError as exc:
        print(f"guard: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    request = GuardRequest(max_hours=args.max_hours,
                           no_progress_minutes=args.no_progress_minutes, actions=actions,
                           dry_run=args.dry_run, poll_seconds=args.poll_seconds,
                           use_account_key=args.use_account_key)
    journal = Journal()
    rule = guard_token(box, request, journal.entries)
    if rule.ask and (code := _token_asked(rule.notice or "", box.name, args.yes,
                                          "armed")) is not None:
        return code  # the first token to this box: asked, as push asks
    report = asyncio.run(install_guard(fleet, box, request, journal, confirmed=True,
                                       say=lambda line: print(line, file=sys.stderr)))
    return _print_report(report)


def cmd_monitor(args: argparse.Namespace) -> int:
    """LibreYOLO's monitor for a run, forwarded to 127.0.0.1 here until Ctrl+C."""
    if args.port is not None and not 1 <= args.port <= 65535:
        print(f"monitor: --port {args.port} is not a port (1 to 65535)", file=sys.stderr)
        return EXIT_CONFIG
    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    try:
        return asyncio.run(_monitor(fleet, box, args.run, args.port))
    except asyncio.CancelledError:
        return EXIT_OK


async def _monitor(fleet: FleetConfig, box: BoxConfig, run: str, port: int | None) -> int:
    import getpass

    from tui.actions.monitor import MonitorError, close_monitor, hold_monitor, open_monitor
    from tui.model.launch import ssh_forward_hint
    from tui.remote.hostkeys import host_key_store
    from tui.remote.session import BoxSession

    session = BoxSession(box, fleet, host_key_store(fleet))
    # Ctrl+C (or a hangup) from the first moment on: during the start it cancels the
    # start, which stops a monitor it started; once open, it ends the look.
    done = asyncio.Event()
    said: list[str] = []
    start = asyncio.ensure_future(open_monitor(session, box, run, local_port=port,
                                               on_cancel=said.append))

    def stop() -> None:
        done.set()
        start.cancel()  # nothing once the start is over

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    try:
        try:
            handle = await start
        except MonitorError as exc:
            print(exc.message, file=sys.stderr)
            return EXIT_BOX_FAILED
        except asyncio.CancelledError:
            if not done.is_set():
                raise
            print(f"interrupted while the monitor started on box {box.name}: "
                  f"{'; '.join(said) or 'nothing started'}", file=sys.stderr)
            return EXIT_OK
        how = "started" if handle.started else "already serving"
        print(handle.url, flush=True)
        print(f"libreyolo monitor ({how}) on box {box.name} port {handle.remote_port}, "
              f"run {handle.run_dir}: {handle.run_url}", file=sys.stderr)
        hint = ssh_forward_hint(handle.local_port, os.environ.get("SSH_CONNECTION"),
                                getpass.getuser())
        if hint:
            print(f"on your laptop: {hint}  then open {handle.url}", file=sys.stderr)
        print("Ctrl+C stops the forward" + (" and the monitor" if handle.started else ""),
              file=sys.stderr, flush=True)
        await hold_monitor(session, handle, done,
                           say=lambda line: print(line, file=sys.stderr, flush=True))
        print(await close_monitor(session, handle), file=sys.stderr)
        return EXIT_OK
    finally:
        await session.close()


def cmd_init(args: argparse.Namespace) -> int:
    path = paths.locate_config(args.config)
    if path.exists() and not args.force:
        print(f"{path} exists; not overwritten (use --force)", file=sys.stderr)
        return EXIT_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXAMPLE_CONFIG.read_text())
    print(f"wrote {path}: edit the [[box]] tables, then run `gpurent-tui check-config`")
    return EXIT_OK


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
        return EXIT_CONFIG
    try:
        return asyncio.run(_demo(args.real))
    except asyncio.CancelledError:  # SIGTERM or SIGHUP: the fleet has been taken down
        return 128 + signal.SIGTERM


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
    return 128 + caught[0] if caught else app.return_code or EXIT_OK


# -- before the GPU bills: check, doctor (stage, fetch, size) ---------------------------

def cmd_check(args: argparse.Namespace) -> int:
    from tui.actions.preflight import check
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)

    def stage(name: str) -> None:
        if not args.json:
            print(f"  {name} ...", file=sys.stderr, flush=True)

    report = asyncio.run(check(fleet, box, Journal(), deadline=args.timeout, on_stage=stage))
    if args.json:
        json.dump(report.document(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n".join(report.lines()))
    return report.exit_code


def cmd_doctor(args: argparse.Namespace) -> int:
    from tui.actions.preflight import doctor

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    report = asyncio.run(doctor(fleet, box, args.data_yaml, fast=args.fast, strict=args.strict,
                                deadline=args.timeout))
    if args.json:
        json.dump(report.document(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n".join(report.lines()))
    return report.exit_code


class _Bar:
    """A progress bar on stderr (a terminal), or one line per step (a log)."""

    WIDTH = 30

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.step: str | None = None

    def __call__(self, step: str, done: int, total: int) -> None:
        from tui.model.sizing import human_bytes

        if step != self.step:
            if self.step is not None and self.tty:
                sys.stderr.write("\n")
            self.step = step
            if not self.tty:
                print(f"{step}: {human_bytes(total)} ...", file=sys.stderr, flush=True)
        if not self.tty:
            return
        share = done / total if total else 1.0
        filled = int(self.WIDTH * min(share, 1.0))
        sys.stderr.write(f"\r{step:>8} [{'#' * filled}{'-' * (self.WIDTH - filled)}] "
                         f"{share:4.0%} {human_bytes(done)} / {human_bytes(total)}   ")
        sys.stderr.flush()

    def end(self) -> None:
        if self.step is not None and self.tty:
            sys.stderr.write("\n")


def cmd_stage(args: argparse.Namespace) -> int:
    from tui.actions.stage import StageError, stage
    from tui.model.staging import repo_problem

    if problem := repo_problem(args.repo):
        print(problem, file=sys.stderr)
        return EXIT_CONFIG
    bar = _Bar()
    try:
        report = stage(Path(args.dir), args.repo, public=args.public, name=args.name,
                       tar_path=Path(args.tar) if args.tar else None, keep_tar=args.keep_tar,
                       progress=bar, follow_outside=args.follow_outside)
    except StageError as exc:
        bar.end()
        print(f"stage: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    bar.end()
    print(report.message)
    print(f"  {report.name}: {report.size} bytes, sha256 {report.sha256}")
    return report.exit_code


def _token_asked(notice: str, box: str, yes: bool, what: str) -> int | None:
    """The first send of a Hub token to a box: the notice, then [y/N] on a terminal; off
    one only --yes goes on (exit 2). None when the user said yes."""
    if yes:
        return None
    print(notice)
    if not sys.stdin.isatty():
        print(f"not {what}: pass --yes to send the token to box {box} (or set "
              "upload_from = \"panel\" to keep it here)")
        return 2
    if input(f"Send your Hub token to {box}? [y/N] ").strip().lower() not in ("y", "yes"):
        print(f"not {what}: the token stays on this machine")
        return 1
    return None


def cmd_fetch(args: argparse.Namespace) -> int:
    from tui.actions.stage import StageError, TokenConsent, fetch
    from tui.model.staging import repo_problem
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = _box(fleet, args.box)
    if problem := repo_problem(args.repo):
        print(problem, file=sys.stderr)
        return EXIT_CONFIG
    bar = _Bar()
    journal = Journal()

    def run(confirmed: bool) -> FetchReport:
        return asyncio.run(fetch(fleet, box, args.repo, filename=args.file, dest=args.to,
                                 journal=journal, deadline=args.timeout,
                                 keep_tar=args.keep_tar, progress=bar, confirmed=confirmed))

    try:
        try:
            report = run(args.yes)
        except TokenConsent as asked:  # nothing was sent: ask, as push asks
            bar.end()
            if (code := _token_asked(asked.notice, box.name, False, "fetched")) is not None:
                return code
            report = run(True)
    except StageError as exc:
        bar.end()
        print(f"fetch: {exc}", file=sys.stderr)
        return EXIT_BOX_FAILED
    bar.end()
    if args.json:
        json.dump(report.document(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.message)
        for line in report.refused:
            print(f"  refused: {line}")
    return report.exit_code


def cmd_size(args: argparse.Namespace) -> int:
    from tui.model.sizing import DEFAULT_SAVE_PERIOD, GB, disk_rate, model_checkpoint, plan_disk

    data = _data_bytes(args.data)
    if data is None:
        from tui.model.staging import repo_problem

        if repo_problem(args.data) is not None:
            print(f"size: --data {args.data!r} is neither a number of GB, an existing folder "
                  "or file, nor a staged Hub dataset repo (ORG/NAME)", file=sys.stderr)
            return EXIT_CONFIG
        from tui.actions.hub import resolve_token
        from tui.actions.stage import StageError, hub_expected

        try:  # a staged data set: the tar's size as the Hub reports it
            data = hub_expected(args.data, None, endpoint=os.environ.get("HF_ENDPOINT"),
                                token=resolve_token(None)).size
        except StageError as exc:
            print(f"size: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    checkpoint = None
    if args.checkpoint_mb is not None:
        checkpoint = int(args.checkpoint_mb * 1e6)
    elif args.from_run:
        weights = [p for p in Path(args.from_run).glob("weights/*.pt") if p.is_file()]
        if not weights:
            print(f"size: {args.from_run} has no weights/*.pt", file=sys.stderr)
            return EXIT_CONFIG
        checkpoint = max(p.stat().st_size for p in weights)
    elif args.model:
        checkpoint = model_checkpoint(args.model)
        if checkpoint is None:
            from tui.model.sizing import CHECKPOINT_BYTES

            print(f"size: no measured checkpoint size for {args.model!r} (known: "
                  f"{', '.join(CHECKPOINT_BYTES)}); give --checkpoint-mb or --from-run",
                  file=sys.stderr)
            return EXIT_CONFIG
    else:
        print("size: give --model, --checkpoint-mb or --from-run", file=sys.stderr)
        return EXIT_CONFIG
    period = DEFAULT_SAVE_PERIOD if args.save_period is None else args.save_period
    plan = plan_disk(data, checkpoint, args.epochs, period,
                     system_bytes=int(args.system_gb * GB))
    provider, pricing, name = args.provider, None, None
    if args.box:
        box = _box(load_fleet(args.config), args.box)
        provider, pricing, name = provider or box.provider, box.pricing, box.name
    rate, hours, source = disk_rate(provider, pricing, box=name,
                                    usd_per_gb_month=args.usd_per_gb_month,
                                    hours_per_month=args.hours_per_month)
    if args.json:
        doc = {"schema": "gpurent.size/1", "data_bytes": plan.data_bytes,
               "checkpoint_bytes": plan.checkpoint_bytes, "checkpoints": plan.checkpoints,
               "save_period": plan.save_period,
               "logs_bytes": plan.logs_bytes, "system_bytes": plan.system_bytes,
               "headroom_bytes": plan.headroom_bytes, "needed_bytes": plan.needed_bytes,
               "fetch_peak_bytes": plan.fetch_peak_bytes, "allocate_gb": plan.allocate_gb,
               "stopped_usd_per_hr": plan.stopped_usd_per_hr(rate, hours)
               if rate is not None and hours is not None else None}
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n".join(plan.lines(rate, hours, source)))
    return EXIT_OK


def _count(text: str, least: int = 0) -> int:
    """A whole number, `least` or more (epochs: 1; a save period: 0, none)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} is below {least}")
    return value


def _epochs(text: str) -> int:
    return _count(text, least=1)


def _size(text: str) -> float:
    """A size or price, 0 or more and finite (a negative one would shrink the disk asked for)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size of 0 or more")
    return value


def _data_bytes(text: str) -> int | None:
    """--data: GB as a number, or a local folder or tar whose size is measured."""
    from tui.model.sizing import GB

    try:
        value = float(text)
    except ValueError:
        value = None
    if value is not None and value >= 0 and value == value:
        return int(value * GB)
    path = Path(text).expanduser()
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return None


def add_preflight_commands(sub: argparse._SubParsersAction,
                           common: argparse.ArgumentParser) -> None:
    """The guide's steps before training: check the box, doctor the data (stage, fetch, size)."""
    check = sub.add_parser("check", parents=[common],
                           help="check a box before training: torch, CUDA, one real matmul per "
                                "GPU, GPU health, LibreYOLO, HF_HOME (exit 1 on a problem)")
    check.add_argument("box")
    check.add_argument("--json", action="store_true", help="print the gpurent.check/1 document")
    check.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                       help="give up after this long (default 300)")
    check.set_defaults(func=cmd_check)
    doctor = sub.add_parser("doctor", parents=[common],
                            help="run LibreYOLO's `doctor` on a data set on the box, with the "
                                 "box's interpreter (exit 1 when it finds errors)")
    doctor.add_argument("box")
    doctor.add_argument("data_yaml", metavar="DATA_YAML",
                        help="the data set's YAML on the box (relative: to the login's home)")
    doctor.add_argument("--json", action="store_true", help="print the gpurent.doctor/1 document")
    doctor.add_argument("--fast", action="store_true",
                        help="skip image decoding (LibreYOLO's --fast)")
    doctor.add_argument("--strict", action="store_true",
                        help="warnings fail too (LibreYOLO's --strict)")
    doctor.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="give up after this long (default 1800)")
    doctor.set_defaults(func=cmd_doctor)
    stage = sub.add_parser("stage", parents=[common],
                           help="pack a data set folder into one tar and upload it to a Hugging "
                                "Face dataset repo (private), verified by sha256")
    stage.add_argument("dir", metavar="DIR")
    stage.add_argument("--repo", required=True, metavar="ORG/NAME")
    stage.add_argument("--public", action="store_true", help="create the repo public")
    stage.add_argument("--name", help="the tar's name in the repo (default: <DIR's name>.tar)")
    stage.add_argument("--tar", metavar="PATH",
                       help="write the tar here and keep it (default: a cache file, removed "
                            "once the upload is verified)")
    stage.add_argument("--keep-tar", action="store_true", help="keep the packed tar")
    stage.add_argument("--follow-outside", action="store_true",
                       help="pack what links out of DIR point to (refused by default, listed)")
    stage.set_defaults(func=cmd_stage)
    fetch = sub.add_parser("fetch", parents=[common],
                           help="download a staged tar on the box (its own huggingface_hub), "
                                "verify its sha256 against the Hub's, unpack it safely")
    fetch.add_argument("box")
    fetch.add_argument("repo", metavar="ORG/NAME")
    fetch.add_argument("--to", metavar="PATH",
                       help="where to unpack on the box (default: <persistent>/data, else "
                            "~/data)")
    fetch.add_argument("--file", help="the tar in the repo (default: its only .tar)")
    fetch.add_argument("--json", action="store_true", help="print the gpurent.fetch/1 document")
    fetch.add_argument("--yes", action="store_true",
                       help="send the box's Hub token without asking (asked the first time "
                            "a token goes to a box, for a private data set)")
    fetch.add_argument("--keep-tar", action="store_true",
                       help="keep the tar in the box's HF cache (default: deleted once "
                            "unpacked, so it holds no billed disk)")
    fetch.add_argument("--timeout", type=float, default=4 * 3600.0, metavar="SECONDS",
                       help="give up after this long (default 4 h)")
    fetch.set_defaults(func=cmd_fetch)
    size = sub.add_parser("size", parents=[common],
                          help="the disk to rent: data + checkpoints + 30%% headroom, and what "
                               "it costs stopped")
    size.add_argument("--data", required=True, metavar="GB|PATH|ORG/NAME",
                      help="the data set: GB, a local folder or tar to measure, or the Hub "
                           "dataset repo it was staged to")
    which = size.add_mutually_exclusive_group()
    which.add_argument("--model", help="e.g. yolox-s, yolo9-c (measured checkpoint sizes)")
    which.add_argument("--checkpoint-mb", type=_size, metavar="MB",
                       help="one checkpoint's size")
    which.add_argument("--from-run", metavar="DIR",
                       help="a finished run's folder: its largest weights/*.pt")
    size.add_argument("--epochs", type=_epochs, required=True)
    size.add_argument("--save-period", type=_count, default=None, metavar="K",
                      help="an epoch_<N>.pt every K epochs (LibreYOLO's save_period; "
                           "default LibreYOLO's own, 10; 0: none)")
    size.add_argument("--system-gb", type=_size, default=0.0, metavar="GB",
                      help="the image and its Python environment, where the provider counts "
                           "them in the disk")
    size.add_argument("--box", help="price the stopped disk with this box's [box.pricing]")
    size.add_argument("--provider", choices=("vast", "runpod", "lambda", "manual"),
                      help="the provider's hours-per-month convention")
    size.add_argument("--usd-per-gb-month", type=_size, metavar="USD")
    size.add_argument("--hours-per-month", type=float, metavar="H")
    size.add_argument("--json", action="store_true")
    size.set_defaults(func=cmd_size)


def add_guard_command(sub: argparse._SubParsersAction,
                      common: argparse.ArgumentParser) -> None:
    guard = sub.add_parser(
        "guard", parents=[common],
        help="arm a watchdog on the box that pushes, then stops (or destroys) it without a "
             "panel: on a wall-clock limit, when every run finished, stalled, or idle GPUs",
        usage="%(prog)s BOX --max-hours H [--no-progress-minutes M] "
              "[--on TRIGGER=STEPS ...] [--dry-run] [--use-account-key] [--yes] | BOX --remove")
    guard.add_argument("box")
    guard.add_argument("--max-hours", type=float, metavar="H",
                       help="act after this many hours from now (fractions allowed)")
    guard.add_argument("--no-progress-minutes", type=float, metavar="M",
                       help="act when no running run progressed for M minutes, or every GPU "
                            "idled under 5%% that long (default: these triggers are off)")
    guard.add_argument("--on", action="append", metavar="TRIGGER=STEPS",
                       help="per trigger (done, stalled, idle, timeout; join several with |): "
                            "stop, push,stop or push,destroy (default push,stop: push to "
                            "hf_repo when one is set, then stop)")
    guard.add_argument("--dry-run", action="store_true",
                       help="act on nothing: record what it would do")
    guard.add_argument("--use-account-key", action="store_true",
                       help="put your account-wide provider key on the box (it can then "
                            "touch every instance of your account): only where the box has "
                            "no instance-scoped key")
    guard.add_argument("--yes", action="store_true",
                       help="send the box's Hub token without asking (asked the first time "
                            "a token goes to a box, when a step pushes)")
    guard.add_argument("--remove", action="store_true",
                       help="stop the watchdog and remove its files from the box")
    guard.add_argument("--poll-seconds", type=float, default=30.0, metavar="S",
                       help="how often it looks at the runs (default 30; its heartbeat too)")
    guard.set_defaults(func=cmd_guard)


def build_parser() -> argparse.ArgumentParser:
    config_help = ("fleet config (default: $GPURENT_CONFIG, else "
                   "~/.config/gpurent-tui/fleet.toml)")
    # --config works before or after the command; SUPPRESS keeps a subcommand's
    # unset option from overwriting one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=config_help)
    parser = argparse.ArgumentParser(
        prog="gpurent-tui",
        description="Watch LibreYOLO training runs on rented GPU boxes over SSH.")
    parser.add_argument("--config", metavar="PATH", default=None, help=config_help)
    parser.add_argument("--version", action="version", version=f"gpurent-tui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    watch.set_defaults(func=cmd_watch)
    costs = sub.add_parser("costs", parents=[common],
                           help="what each box and the fleet cost: running, stopped and idle "
                                "hours and dollars, and what was billed after the last run "
                                "ended (from the ledger)")
    costs.add_argument("--since", type=parse_since, metavar="DATE",
                       help="count from this date (YYYY-MM-DD, local midnight) or time")
    costs.add_argument("--json", action="store_true",
                       help="print the gpurent.costs/1 JSON document")
    costs.set_defaults(func=cmd_costs)
    check = sub.add_parser("check-config", parents=[common],
                           help="validate the fleet config (exit 0 if good, 2 if not)")
    check.set_defaults(func=cmd_check_config)
    push = sub.add_parser("push", parents=[common],
                          help="push a run's checkpoints (or every run's) to the box's "
                               "destinations, verified by sha256")
    push.add_argument("box")
    push.add_argument("run", nargs="?", help="run name (default: every run on the box)")
    push.add_argument("--epochs", action="store_true", help="also push every epoch_<N>.pt")
    push.add_argument("--yes", action="store_true",
                      help="send the Hub token to the box without asking (its first push "
                           "to hf_repo from the box asks on a terminal, else needs this)")
    push.set_defaults(func=cmd_push)
    for name, words in (("stop", "stop a box (its disk stays billed; the GPU may be gone "
                                 "on restart)"),
                        ("start", "start a stopped box and say if its GPU count changed")):
        power = sub.add_parser(name, parents=[common], help=words)
        power.add_argument("box")
        power.set_defaults(func=cmd_power)
    destroy = sub.add_parser("destroy", parents=[common],
                             help="destroy a box; refused (exit 3) while it holds unpushed "
                                  "weights")
    destroy.add_argument("box")
    destroy.add_argument("--yes", action="store_true", help="really destroy it")
    destroy.add_argument("--force-unpushed", action="store_true",
                         help="destroy even though checkpoints were not pushed")
    destroy.add_argument("--push-first", action="store_true",
                         help="push and verify unpushed checkpoints, then destroy")
    destroy.add_argument("--without-snapshots", action="store_true",
                         help="give up epoch_<N>.pt snapshots that were never pushed (still "
                              "refused while best.pt, last.pt or the history is unpushed)")
    destroy.set_defaults(func=cmd_destroy)
    launch = sub.add_parser(
        "launch", parents=[common],
        help="start a training run detached on a box (libreyolo train ARGS, or --script "
             "FILE); prints the run's path once its status.json exists",
        usage="%(prog)s BOX [--name RUN] [--project DIR] (--script FILE | -- "
              "LIBREYOLO_TRAIN_ARGS...)",
        epilog="Everything after -- goes to libreyolo train (or to your script) as it is.")
    launch.add_argument("box")
    launch.add_argument("--name", help="run name (default: run-<UTC time>)")
    launch.add_argument("--project", metavar="DIR",
                        help="where the run directory goes (default: the box's first "
                             "runs root)")
    launch.add_argument("--script", metavar="FILE",
                        help="your own training script, uploaded beside the run and run "
                             "with the box's python")
    launch.add_argument("--data", metavar="YAML",
                        help="the data set libreyolo doctor checks first (default: the "
                             "train arguments' --data)")
    launch.add_argument("--resume", action="store_true",
                        help="continue an existing run directory")
    launch.add_argument("--force", action="store_true",
                        help="launch even though the box's last check failed")
    launch.add_argument("--no-doctor", action="store_true",
                        help="do not run libreyolo doctor on the data first")
    launch.add_argument("--wait", type=float, default=600.0, metavar="SECONDS",
                        help="how long to wait for status.json (default 600)")
    launch.set_defaults(func=cmd_launch)
    monitor = sub.add_parser("monitor", parents=[common],
                             help="open LibreYOLO's web monitor of a run through the box's "
                                  "SSH path, until Ctrl+C")
    monitor.add_argument("box")
    monitor.add_argument("run", help="run name (under the box's runs roots) or path on the box")
    monitor.add_argument("--port", type=int, metavar="P",
                         help="local port (default: a free one)")
    monitor.set_defaults(func=cmd_monitor)
    add_guard_command(sub, common)
    init = sub.add_parser("init", parents=[common], help="write an example fleet config")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=cmd_init)
    add_preflight_commands(sub, common)
    return parser


class _LostConnectionWrites(logging.Filter):
    """asyncio's own note that something wrote to a socket after it broke: SFTP keeps many
    requests in flight, so a dropped push printed it five times over our own words for
    the same loss ("connection lost during the push ..."). Only that note is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "socket.send() raised exception."


def quiet_lost_connection_writes() -> None:
    log = logging.getLogger("asyncio")
    if not any(isinstance(f, _LostConnectionWrites) for f in log.filters):
        log.addFilter(_LostConnectionWrites())


def main(argv: list[str] | None = None) -> int:
    quiet_lost_connection_writes()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` is libreyolo train's (or a script's), never ours: split it
    # off before argparse, which mishandles `--` after a subcommand's options.
    rest: list[str] | None = None
    if "--" in argv:
        at = argv.index("--")
        argv, rest = argv[:at], argv[at + 1:]
    args = parser.parse_args(argv)
    if rest is not None and getattr(args, "func", None) is not cmd_launch:
        parser.error("arguments after -- are for `launch` only")
    if getattr(args, "func", None) is cmd_launch:
        args.train_args = rest or []
    func = getattr(args, "func", None) or cmd_panel
    try:
        return int(func(args))
    except ConfigError as exc:
        print(f"config error:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
