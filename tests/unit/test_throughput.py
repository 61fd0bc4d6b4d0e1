"""A run's images/s, $/epoch and $/1k images from a fake ledger of rate changes, the bill
shared between runs on one box, the right-size verdict's words and its store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tui.model.bill import Book, Event
from tui.model.rightsize import Measured, measure, right_size_text, verdict, verdicts
from tui.model.runs import Dataset, EpochPoint, Health, RunState
from tui.model.throughput import (
    epoch_windows,
    images_per_second,
    unit_costs,
    unit_usd,
    unit_words,
)
from tui.store.throughput import ThroughputStore

T0 = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def run(path: str, start: float, end: float, times: list[float],
        images: int | None = 1000, why: str | None = None) -> RunState:
    status = {"started_at": iso(start), "updated_at": iso(end), "state": "running",
              "model_family": "yolox", "model_size": "n"}
    history = tuple(EpochPoint(i + 1, 1.0, seconds=t) for i, t in enumerate(times))
    return RunState(path=path, name=path, root="/r", status=status, history=history,
                    dataset=Dataset(images=images, imgsz=640, batch=16, unknown=why))


def test_images_per_second_is_images_times_epochs_over_training_seconds() -> None:
    assert images_per_second(1000, [10.0, 10.0, 20.0]) == pytest.approx(3000 / 40)
    assert images_per_second(None, [10.0]) is None
    assert images_per_second(1000, []) is None


def test_unit_dollars_keep_three_digits_and_never_an_exponent() -> None:
    """A $0.09/hr box whose epochs take a second bills $0.0000250 an epoch: three
    significant digits in plain decimals, never `$2.5e-05` (as `status` printed)."""
    assert unit_usd(2.7) == "$2.70"
    assert unit_usd(0.0481) == "$0.0481"
    assert unit_usd(0.009) == "$0.009"
    assert unit_usd(0.000298) == "$0.000298"
    assert unit_usd(1.47e-05) == "$0.0000147"
    assert unit_usd(2.5e-05) == "$0.000025"
    assert unit_usd(0.0) == "$0"


def test_epoch_windows_share_the_wall_time_in_proportion() -> None:
    assert epoch_windows(0.0, 40.0, [10.0, 10.0]) == [(0.0, 20.0), (20.0, 40.0)]
    assert epoch_windows(5.0, 5.0, [1.0]) == []


def test_a_rate_change_mid_run_is_billed_per_epoch_at_each_rate() -> None:
    """Two one-hour epochs: the first at $3.60/hr, the box re-priced to $1.80/hr for the
    second: $2.70 an epoch, not the current rate's $1.80."""
    book = Book([Event(T0 - 60, "b", "running", 3.6, "api"),
                 Event(T0 + 3600, "b", "running", 1.8, "api")])
    one = run("/r/a", T0, T0 + 7200, [3600.0, 3600.0], images=3600)
    unit = unit_costs(one, book.boxes["b"], [], 0.0)
    assert unit.images_per_second == pytest.approx(1.0)
    assert unit.usd_per_epoch == pytest.approx(2.7)
    assert unit.usd_per_1k_images == pytest.approx(2.7 / 3.6)
    assert unit_words(unit) == "1.0 img/s · $2.70/epoch · $0.75/1k img"


def test_two_runs_on_one_box_split_the_bill_while_they_overlap() -> None:
    book = Book([Event(T0 - 60, "b", "running", 3.6, "api")])
    a = run("/r/a", T0, T0 + 7200, [3600.0, 3600.0])
    b_span = (T0 + 3600, T0 + 9000)  # trains beside a during a's second epoch
    unit = unit_costs(a, book.boxes["b"], [b_span], 0.0)
    assert unit.usd_per_epoch == pytest.approx((3.6 + 1.8) / 2)
    # The box clock 100 s behind this machine's: the spans are moved onto ours.
    late = unit_costs(a, book.boxes["b"], [], 100.0)
    assert late.usd_per_epoch == pytest.approx(3.6)


def test_unknown_images_show_dollars_per_epoch_only_and_say_why() -> None:
    book = Book([Event(T0 - 60, "b", "running", 3.6, "api")])
    a = run("/r/a", T0, T0 + 3600, [3600.0], images=None, why="over 200000 entries")
    unit = unit_costs(a, book.boxes["b"], [], 0.0)
    assert unit.images_per_second is None and unit.usd_per_1k_images is None
    assert unit.usd_per_epoch == pytest.approx(3.6)
    assert "over 200000 entries" in unit.note
    assert unit_words(unit) == "$3.60/epoch · images unknown"
    # No ledger: nothing is billed, and it says so.
    assert "no billing" in unit_costs(a, None, [], 0.0).note


def m(box: str, gpu: str, per_1k: float, at: float = T0, imgsz: int = 640,
      rate: float = 1.0) -> Measured:
    return Measured(box, gpu, "yolox-n", imgsz, 16, rate, 100.0, per_1k, at)


def test_the_verdict_names_the_cheaper_box_and_by_how_much() -> None:
    said = verdict([m("h200", "NVIDIA H200", 0.048), m("r4090", "RTX 4090", 0.009),
                    m("other", "A100", 0.5, imgsz=320)], "yolox-n", 640)
    assert said.words == ("the RTX 4090 box (r4090) does yolox-n at 640 px at $0.009 / 1k "
                          "images, the NVIDIA H200 box (h200) at $0.048: 5.3x cheaper per "
                          "epoch")
    assert [x.box for x in said.ranked] == ["r4090", "h200"]


def test_with_fewer_than_two_boxes_it_says_what_is_needed() -> None:
    one = verdict([m("h200", "NVIDIA H200", 0.048)], "yolox-n", 640)
    assert "only one box measured" in one.words and "another box" in one.words
    assert "no box measured" in verdict([], "yolox-n", 640).words
    assert "nothing measured yet" in right_size_text(verdicts([]))


def test_the_newest_measurement_of_a_box_counts() -> None:
    said = verdict([m("h200", "NVIDIA H200", 0.001, at=T0),
                    m("h200", "NVIDIA H200", 0.048, at=T0 + 10),
                    m("r4090", "RTX 4090", 0.009)], "yolox-n", 640)
    assert said.ranked[-1].usd_per_1k_images == 0.048


def test_a_measurement_needs_everything_measured() -> None:
    status = {"model_family": "yolox", "model_size": "n"}
    got = measure("b", ["NVIDIA H200", "NVIDIA H200"], status, 640, 16, 73.0, 0.013, 3.49, T0)
    assert got is not None and got.gpu == "2x NVIDIA H200" and got.model == "yolox-n"
    assert measure("b", [], status, 640, 16, None, 0.013, 3.49, T0) is None
    assert measure("b", [], {}, 640, 16, 73.0, 0.013, 3.49, T0) is None


def test_the_store_keeps_measurements_over_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "throughput.jsonl"
    store = ThroughputStore(path)
    assert store.record([m("h200", "NVIDIA H200", 0.048), m("r4090", "RTX 4090", 0.009)])
    # The same figures a minute later are not written again: the file stays small.
    assert store.record([m("h200", "NVIDIA H200", 0.0481, at=T0 + 60)]) == []
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "box": "torn"')  # a power cut mid-line
    again = ThroughputStore(path)
    assert sorted(x.box for x in again.latest()) == ["h200", "r4090"]
    assert "5.3x cheaper" in verdicts(again.latest())[0].words


def test_the_store_is_rewritten_to_the_newest_per_box_when_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "throughput.jsonl"
    store = ThroughputStore(path)
    for i in range(2100):
        store.record([m("h200", "NVIDIA H200", 0.01 * (1 + i % 2), at=T0 + i)])
    lines = path.read_text().splitlines()
    assert len(lines) < 200
    assert ThroughputStore(path).latest()[0].at == T0 + 2099


def test_a_hostile_box_count_reads_unknown_and_clean() -> None:
    from tui.model.runs import dataset_of
    for images in (10**30, -5, "16", True, float("nan"), 0):
        assert dataset_of({"images": images}).images is None
    assert dataset_of(["not", "a", "dict"]).unknown
    told = dataset_of({"unknown": "\x1b[2J" + "x" * 5000, "data": "\x1b]0;t\x07d.yaml",
                       "imgsz": 10**9})
    assert told.unknown is not None and "\x1b" not in told.unknown and len(told.unknown) <= 120
    assert told.name is not None and "\x1b" not in told.name and told.imgsz is None


def test_the_runs_row_adds_throughput_and_cost_per_1k_at_80_columns() -> None:
    from widgets.fleet_text import run_detail_line
    book = Book([Event(T0 - 60, "b", "running", 3.6, "api")])
    one = run("/r/a", T0, T0 + 7200, [3600.0, 3600.0], images=3600)
    unit = unit_costs(one, book.boxes["b"], [], 0.0)
    line = run_detail_line(replace(one, health=Health.RUNNING), T0 + 7200, unit=unit).plain
    assert line == "1 img/s · $1.00/1k img"  # short beside best, loss, ends, pushed
