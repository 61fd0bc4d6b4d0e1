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

    def idle_usd(self, billed_usd: float | None) -> float | None:
        """The unused GPU share of `billed_usd` (the billed running money the figure
        speaks for): billed $ x (1 - busy), the covered seconds' ratio standing for the
        whole; None without billing or before any window."""
        return idle_usd(billed_usd, self.covered_s, self.busy_s)

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


def idle_usd(billed_usd: float | None, covered_s: float, busy_s: float) -> float | None:
    """billed $ x (1 - busy_s / covered_s): the money paid for GPU time that went unused.
    The covered seconds are the best estimate of the whole billed time, however thin (the
    coverage is said beside it); no coverage, no figure."""
    if billed_usd is None or covered_s <= 0:
        return None
    return max(billed_usd, 0.0) * (1.0 - min(max(busy_s / covered_s, 0.0), 1.0))


def span_words(seconds: float) -> str:
    """`14 s`, `38 min`, `2.0 h`, `3.2 d`: a covered or billed stretch, short."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def coverage_words(covered_s: float, billed_s: float | None) -> str:
    """`over 14 s of 2.0 h billed`: how much of the billed time the busy figure rests on,
    so a thin sample shows as one."""
    if billed_s is None or billed_s <= 0:
        return f"over {span_words(covered_s)}"
    return f"over {span_words(covered_s)} of {span_words(max(billed_s, covered_s))} billed"


def busy_fields(integral: BusyIntegral, billed_usd: float | None
                ) -> Mapping[str, float | None]:
    """`gpu_busy_pct`, `gpu_idle_usd` (of `billed_usd`, the running money billed over the
    time the figure speaks for) and `gpu_busy_covered_s`, as status --json names them."""
    pct = integral.pct
    idle = integral.idle_usd(billed_usd)
    return {"gpu_busy_pct": None if pct is None else round(pct, 1),
            "gpu_idle_usd": None if idle is None else round(idle, 4),
            "gpu_busy_covered_s": round(integral.covered_s, 1)}
