"""`python -m tui`: the command line itself lives in tui.cli (tui/cli/main.py)."""

from __future__ import annotations

import sys

from tui.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
