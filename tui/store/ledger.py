"""The cost ledger: billing segments and activity marks on disk, so a restart of the panel
loses no cost, and what the CLI or another panel appends is seen at the next refresh."""

from __future__ import annotations

import os
from pathlib import Path

from tui.model.bill import Book, Busy, Event, Mark, Seen, parse_record
from tui.store import paths
from tui.store.jsonl import append_jsonl, parse_lines

HEAD_BYTES = 256


class Ledger:
    """Segments, marks and seen notes per box, in memory (a Book) and appended to a JSONL
    file.

    If the file cannot be written the records stay in memory for this session
    and `problem` says so; nothing already on disk is touched. Several
    processes may append to one file (a panel, `stop` from a shell): `refresh`
    reads what the others appended, and a record already held is not taken twice.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "ledger.jsonl"
        self.problem: str | None = None
        self.skipped = 0
        self.events: list[Event] = []
        self.marks: list[Mark] = []
        self._mine: set[Event | Mark | Seen | Busy] = set()  # appended here, not read back yet
        self._read_to = 0
        self._stamp: tuple[int, int, int] | None = None
        self._ino: int | None = None  # the file this history was read from,
        self._head = b""               # and how it begins (an inode number can be reused)
        self.book = Book()
        events, marks, seen, busy = self._read_new()
        self.book = Book(events, marks, seen, busy)

    def _read_new(self) -> tuple[list[Event], list[Mark], list[Seen], list[Busy]]:
        """Records past what was read already (all of them the first time)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return [], [], [], []
        except OSError as exc:
            self.problem = (f"cost ledger {self.path} cannot be read ({exc.strerror or exc}); "
                            "costs from earlier sessions are missing")
            return [], [], [], []
        stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if stamp == self._stamp:
            return [], [], [], []
        if self._ino is not None and (stat.st_ino != self._ino or stat.st_size < self._read_to
                                      or self._head_now()[:len(self._head)] != self._head):
            # Replaced or cut (someone started it afresh): what it says now is the
            # history; nothing read before is counted twice.
            self._read_to, self.events, self.marks, self._mine = 0, [], [], set()
            self.book = Book()
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read_to)
                data = f.read()
        except OSError as exc:
            self.problem = (f"cost ledger {self.path} cannot be read ({exc.strerror or exc}); "
                            "costs from earlier sessions are missing")
            return [], [], [], []
        # Appends are single small writes: a line without its newline is a torn write
        # (the next append starts a fresh line), skipped and counted like any bad line.
        if self._read_to == 0:
            self._head = data[:HEAD_BYTES]
        self._stamp, self._ino = stamp, stat.st_ino
        self._read_to += len(data)
        records, skipped, _alone = parse_lines(data)
        self.skipped += skipped
        events: list[Event] = []
        marks: list[Mark] = []
        seen: list[Seen] = []
        busy: list[Busy] = []
        for record in records:
            parsed = parse_record(record)
            if parsed is None:
                self.skipped += 1
            elif self._mine and parsed in self._mine:
                self._mine.discard(parsed)  # our own append, held already
            elif isinstance(parsed, Mark):
                marks.append(parsed)
            elif isinstance(parsed, Seen):
                seen.append(parsed)
            elif isinstance(parsed, Busy):
                busy.append(parsed)
            else:
                events.append(parsed)
        self.events.extend(events)
        self.marks.extend(marks)
        return events, marks, seen, busy

    def _head_now(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read(HEAD_BYTES)
        except OSError:
            return b""

    def refresh(self) -> bool:
        """Take in what other processes appended since the last read; True if anything."""
        events, marks, seen, busy = self._read_new()
        for event in events:
            self.book.add(event)
        for mark in marks:
            self.book.add_mark(mark)
        for note in seen:
            self.book.add_seen(note)
        for record in busy:
            self.book.add_busy(record)
        return bool(events or marks or seen or busy)

    def last(self, box: str) -> Event | None:
        """The segment in force last for `box` (the newest in time, not in file order)."""
        return self.book.last(box)

    def running_rate(self, box: str) -> float | None:
        """What `box` billed per hour the last time it ran (what a measurement on it is
        priced at when the config names no rate); None if it never ran on record."""
        running = [e for e in self.events if e.box == box and e.state == "running"]
        return max(running, key=lambda e: e.t).usd_per_hr if running else None

    def record(self, event: Event) -> Event:
        """Append a segment; returns it as the file holds it (time to the millisecond)."""
        event = event._replace(t=_to_ms(event.t))
        self._keep(event)
        self.events.append(event)
        self.book.add(event)
        return event

    def mark(self, mark: Mark) -> Mark:
        mark = mark._replace(t=_to_ms(mark.t))
        self._keep(mark)
        self.marks.append(mark)
        self.book.add_mark(mark)
        return mark

    def seen(self, seen: Seen) -> Seen:
        """Note that a meter still counts this box (how far a removed box's history runs)."""
        seen = seen._replace(t=_to_ms(seen.t))
        self._keep(seen)
        self.book.add_seen(seen)
        return seen

    def busy(self, busy: Busy) -> Busy:
        """Append the GPU-busy integral's growth since the box's last such record."""
        busy = busy._replace(t=_to_ms(busy.t), covered_s=round(busy.covered_s, 3),
                             busy_s=min(round(busy.busy_s, 3), round(busy.covered_s, 3)),
                             since=None if busy.since is None else _to_ms(busy.since))
        self._keep(busy)
        self.book.add_busy(busy)
        return busy

    def _keep(self, record: Event | Mark | Seen | Busy) -> None:
        self._mine.add(record)
        try:
            append_jsonl(self.path, record.to_json())
        except OSError as exc:
            self.problem = (f"cost ledger {self.path} cannot be written ({exc.strerror or exc}); "
                            "costs are kept in memory until the panel quits")


def _to_ms(t: float) -> float:
    """A time kept to the millisecond, never later than it was: a segment rounded up would
    start after the moment the meter reads it, which would still bill the state before."""
    kept = round(t, 3)
    return kept if kept <= t else round(kept - 0.001, 3)
