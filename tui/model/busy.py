"""How busy the GPUs were over the billed time, and what the idle part cost. Pure.

One `utilization.gpu` read per refresh is 0 or 100 at random under a bursty load; the
driver's own average over its last ~14 s (`nvidia-smi -q -d UTILIZATION`, NVML's
samples) is not. Each probe answer carries that average per GPU and the span it
covers (tui/onbox/probe.py); this folds them into an integral over the panel's clock:
a window covers the `span` seconds before it was read, never time an earlier window
already covered, so probes every <=14 s tile the billed time and sparser ones weight
each window by its own span (the gaps are not covered, not guessed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

MAX_GPUS = 64  # GPUs read from one answer; the rest are ignored
MAX_SPAN_SECONDS = 60.0  # the driver keeps ~14 s; a longer span claimed is cut to this
RECENT = 512  # windows kept for the trailing alert (~2 h at one per 14 s)


@dataclass(frozen=True)
class BusyWindow:
    """The box's GPUs' mean busy % over the `span` seconds that ended at `at` (panel clock)."""

    at: float
    span: float
    pct: float


@dataclass(frozen=True)
class BusyIntegral:
    """Busy GPU-seconds over covered seconds, and the last windows (for `gpu_underused`)."""

    covered_s: float = 0.0
    busy_s: float = 0.0
    last_at: float | None = None
    recent: tuple[BusyWindow, ...] = ()

    @property
    def pct(self) -> float | None:
        """Busy % over all covered time; None before any window."""
        return 100.0 * self.busy_s / self.covered_s if self.covered_s > 0 else None

    def add(self, window: BusyWindow) -> BusyIntegral:
        """This integral with `window` folded in (an older or repeated one changes nothing)."""
        start = window.at - window.span
        if self.last_at is not None:
            if window.at <= self.last_at:
                return self
            start = max(start, self.last_at)
        covered = window.at - start
        if covered <= 0:
            return replace(self, last_at=window.at)
        return BusyIntegral(self.covered_s + covered, self.busy_s + covered * window.pct / 100,
                            window.at, (*self.recent, window)[-RECENT:])

    def idle_usd(self, usd_per_hour: float | None) -> float | None:
        """The covered time's unused GPU share at `usd_per_hour`: billed $ x (1 - busy)."""
        if usd_per_hour is None or self.covered_s <= 0:
            return None
        return usd_per_hour * (self.covered_s - self.busy_s) / 3600

    def trailing(self, now: float, minutes: float) -> float | None:
        """Busy % of the windows within the last `minutes`, when they reach back that far
        (a run watched for less than that has no verdict yet), else None."""
        since = now - minutes * 60
        if not self.recent or self.recent[0].at - self.recent[0].span > since:
            return None
        inside = [w for w in self.recent if w.at > since]
        spans = sum(w.span for w in inside)
        return sum(w.span * w.pct for w in inside) / spans if spans > 0 else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_busy(raw: object, now: float) -> tuple[BusyWindow | None, str | None]:
    """The box's window from a probe answer's `gpus.busy` ([[pct, span_s], ...] per GPU):
    their mean busy % over their shortest span. What a hostile box sends is bounded
    (MAX_GPUS), clamped (0..100 %, 0..MAX_SPAN_SECONDS) or skipped and counted."""
    if not isinstance(raw, list):
        return None, None
    pcts: list[float] = []
    spans: list[float] = []
    bad = max(0, len(raw) - MAX_GPUS)
    for item in raw[:MAX_GPUS]:
        if item is None:
            continue  # a GPU the driver had no new samples for
        pair = item if isinstance(item, list) and len(item) == 2 else [None, None]
        pct, span = _number(pair[0]), _number(pair[1])
        if pct is None or span is None or span <= 0:
            bad += 1
            continue
        pcts.append(min(100.0, max(0.0, pct)))
        spans.append(min(MAX_SPAN_SECONDS, span))
    note = f"{bad} GPU busy figure(s) could not be read" if bad else None
    if not pcts:
        return None, note
    return BusyWindow(now, min(spans), sum(pcts) / len(pcts)), note


def busy_fields(integral: BusyIntegral, usd_per_hour: float | None) -> Mapping[str, float | None]:
    """`gpu_busy_pct` and `gpu_idle_usd` as status --json and the screens name them."""
    pct = integral.pct
    idle = integral.idle_usd(usd_per_hour)
    return {"gpu_busy_pct": None if pct is None else round(pct, 1),
            "gpu_idle_usd": None if idle is None else round(idle, 4),
            "gpu_busy_covered_s": round(integral.covered_s, 1)}
