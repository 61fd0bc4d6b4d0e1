"""The alerts sent, on disk: a restarted panel or `watch` does not send one twice.

One JSON line per alert that passed the cool-down (kind, box, run, time; never
its words, which may quote a box), next to the journal (journal.alerts.jsonl).
The guardian reads the newest time per key at start: the cool-down goes on where it was, and an idle
spell already alarmed is not alarmed again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tui.model.alerts import AlertEvent
from tui.store.jsonl import append_jsonl, read_jsonl

Key = tuple[str, str, str | None]


class SentAlerts:
    """When each alert key was last sent, kept in a JSONL file (memory if it fails)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None
        self.sent: dict[Key, float] = {}
        try:
            records, _bad = read_jsonl(path)
        except OSError as exc:
            records = []
            self.problem = f"sent alerts {path} cannot be read ({exc.strerror or exc})"
        for record in records:
            kind, box, run, at = (record.get(k) for k in ("kind", "box", "run", "at"))
            if isinstance(kind, str) and isinstance(box, str) \
                    and (run is None or isinstance(run, str)) \
                    and isinstance(at, (int, float)) and not isinstance(at, bool):
                key = (kind, box, run)
                self.sent[key] = max(float(at), self.sent.get(key, float(at)))

    def add(self, events: Iterable[AlertEvent]) -> None:
        for item in events:
            self.sent[item.key] = item.at
            try:
                append_jsonl(self.path, {"kind": item.kind, "box": item.box, "run": item.run,
                                         "at": round(item.at, 3)})
            except OSError as exc:
                self.problem = (f"sent alerts {self.path} cannot be written "
                                f"({exc.strerror or exc}); kept in memory until the panel quits")
