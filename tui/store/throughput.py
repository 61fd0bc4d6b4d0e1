"""Measured throughput per box (GPU, rate, model, image size): what the right-size verdict
compares, kept across sessions for every box this user ran. A small JSONL file beside the
ledger; one line per change worth keeping, rewritten to the newest per box when it grows."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from tui.model.rightsize import Measured, newest, parse_measured
from tui.store import paths
from tui.store.jsonl import append_jsonl, parse_jsonl

MAX_BYTES = 1 << 20     # read at most this much (the newest end)
MAX_LINES = 2000        # past this many lines the file is rewritten, newest per box kept
CHANGE = 0.05           # a new line only when throughput or $/1k moved 5%, or the rate did
KEEP_EVERY = 3600.0     # ... or an hour passed


class ThroughputStore:
    """The measurements on disk and in memory. A file that cannot be written leaves them in
    memory for this session, and `problem` says so."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "throughput.jsonl"
        self.problem: str | None = None
        self.lines = 0
        self.measured: list[Measured] = self._read()

    def _read(self) -> list[Measured]:
        try:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                f.seek(max(0, size - MAX_BYTES))
                data = f.read(MAX_BYTES)
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.problem = f"throughput store {self.path} cannot be read ({exc.strerror or exc})"
            return []
        if size > MAX_BYTES:
            data = data.partition(b"\n")[2]  # the first line read is cut
        records, _skipped = parse_jsonl(data)
        self.lines = len(records)
        return [m for m in (parse_measured(r) for r in records) if m is not None]

    def latest(self) -> list[Measured]:
        return newest(self.measured)

    def record(self, found: Iterable[Measured]) -> list[Measured]:
        """Keep the measurements that differ from the last kept for their box; returns them."""
        held = {m.key: m for m in self.latest()}
        kept = []
        for m in found:
            last = held.get(m.key)
            if last is not None and m.at - last.at < KEEP_EVERY \
                    and abs(m.usd_per_hr - last.usd_per_hr) < 1e-9 \
                    and _near(m.images_per_second, last.images_per_second) \
                    and _near(m.usd_per_1k_images, last.usd_per_1k_images):
                continue
            kept.append(m)
            held[m.key] = m
        for m in kept:
            self.measured.append(m)
            self._append(m)
        if self.lines > MAX_LINES:
            self._compact()
        return kept

    def _append(self, m: Measured) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_jsonl(self.path, m.to_json())
            self.lines += 1
        except OSError as exc:
            self.problem = (f"throughput store {self.path} cannot be written "
                            f"({exc.strerror or exc}); kept for this session only")

    def _compact(self) -> None:
        """Rewrite the file with the newest measurement per box (atomically)."""
        self.measured = self.latest()
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                for m in self.measured:
                    f.write(json.dumps(m.to_json()) + "\n")
            os.replace(tmp, self.path)
            self.lines = len(self.measured)
        except OSError as exc:
            self.problem = f"throughput store {self.path} cannot be rewritten ({exc})"


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= CHANGE * max(abs(b), 1e-12)
