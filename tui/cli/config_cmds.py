"""The config's commands: `init` writes an example, `check-config` validates one."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tui.cli.fleet import load_fleet
from tui.model.exit_codes import EXIT_OK, EXIT_USAGE
from tui.model.serverless_script import script_warnings
from tui.store import paths

EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "fleet.example.toml"


def cmd_check_config(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.config)
    parts = []
    if fleet.boxes or not fleet.serverless:
        parts.append(f"{len(fleet.boxes)} box(es): " + ", ".join(b.name for b in fleet.boxes))
    if fleet.serverless:
        parts.append(f"{len(fleet.serverless)} serverless app(s): " + ", ".join(
            f"{e.name} ({e.provider} app {e.app})" for e in fleet.serverless))
    print(f"{fleet.source}: ok, " + "; ".join(parts))
    for entry in fleet.serverless:  # warnings: the config is still valid
        for words in script_warnings(entry):
            print(f"{fleet.source}: serverless {entry.name!r}: warning: {words}")
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    path = paths.locate_config(args.config)
    if path.exists() and not args.force:
        print(f"{path} exists; not overwritten (use --force)", file=sys.stderr)
        return EXIT_USAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXAMPLE_CONFIG.read_text())
    # A bare `check-config` reads the default path: name the one written here.
    check = "gpurent-tui check-config" + (
        f" --config {shlex.quote(str(path))}" if args.config is not None else "")
    print(f"wrote {path}: edit the [[box]] tables, then run `{check}`")
    return EXIT_OK


def add_check_config(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`check-config`."""
    check = sub.add_parser("check-config", parents=[common],
                           help="validate the fleet config (exit 0 if good, 2 if not)")
    check.set_defaults(func=cmd_check_config)


def add_init(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`init`."""
    init = sub.add_parser("init", parents=[common], help="write an example fleet config")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=cmd_init)
