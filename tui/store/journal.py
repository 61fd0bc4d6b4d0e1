"""The action journal: every push, stop, start and destroy, and how it ended, on disk."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tui.store import paths
from tui.store.jsonl import append_jsonl, read_jsonl


class Journal:
    """Append-only record of actions. Tokens never enter it: callers pass only
    names, sizes, hashes, destinations and words."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "journal.jsonl"
        self.problem: str | None = None
        try:
            self.entries, self.skipped = read_jsonl(self.path)
        except OSError as exc:
            self.entries, self.skipped = [], 0
            self.problem = f"journal {self.path} cannot be read ({exc.strerror or exc})"

    def record(self, *, box: str, action: str, outcome: str, run: str | None = None,
               run_path: str | None = None, files: Sequence[Mapping[str, Any]] = (),
               destination: str | None = None, verified: bool | None = None,
               message: str = "", error: str | None = None,
               at: float | None = None) -> dict[str, Any]:
        entry = {
            "v": 1, "time": round(at if at is not None else time.time(), 3), "box": box,
            "run": run, "run_path": run_path, "action": action, "outcome": outcome,
            "files": [dict(f) for f in files], "destination": destination,
            "verified": verified, "message": message, "error": error,
        }
        self.entries.append(entry)
        try:
            append_jsonl(self.path, entry)
        except OSError as exc:
            self.problem = (f"journal {self.path} cannot be written ({exc.strerror or exc}); "
                            "this session's actions are kept in memory only")
        return entry
