"""The exit codes a script sees from `gpurent-tui`, defined once for every layer.

The CLI returns them; the actions' reports (`tui.actions.flows.Report`) and the
model's reports (check, doctor, fetch, launch) carry them. The README's exit-code
table lists them per command (tests/io/test_exit_codes.py holds the two together).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a box, a check or an action failed
# A config or usage error, or a question only a terminal can answer (the first Hub
# token to a box, off a terminal without --yes): nothing was done.
EXIT_USAGE = 2
EXIT_UNPUSHED = 3  # destroy refused: the box holds weights not yet pushed
EXIT_SIGNAL_BASE = 128  # ended by a signal: 128 + its number, as a shell says
EXIT_INTERRUPTED = EXIT_SIGNAL_BASE + 2  # Ctrl+C (SIGINT)
