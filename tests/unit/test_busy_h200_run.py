"""The busy integral replayed over the whole recorded yolox-n run on the H200.

`yolox-n-run-smi-1hz.json` is nvidia-smi read every second over a real LibreYOLO run
rented at $3.49/hr (tests/data/nvidia-smi-h200/README.md). The driver keeps a sample
every 200 ms for 14 s; here each second's reading stands for the five samples that
second held. The probe's own NVML reader (`nvml_window`) reads that buffer at each
refresh and the client's integral (`BusyIntegral`) folds what it read, so this is
the figure the panel would have given on that card: the recording's own mean where
refreshes tile the run, and only the seconds read (never a guess for the gaps) where
they are sparse. One `utilization.gpu` read per refresh, which the panel showed
before, swings between 0 % and 28 % over the same run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.model.busy import BusyIntegral, BusyWindow, idle_usd
from tui.onbox.probe import nvml_window

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi-h200"
RATE_USD_PER_HOUR = 3.49
TICK_US = 200_000  # the driver's sample period
BUFFER = 71  # samples the driver keeps (14 s)
# the run's training stretch in the recording's seconds: the first status round that
# saw it training (epoch 0) to the one that saw it completed
RUN_START_S, RUN_END_S = 60.0, 191.3


def _readings() -> list[tuple[float, str]]:
    """[seconds, "util %, mem MiB, temp C, power W"], once a second."""
    return [(float(t), str(text)) for t, text in
            json.loads((FIXTURES / "yolox-n-run-smi-1hz.json").read_text())]


def _driver_samples() -> list[tuple[int, int]]:
    """(timestamp us, busy %) every 200 ms: each second's reading held over the second
    before it."""
    series = [(round(t * 1e6), int(text.split(",")[0])) for t, text in _readings()]
    samples: list[tuple[int, int]] = []
    tick = (series[0][0] // TICK_US + 1) * TICK_US
    index = 0
    while tick <= series[-1][0]:
        while series[index][0] < tick:
            index += 1
        samples.append((tick, series[index][1]))
        tick += TICK_US
    return samples


def _replay(samples: list[tuple[int, int]], every_s: float,
            watched_from: float = RUN_START_S) -> BusyIntegral:
    """The run's integral kept by a panel refreshing every `every_s` seconds from
    `watched_from`: a read folds into the run once the run is training (from
    RUN_START_S), as `fold_answer` adds a box's window to its running runs."""
    integral = BusyIntegral()
    seen = 0
    now = watched_from
    while now <= RUN_END_S:
        now_us = round(now * 1e6)
        buffer = [s for s in samples if s[0] <= now_us][-BUFFER:]
        read = nvml_window(buffer, seen)
        if read is not None:
            pct, span, seen = read
            if now >= RUN_START_S:
                integral = integral.add(BusyWindow(at=seen / 1e6, span=span, pct=pct))
        now += every_s
    return integral


def _mean(samples: list[tuple[int, int]], start_us: float, end_us: float) -> float:
    inside = [value for at, value in samples if start_us < at <= end_us]
    return sum(inside) / len(inside)


def test_refreshes_within_the_drivers_buffer_give_the_recordings_own_mean() -> None:
    samples = _driver_samples()
    # a panel already watching the box: each read follows on from the one before, so
    # the run's covered time is one unbroken stretch from the read before its first
    integral = _replay(samples, every_s=5.0, watched_from=RUN_START_S - 20.0)
    assert integral.pct is not None and integral.last_at is not None
    start = RUN_START_S - 5.0
    assert integral.covered_s == pytest.approx(integral.last_at - start, abs=0.21)
    truth = _mean(samples, start * 1e6, integral.last_at * 1e6)
    assert integral.pct == pytest.approx(truth, abs=1e-9)
    # and nvidia-smi's own readings over the same seconds, not expanded into samples
    readings = [int(text.split(",")[0]) for t, text in _readings()
                if start < t <= integral.last_at]
    assert integral.pct == pytest.approx(sum(readings) / len(readings), abs=0.25)
    # the figure: the 125 readings while it trained averaged 14.6 %, at most 29 %
    trained = [int(text.split(",")[0]) for t, text in _readings() if 60.0 <= t <= 188.0]
    assert len(trained) == 125 and max(trained) == 29
    assert sum(trained) / 125 == pytest.approx(14.6, abs=0.05)
    billed = RATE_USD_PER_HOUR * (RUN_END_S - RUN_START_S) / 3600
    idle = idle_usd(billed, integral.covered_s, integral.busy_s)
    assert idle == pytest.approx(billed * (1 - truth / 100), rel=1e-9)
    assert idle == pytest.approx(0.108, abs=0.002)  # of $0.127 billed over 131 s


def test_a_panel_opened_at_the_runs_start_also_counts_the_drivers_last_14_s() -> None:
    """The first read reaches 14 s back, to before the run trained (the GPU idle while
    it loaded): those seconds count, at what the driver measured then."""
    samples = _driver_samples()
    integral = _replay(samples, every_s=5.0)
    assert integral.pct is not None and integral.last_at is not None
    start = RUN_START_S - BUFFER * TICK_US / 1e6
    assert integral.covered_s == pytest.approx(integral.last_at - start, abs=0.21)
    assert integral.pct == pytest.approx(_mean(samples, start * 1e6, integral.last_at * 1e6),
                                         abs=1e-9)
    assert integral.pct < _replay(samples, 5.0, RUN_START_S - 20.0).pct  # type: ignore[operator]


def test_sparse_refreshes_cover_only_the_seconds_they_read() -> None:
    samples = _driver_samples()
    integral = _replay(samples, every_s=30.0)
    reads = [RUN_START_S + 30.0 * k for k in range(5)]  # 60, 90, ..., 180 s
    windows = [(t - BUFFER * TICK_US / 1e6, t) for t in reads]
    assert integral.covered_s == pytest.approx(sum(end - start for start, end in windows),
                                               abs=0.01)
    inside = [value for at, value in samples
              if any(start * 1e6 < at <= end * 1e6 for start, end in windows)]
    assert integral.pct == pytest.approx(sum(inside) / len(inside), abs=1e-9)


def test_one_instant_sample_per_refresh_is_no_measure_of_the_run() -> None:
    """What a single `utilization.gpu` read per 5 s refresh showed on that run: from 0 %
    to 28 %, where the integral over the same seconds is one figure."""
    training = [int(text.split(",")[0]) for t, text in _readings()
                if RUN_START_S <= t <= RUN_END_S]
    instants = training[::5]
    assert min(instants) == 0 and max(instants) >= 25
    integral = _replay(_driver_samples(), every_s=5.0)
    assert integral.pct is not None and 10 < integral.pct < 20
