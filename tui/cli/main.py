"""Command line: gpurent-tui [--config PATH] [COMMAND]; with no command it opens the panel.

The parser and the dispatch; each command group lives in its own module of tui.cli
(watching, actions, monitor, preflight, size, config_cmds, profile, lint). `gpurent-tui`
and `python -m tui` both start `main`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tui import __version__
from tui.cli import actions, config_cmds, lint, monitor, preflight, profile, size, watching
from tui.model.config import ConfigError
from tui.model.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE


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
    watching.add_watching(sub, common)  # demo, status, watch, costs
    config_cmds.add_check_config(sub, common)
    actions.add_box_actions(sub, common)  # push, stop, start, destroy, launch
    monitor.add_monitor(sub, common)
    actions.add_guard(sub, common)
    config_cmds.add_init(sub, common)
    preflight.add_preflight(sub, common)  # check, doctor, stage, fetch
    size.add_size(sub, common)
    profile.add_profile(sub, common)
    lint.add_lint(sub, common)
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
    if rest is not None and getattr(args, "func", None) is not actions.cmd_launch:
        parser.error("arguments after -- are for `launch` only")
    if getattr(args, "func", None) is actions.cmd_launch:
        args.train_args = rest or []
    func = getattr(args, "func", None) or watching.cmd_panel
    try:
        return int(func(args))
    except ConfigError as exc:
        print(f"config error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

