"""The ledger on disk: replay after restart, torn last line, unwritable file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.model.cost import Event, accrued
from tui.store.jsonl import append_jsonl, read_jsonl
from tui.store.ledger import Ledger


def test_restart_replays_the_same_total(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    first = Ledger(path)
    first.record(Event(0.0, "a", "running", 3.6, "api"))
    first.record(Event(3600.0, "a", "stopped", 0.36, "computed"))
    before = accrued(first.events, 7200.0)
    again = Ledger(path)
    assert again.events == first.events
    assert accrued(again.events, 7200.0) == before == {"a": pytest.approx(3.96)}
    assert again.last("a") == Event(3600.0, "a", "stopped", 0.36, "computed")


def test_default_location_is_the_state_dir(isolated_dirs: Path) -> None:
    assert Ledger().path == isolated_dirs / "state" / "gpurent-tui" / "ledger.jsonl"


def test_torn_last_line_is_skipped_and_the_next_record_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    append_jsonl(path, Event(0.0, "a", "running", 1.0, "api").to_json())
    with path.open("ab") as f:
        f.write(b'{"v":1,"t":36')  # power cut mid-write
    ledger = Ledger(path)
    assert len(ledger.events) == 1 and ledger.skipped == 1
    ledger.record(Event(3600.0, "a", "stopped", 0.1, "computed"))
    records, skipped = read_jsonl(path)
    assert [r["state"] for r in records] == ["running", "stopped"] and skipped == 1
    assert len(Ledger(path).events) == 2


def test_unusable_ledger_path_keeps_costs_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.mkdir()  # not a file: cannot be read or written, even by root
    ledger = Ledger(path)
    assert ledger.problem is not None and "cannot be read" in ledger.problem
    ledger.record(Event(10.0, "a", "running", 1.0, "api"))
    assert ledger.problem is not None and "cannot be written" in ledger.problem
    assert ledger.events == [Event(10.0, "a", "running", 1.0, "api")]
    assert accrued(ledger.events, 3610.0) == {"a": pytest.approx(1.0)}
