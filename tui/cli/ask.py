"""The one question the CLI asks: may the Hub token go to a box the first time."""

from __future__ import annotations

import sys

from tui.model.exit_codes import EXIT_FAILED, EXIT_USAGE


def token_asked(notice: str, box: str, yes: bool, what: str) -> int | None:
    """The first send of a Hub token to a box: the notice, then [y/N] on a terminal; off
    one only --yes goes on (exit 2). None when the user said yes."""
    if yes:
        return None
    print(notice)
    if not sys.stdin.isatty():
        print(f"not {what}: pass --yes to send the token to box {box} (or set "
              "upload_from = \"panel\" to keep it here)")
        return EXIT_USAGE
    if input(f"Send your Hub token to {box}? [y/N] ").strip().lower() not in ("y", "yes"):
        print(f"not {what}: the token stays on this machine")
        return EXIT_FAILED
    return None
