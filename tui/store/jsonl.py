"""Append-only JSON-lines files (the cost ledger, the action journal).

A power cut can leave a torn last line: reading skips any line that is not a
whole JSON object and counts it, and the next append starts on a fresh line,
so one bad write never costs the records around it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Every whole JSON object in the file, and how many lines were skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    return parse_jsonl(data)


def parse_jsonl(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """Every whole JSON object in `data` (bytes of such a file), and how many lines were skipped."""
    records, skipped, _alone = parse_lines(data)
    return records, skipped


def parse_lines(data: bytes) -> tuple[list[dict[str, object]], int, int]:
    """The file's records, how many lines were skipped, and how many were parsed one by one.

    All lines in one JSON parse when they are all whole objects (a month of ledger in a
    fraction of a second). Else a line not shaped like one (a torn write, which stays
    mid-file for good) is parsed alone and the lines between such lines in one parse each;
    a whole-looking bad line among them is cornered by halving, each half that parses
    taken in bulk. One bad line costs a few parses, not a line-by-line replay of the month
    at every start. The file's order is kept."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last record
    # Every line shaped like an object, counted at C speed: a torn line is found here,
    # not by a bulk parse failing part way through the month.
    if lines and text.count("}\n{") == len(lines) - 1 and text[:1] == "{" \
            and text.rstrip("\n")[-1:] == "}":
        records = _bulk(lines)
        if records is not None:
            return records, 0, 0
    records, skipped, alone = [], 0, 0
    run: list[str] = []
    for line in lines:
        if line[:1] == "{" and line[-1:] == "}":
            run.append(line)
            continue
        bad, one = _halving(run, records)
        skipped, alone, run = skipped + bad, alone + one, []
        if line.strip():
            alone += 1
            record = _alone(line)
            if record is None:
                skipped += 1
            else:
                records.append(record)
    bad, one = _halving(run, records)
    return records, skipped + bad, alone + one


def _halving(lines: list[str], out: list[dict[str, object]]) -> tuple[int, int]:
    """Whole-looking lines into `out`, in order: in one parse, else each half the same way
    down to single lines. Returns the lines skipped and the lines parsed alone."""
    skipped = alone = 0
    pending = [lines]
    while pending:  # depth-first, first half first
        part = pending.pop()
        if len(part) == 1:
            alone += 1
            record = _alone(part[0])
            if record is None:
                skipped += 1
            else:
                out.append(record)
            continue
        records = _bulk(part)
        if records is not None:
            out.extend(records)
        else:
            mid = len(part) // 2
            pending += [part[mid:], part[:mid]]
    return skipped, alone


def _bulk(lines: list[str]) -> list[dict[str, object]] | None:
    """`lines` as whole objects in one parse, or None if any one is not."""
    if not lines:
        return []
    try:
        records = json.loads("[" + ",".join(lines) + "]")
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." past the stack
        return None
    if len(records) == len(lines) and all(type(r) is dict for r in records):
        return records
    return None


def _alone(line: str) -> dict[str, object] | None:
    """One line's object, or None when it is not a whole JSON object (skipped, counted)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return record if type(record) is dict else None


def append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    """Append one record durably; raises OSError if the file cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size:
            last = os.pread(fd, 1, size - 1)
            if last != b"\n":
                line = b"\n" + line  # the last write was torn: start a new line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
