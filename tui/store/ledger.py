"""The cost ledger: billing segments on disk, so a restart of the panel loses no cost."""

from __future__ import annotations

from pathlib import Path

from tui.model.cost import Event, parse_event
from tui.store import paths
from tui.store.jsonl import append_jsonl, read_jsonl


class Ledger:
    """Events (segment starts) per box, kept in memory and appended to a JSONL file.

    If the file cannot be written the events stay in memory for this session
    and `problem` says so; nothing already on disk is touched.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "ledger.jsonl"
        self.problem: str | None = None
        try:
            records, self.skipped = read_jsonl(self.path)
        except OSError as exc:
            records, self.skipped = [], 0
            self.problem = (f"cost ledger {self.path} cannot be read ({exc.strerror or exc}); "
                            "costs from earlier sessions are missing")
        self.events: list[Event] = []
        for record in records:
            event = parse_event(record)
            if event is None:
                self.skipped += 1
            else:
                self.events.append(event)

    def last(self, box: str) -> Event | None:
        for event in reversed(self.events):
            if event.box == box:
                return event
        return None

    def record(self, event: Event) -> None:
        self.events.append(event)
        try:
            append_jsonl(self.path, event.to_json())
        except OSError as exc:
            self.problem = (f"cost ledger {self.path} cannot be written ({exc.strerror or exc}); "
                            "costs are kept in memory until the panel quits")
