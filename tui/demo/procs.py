"""Processes the demo's runs point at: a pid that lives, one that is gone, and their ages.

The probe calls a run dead when its pid is gone, or when the process with
that pid started more than 2 minutes after the run did (a reused pid). So a
run that looks hung for a quarter of an hour needs a pid whose process is at
least that old; the demo looks for one among its own ancestors.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from tui.onbox import probe as probe_script

# The probe's slack between a run's started_at and its process's start (probe_script.pid_alive).
PID_START_SLACK = float(probe_script.PID_START_SLACK)
# What the demo keeps below that slack, for clock granularity.
PID_START_MARGIN = 100.0


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start(pid: int) -> float | None:
    """When `pid` started (epoch seconds), the way the probe computes it; None without /proc."""
    return probe_script.process_start(pid, probe_script._boot_time())[1]


def ancestors(pid: int) -> list[int]:
    """`pid`'s parent, grandparent, ... up to pid 1 (empty without /proc)."""
    chain: list[int] = []
    while True:
        fields = _stat_fields(pid)
        if fields is None:
            return chain
        parent = int(fields[1])
        if parent <= 0 or parent in chain:
            return chain
        chain.append(parent)
        if parent == 1:
            return chain
        pid = parent


def choose_keeper(candidates: Sequence[tuple[int, float | None]],
                  wanted_start: float) -> tuple[int, float | None]:
    """The nearest candidate old enough to be the process of a run started at `wanted_start`.

    A start of None (no /proc) passes: the probe cannot check it either. With
    no candidate old enough, the oldest one: its run then turns stalled later.
    """
    for pid, start in candidates:
        if start is None or start <= wanted_start + PID_START_MARGIN:
            return pid, start
    return min(candidates, key=lambda c: c[1] if c[1] is not None else float("-inf"))


def keeper_candidates() -> list[tuple[int, float | None]]:
    """This process's ancestors (nearest first), then this process itself."""
    own = os.getpid()
    return [(pid, process_start(pid)) for pid in [*ancestors(own), own]]


def exited_pid() -> int:
    """The pid of a short child process that has already exited and been reaped."""
    true = shutil.which("true")
    command = [true] if true else [sys.executable, "-c", ""]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    child.wait()
    return child.pid
