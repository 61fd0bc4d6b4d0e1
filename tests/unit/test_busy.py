"""The GPU-busy figure's pure parts: the probe's readers of the driver's average (the
nvidia-smi text and NVML's samples), the client's reading of what a box claims, and the
integral's arithmetic."""

from __future__ import annotations

from pathlib import Path

from tui.model.box import BoxState, fold_answer
from tui.model.busy import MAX_GPUS, BusyIntegral, BusyWindow, coverage_words, parse_busy
from tui.onbox import probe
from tui.onbox.probe import PROBE_VERSION, nvml_window, parse_util_query

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi-h200"


def test_the_recorded_h200_answers_read_as_their_averages() -> None:
    for avg in (17, 39, 70):
        text = (FIXTURES / f"util-{avg}.txt").read_text()
        assert parse_util_query(text) == [[float(avg), 14.0]]
    # two GPUs in one answer, in order; the Memory block's Avg is not the GPU's
    two = (FIXTURES / "util-17.txt").read_text() + (FIXTURES / "util-70.txt").read_text()
    assert parse_util_query(two) == [[17.0, 14.0], [70.0, 14.0]]


def test_hostile_utilisation_text_is_bounded_clamped_or_skipped() -> None:
    block = ("GPU 0000:01:00.0\n    GPU Utilization Samples\n"
             "        Duration : {d} sec\n        Avg : {a} %\n")
    assert parse_util_query(block.format(d="14.00", a="250")) == [[100.0, 14.0]]
    assert parse_util_query(block.format(d="99999", a="-5")) == [[0.0, 60.0]]
    assert parse_util_query(block.format(d="N/A", a="12")) == [None]
    assert parse_util_query(block.format(d="nan", a="nan")) == [None]
    assert parse_util_query(block.format(d="0", a="12")) == [None]
    assert parse_util_query("\x1b[2J garbage\n: : :\n") == []
    many = parse_util_query(block.format(d="14", a="5") * 1000)
    assert len(many) == probe.MAX_GPUS


def test_nvml_samples_since_the_last_read_cover_from_it() -> None:
    step = 200_000  # the driver samples about every 200 ms (timestamps in us)
    samples = [(10_000_000 + step * i, 99 if i % 2 else 0) for i in range(71)]
    avg, span, newest = nvml_window(samples, 0)  # type: ignore[misc]
    assert (round(avg, 3), round(span, 3), newest) == (round(35 * 99 / 71, 3), 14.2, 24_000_000)
    # the next read, 10 samples later, follows on from the last one seen
    later = [(newest + step * i, 50) for i in range(1, 11)]
    assert nvml_window(samples + later, newest) == (50.0, 2.0, newest + 10 * step)
    # a read after a long gap: the driver kept only its buffer, the gap is not claimed
    gap = [(newest + 60_000_000 + step * i, 20) for i in range(71)]
    assert nvml_window(gap, newest) == (20.0, 14.2, gap[-1][0])
    assert nvml_window([], 0) is None and nvml_window(samples, newest) is None
    assert nvml_window([(1, 4000)], 0) == (100.0, 0.2, 1)  # clamped, one sample period


def test_what_a_box_claims_is_bounded_clamped_and_counted() -> None:
    window, note = parse_busy([[17, 14], [250, 14], [-3, 5], None], 100.0)
    assert window == BusyWindow(100.0, 5.0, (17 + 100 + 0) / 3) and note is None
    window, note = parse_busy([["17", 14], [True, 1], [float("nan"), 2], [5, 0], [1]], 1.0)
    assert window is None and note == "5 GPU busy figure(s) could not be read"
    window, note = parse_busy([[50, 1e9]] * (MAX_GPUS + 5), 1.0)
    assert window == BusyWindow(1.0, 60.0, 50.0)
    assert note == "5 GPU busy figure(s) could not be read"
    assert parse_busy("lots", 1.0) == (None, None) and parse_busy({"a": 1}, 1.0) == (None, None)


def test_a_hostile_busy_part_costs_the_figure_never_the_answer() -> None:
    answer = {"v": PROBE_VERSION, "time": 5.0, "runs": [],
              "gpus": {"rows": ["0, NVIDIA H200, 0, 1, 2, 3, 4"], "busy": "\x1b]0;owned\x07",
                       "busy_src": "nvml"}}
    state = fold_answer(BoxState(name="b"), answer, 100.0)
    assert state.gpu_busy is None and state.busy == BusyIntegral() and len(state.gpus) == 1
    answer["gpus"]["busy"] = [[12, 14], ["x", 1]]  # type: ignore[index]
    state = fold_answer(state, answer, 110.0)
    assert state.busy.covered_s == 14 and state.gpu_note == "1 GPU busy figure(s) could not be read"


def test_windows_tile_dense_refreshes_and_weigh_sparse_ones_by_their_span() -> None:
    b = BusyIntegral().add(BusyWindow(100.0, 14.0, 50.0))
    assert (b.covered_s, b.busy_s, b.pct) == (14.0, 7.0, 50.0)
    b = b.add(BusyWindow(105.0, 14.0, 10.0))  # only 5 s are new
    assert (b.covered_s, b.busy_s) == (19.0, 7.5)
    assert b.add(BusyWindow(105.0, 14.0, 90.0)) == b  # the same instant again
    assert b.add(BusyWindow(90.0, 14.0, 90.0)) == b  # older than what is covered
    b = b.add(BusyWindow(205.0, 14.0, 0.0))  # a 100 s gap: its own 14 s only
    assert b.covered_s == 33.0
    # idle money = the billed running $ x (1 - busy share of the covered seconds): $7.20
    # billed over 2 h, of which these 33 s (7.5 busy) are the sample
    assert b.idle_usd(7.2) == 7.2 * (1 - 7.5 / 33.0)
    assert BusyIntegral().pct is None and BusyIntegral().idle_usd(3.49) is None
    assert b.idle_usd(None) is None
    assert coverage_words(b.covered_s, 7200.0) == "over 33 s of 2.0 h billed"
    assert coverage_words(600.0, 300.0) == "over 10 min of 10 min billed"  # never less
    assert coverage_words(14.0, None) == "over 14 s"
    assert b.trailing(205.0, 15) is None  # watched for less than 15 min: no verdict
