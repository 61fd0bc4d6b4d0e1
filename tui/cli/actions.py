"""Commands that act on one box: `push`, `stop`/`start`, `destroy`, `launch`, `guard`."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from tui.cli.ask import token_asked
from tui.cli.fleet import box_named, load_fleet
from tui.cli.output import print_report
from tui.cli.serverless import serverless_push, serverless_stop
from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def cmd_push(args: argparse.Namespace) -> int:
    from tui.actions.flows import push_runs
    from tui.actions.hub import token_notice
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    entry = next((e for e in fleet.serverless if e.name == args.box), None)
    if entry is not None:
        return serverless_push(entry, args.run)
    box = box_named(fleet, args.box)
    journal = Journal()
    notice = token_notice(box, journal.entries)
    # The first push that sends the Hub token to this box: asked, as the panel asks.
    if notice is not None and (code := token_asked(notice, box.name, args.yes,
                                                     "pushed")) is not None:
        return code

    def progress(name: str, done: int, total: int) -> None:
        if done == total:
            print(f"  {name}: {total} bytes", file=sys.stderr)

    report = asyncio.run(push_runs(fleet, box, journal,
                                   run_names=[args.run] if args.run else None,
                                   include_epochs=args.epochs, progress=progress))
    return print_report(report)


def cmd_power(args: argparse.Namespace) -> int:
    from tui.actions.flows import power
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    entry = next((e for e in fleet.serverless if e.name == args.box), None)
    if entry is not None:
        if args.command != "stop":
            from tui.model.serverless_view import start_words

            print(start_words(entry), file=sys.stderr)
            return EXIT_USAGE
        return serverless_stop(entry)
    box = box_named(fleet, args.box)
    return print_report(asyncio.run(power(fleet, box, args.command, Journal())))


def cmd_destroy(args: argparse.Namespace) -> int:
    from tui.actions.flows import destroy
    from tui.model.serverless_view import destroy_words
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    entry = next((e for e in fleet.serverless if e.name == args.box), None)
    if entry is not None:
        print(destroy_words(entry, f"`gpurent-tui stop {entry.name}` stops it"),
              file=sys.stderr)
        return EXIT_USAGE
    box = box_named(fleet, args.box)
    if not args.yes:
        print(f"destroy {box.name} deletes the box and its disk for good: pass --yes",
              file=sys.stderr)
        return EXIT_USAGE
    journal = Journal()
    if args.push_first:  # its push may be the first to send the Hub token to the box
        from tui.actions.hub import token_notice

        notice = token_notice(box, journal.entries)
        # On a terminal asked as push asks; off one, destroy's --yes is that yes too.
        if notice is not None and (code := token_asked(
                notice, box.name, not sys.stdin.isatty(), "destroyed")) is not None:
            return code
    report = asyncio.run(destroy(fleet, box, journal, force_unpushed=args.force_unpushed,
                                 push_first=args.push_first,
                                 without_snapshots=args.without_snapshots))
    return print_report(report)


def cmd_launch(args: argparse.Namespace) -> int:
    """Start a run detached on a box; print its path once its status.json exists."""
    from tui.actions.launch import TAIL_LINES, launch, tail_lines
    from tui.model.launch import LaunchError, plan_launch
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    if args.script is not None and not Path(args.script).is_file():
        print(f"--script {args.script}: no such file", file=sys.stderr)
        return EXIT_USAGE
    try:
        plan = plan_launch(box.name, box.runs_roots, train_args=args.train_args,
                           script_name=Path(args.script).name if args.script else None,
                           name=args.name, project=args.project, data=args.data,
                           resume=args.resume, now=time.time())
    except LaunchError as exc:
        print(f"launch: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
    return EXIT_FAILED


def cmd_guard(args: argparse.Namespace) -> int:
    """Arm (or remove) the watchdog on a box: it acts without a panel."""
    from tui.actions.watchdog import GuardRequest, guard_token, install_guard, remove_guard
    from tui.model.watchdog import GuardPlanError, check_limits, parse_on
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    if args.remove:
        return print_report(asyncio.run(remove_guard(fleet, box, Journal())))
    if args.max_hours is None:
        print("guard: --max-hours H is required (fractions allowed, e.g. 0.5); "
              "--remove takes the watchdog away", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_limits(args.max_hours, args.no_progress_minutes, args.poll_seconds)
        actions = parse_on(args.on or [])
    except GuardPlanError as exc:
        print(f"guard: {exc}", file=sys.stderr)
        return EXIT_USAGE
    request = GuardRequest(max_hours=args.max_hours,
                           no_progress_minutes=args.no_progress_minutes, actions=actions,
                           dry_run=args.dry_run, poll_seconds=args.poll_seconds,
                           use_account_key=args.use_account_key)
    journal = Journal()
    rule = guard_token(box, request, journal.entries)
    if rule.ask and (code := token_asked(rule.notice or "", box.name, args.yes,
                                         "armed")) is not None:
        return code  # the first token to this box: asked, as push asks
    report = asyncio.run(install_guard(fleet, box, request, journal, confirmed=True,
                                       say=lambda line: print(line, file=sys.stderr)))
    return print_report(report)


def add_box_actions(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`push`, `stop`, `start`, `destroy` and `launch`, in the help's order."""
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


def add_guard(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`guard`."""
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
