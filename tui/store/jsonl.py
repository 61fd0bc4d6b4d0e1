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
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." past the stack
            skipped += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            skipped += 1
    return records, skipped


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
