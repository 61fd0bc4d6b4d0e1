"""The ledger on disk: replay after restart, torn last line, unwritable file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.model.cost import Event, accrued
from tui.store.jsonl import append_jsonl, read_jsonl
from tui.store.ledger import Ledger, parse_lines


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


def test_what_another_process_appends_is_seen_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    panel, cli = Ledger(path), Ledger(path)
    panel.record(Event(0.0, "a", "running", 2.0, "api"))
    cli.refresh()
    cli.record(Event(3600.0, "a", "stopped", 0.1, "computed"))  # `gpurent-tui stop a`
    assert panel.last("a") == Event(0.0, "a", "running", 2.0, "api")
    assert panel.refresh() and not panel.refresh()
    assert panel.last("a") == Event(3600.0, "a", "stopped", 0.1, "computed")
    assert len(panel.events) == 2 and len(cli.events) == 2  # its own append is not taken twice
    assert panel.book.spent("a", 7200.0) == pytest.approx(2.1)
    assert Ledger(path).book.spent("a", 7200.0) == pytest.approx(2.1)


def test_a_segment_arriving_out_of_order_is_billed_in_its_place(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.record(Event(0.0, "a", "running", 1.0, "api"))
    ledger.record(Event(7200.0, "a", "destroyed", 0.0, "computed"))
    ledger.record(Event(3600.0, "a", "stopped", 0.5, "computed"))  # a backfill, say
    assert ledger.book.spent("a", 10800.0) == pytest.approx(1.5)
    assert ledger.last("a") == Event(7200.0, "a", "destroyed", 0.0, "computed")


def test_bad_lines_among_good_ones_cost_only_themselves(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    good = [Event(0.0, "a", "running", 1.0, "api"), Event(3600.0, "a", "stopped", 0.1, "api")]
    bad = ['{"v":1,"t":true,"box":"a","state":"running","usd_per_hr":1}',
           '{"v":1,"t":"60","box":"a","state":"running","usd_per_hr":1}',
           '{"v":1,"t":60,"box":"a","state":"running","usd_per_hr":NaN}',
           '{"v":1,"t":60,"box":"a","state":"running","usd_per_hr":1e999}',
           '{"v":1,"t":60,"box":["a"],"state":"running","usd_per_hr":1}',
           '{"v":1,"kind":"activity","t":60,"box":"a","activity":"dancing"}',
           '[1, 2]', "not json"]
    lines = [json.dumps(good[0].to_json()), *bad, json.dumps(good[1].to_json())]
    path.write_text("\n".join(lines) + "\n")
    ledger = Ledger(path)
    assert ledger.events == good and ledger.skipped == len(bad)


def test_a_ledger_started_afresh_by_another_process_is_not_counted_twice(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.record(Event(0.0, "a", "running", 2.0, "api"))
    ledger.record(Event(3600.0, "a", "stopped", 0.1, "api"))
    ledger.refresh()  # a panel's next refresh
    path.unlink()  # the user deleted it; a new session starts one
    Ledger(path).record(Event(100.0, "b", "running", 1.0, "api"))
    assert ledger.refresh()
    assert ledger.events == [Event(100.0, "b", "running", 1.0, "api")]
    assert ledger.book.spent("a", 7200.0) == 0.0
    assert ledger.book.spent("b", 3700.0) == pytest.approx(1.0)


def test_a_short_ledger_that_grows_is_read_on_not_again(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    panel = Ledger(path)
    panel.record(Event(0.0, "a", "running", 1.0, "api"))
    panel.refresh()
    other = Ledger(path)
    for i in range(1, 20):  # past the first 256 bytes
        other.record(Event(i * 60.0, "a", "running", 1.0 + i, "api"))
    assert panel.refresh()
    assert len(panel.events) == 20 and panel.events == other.events


def test_a_segment_is_never_dated_after_the_moment_it_was_observed(tmp_path: Path) -> None:
    """Times are kept to the millisecond; rounding up would date a stop observed a moment
    ago in the future, and the meter reading 'now' would still see the box running."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.record(Event(1000.0, "a", "running", 1.0, "api"))
    seen = 1796375185.9738
    kept = ledger.record(Event(seen, "a", "stopped", 0.03, "computed"))
    assert kept.t <= seen
    assert ledger.book.boxes["a"].at(seen + 0.0001).state == "stopped"  # type: ignore[union-attr]
    assert Ledger(tmp_path / "ledger.jsonl").events == ledger.events


def test_one_torn_line_is_parsed_alone_and_the_rest_in_bulk() -> None:
    """A torn write stays mid-file for good (the next append starts a new line): the month
    around it must still be read in bulk, only the suspect lines one by one."""
    good = [Event(60.0 * i, "a", "running", 1.0 + i, "api").to_json() for i in range(2000)]
    lines = [json.dumps(r, separators=(",", ":")) for r in good]
    lines.insert(700, '{"v":1,"t":36')                       # power cut mid-write
    lines.insert(1500, '{"v":1,"t":60,"box":"a","state":}')  # whole-looking, but not JSON
    lines.insert(1800, '{"v":1},{"v":2}')                    # two objects on one line
    records, skipped, alone = parse_lines(("\n".join(lines) + "\n").encode())
    assert records == good and skipped == 3
    assert alone <= 3 * 3  # each bad line, and at most two good neighbours as it is cornered
    clean, none_skipped, none_alone = parse_lines(("\n".join(
        json.dumps(r) for r in good) + "\n").encode())
    assert clean == good and none_skipped == none_alone == 0


def test_busy_records_price_the_running_money_billed_in_the_window(tmp_path: Path) -> None:
    """Two minutes of busy records across a rate change ($3.60 then $7.20 from t=60): the
    idle GPU money is the window's running money x (1 - the records' busy share), the
    covered seconds standing for the billed ones; a record another process appended is
    taken at refresh; a destroy starts the restored integral afresh (the same name rented
    again is another card)."""
    from tui.model.bill import Busy, box_bill, restored_busy

    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.record(Event(0.0, "a", "running", 3.6, "api"))
    ledger.record(Event(60.0, "a", "running", 7.2, "api"))
    ledger.busy(Busy(60.0, "a", 60.0, 30.0))   # 30 idle s at $3.60/hr
    other = Ledger(path)
    other.busy(Busy(120.0, "a", 40.0, 10.0, since=0.0))  # 30 idle s in a $5.40 mean stretch
    assert ledger.refresh()
    history = ledger.book.boxes["a"]
    gpu = box_bill(history, "a", 0.0, 120.0).gpu
    assert gpu is not None
    assert (gpu.covered_s, gpu.busy_s, gpu.pct) == (100.0, 40.0, 40.0)
    # the window's running money (60 s at $3.60/hr, 60 s at $7.20/hr) x (1 - 40/100 busy)
    billed = 3.6 * 60 / 3600 + 7.2 * 60 / 3600
    assert (gpu.billed_s, gpu.billed_usd) == (120.0, pytest.approx(billed))
    assert gpu.idle_usd == pytest.approx(billed * (1 - 40 / 100))
    assert box_bill(history, "a", 100.0, 110.0).gpu is None  # no record in the window
    assert restored_busy(history).covered_s == 100.0
    assert restored_busy(history).last_at == 120.0  # a new window adds only what follows
    ledger.record(Event(130.0, "a", "destroyed", 0.0, "computed"))
    assert restored_busy(ledger.book.boxes["a"]).covered_s == 0.0
    assert Ledger(path).book.boxes["a"].busy == history.busy  # replayed the same
