"""Serverless apps (Modal, Beam) as the fleet sees them: plain values, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

APP_STATES = ("running", "stopped", "missing", "unknown")
CLI_ERRORS = ("cli_missing", "cli_too_old", "not_logged_in", "app_not_found", "path_missing",
              "failed")
# Seconds one CLI call of a stop may take, in every adapter: a stop asks the provider's
# API to end containers, slower than a listing, and a stop cut short may have landed.
STOP_TIMEOUT = 60.0


@dataclass(frozen=True)
class AppState:
    """One app as its provider's CLI reported it, cleaned and bounded."""

    provider: str  # "modal" | "beam"
    app: str
    state: str  # one of APP_STATES
    tasks: int | None = None  # running containers/tasks, when the CLI says
    started_at: float | None = None  # epoch seconds of the current run's start, when known
    detail: str = ""  # the CLI's own words, cleaned, at most 200 chars
    stopped_at: float | None = None  # when it stopped, when the CLI says (Modal's list does)


@dataclass(frozen=True)
class VolumeEntry:
    """One file or folder on a volume, as the CLI listed it."""

    path: str  # relative to the volume's root, '/'-separated
    is_dir: bool
    size: int | None = None
    mtime: float | None = None
    # How far `mtime` may sit from the file's true time, as the listing words it: 0 for
    # a time to the minute (Modal's, the same in every listing), up to a day for Beam's
    # "N hours ago" read against our clock. Two listings of an unchanged file agree
    # within the larger of their two slacks.
    mtime_slack: float = 0.0
    # The name as the CLI printed it, when cleaning `path` for display changed it (escape
    # sequences): what a read of this folder must ask for; bounded by the adapter.
    raw_path: str | None = None


def same_listing(before: VolumeEntry | None, after: VolumeEntry | None) -> bool:
    """Two listings of one file agree: the same size, and times no further apart than the
    coarser listing can tell (a Beam age in words is re-read against a later clock)."""
    if before is None or after is None:
        return before is after
    if before.size != after.size:
        return False
    if before.mtime is None or after.mtime is None:
        return before.mtime is after.mtime
    return abs(before.mtime - after.mtime) <= max(before.mtime_slack, after.mtime_slack)


class ServerlessError(Exception):
    """A provider CLI call failed: `kind` (one of CLI_ERRORS) says why, the message says
    what to do, without any secret."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
