"""A run's throughput and unit costs: images a second, dollars an epoch, per 1k images.

Pure. The images an epoch goes through are the training images the probe counted in
the run's data set (`RunState.dataset`); the seconds are each epoch's `time` from
metrics.jsonl. The money is what the ledger billed the box while the run trained,
shared evenly with the box's other runs training at the same moment (docs/money.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from tui.model.bill import BoxHistory
from tui.model.runs import RunState, parse_time


@dataclass(frozen=True)
class UnitCost:
    """One run's figures; None where not known, with `note` saying why."""

    images_per_second: float | None
    usd_per_epoch: float | None
    usd_per_1k_images: float | None
    epochs: int            # finished epochs with a time behind the figures
    images: int | None     # training images per epoch
    note: str = ""
    # What the box billed over the run's training span (its share where runs shared the
    # box), and how long that span is: what the run's GPU-busy figure speaks for.
    billed_usd: float | None = None
    billed_s: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"images_per_second": _round(self.images_per_second, 2),
                "usd_per_epoch": _round(self.usd_per_epoch, 6),
                "usd_per_1k_images": _round(self.usd_per_1k_images, 6)}


def unit_usd(value: float) -> str:
    """Dollars per unit with three significant digits under $1 ($0.009, $0.0481,
    $0.0000147: plain decimals, never an exponent), cents above ($2.70): small unit
    costs keep the digits that tell boxes apart."""
    if not math.isfinite(value):
        return f"${value:.3g}"
    if abs(value) >= 0.9995:
        return f"${value:,.2f}"
    return f"${Decimal(f'{value:.3g}'):f}"


def _round(value: float | None, places: int) -> float | None:
    return round(value, places) if value is not None else None


def images_per_second(images: int | None, epoch_seconds: Sequence[float]) -> float | None:
    """Training images x epochs done / training seconds (metrics.jsonl `time`)."""
    total = sum(epoch_seconds)
    if images is None or not epoch_seconds or total <= 0:
        return None
    return images * len(epoch_seconds) / total


def epoch_windows(started: float, ended: float,
                  epoch_seconds: Sequence[float]) -> list[tuple[float, float]]:
    """The wall-clock span of each epoch: [started, ended] cut in proportion to the
    epochs' times, so the time between epochs (validation, saving) is billed to them."""
    total = sum(epoch_seconds)
    if ended <= started or total <= 0:
        return []
    windows, at = [], started
    for each in epoch_seconds:
        end = at + (ended - started) * each / total
        windows.append((at, end))
        at = end
    return windows


def shared_usd(history: BoxHistory, windows: Sequence[tuple[float, float]],
               others: Sequence[tuple[float, float]]) -> float:
    """Dollars the box billed over `windows`, each split evenly with the other runs whose
    span (start, end) covers that window's middle."""
    money = 0.0
    for start, end in windows:
        middle = (start + end) / 2
        sharing = 1 + sum(1 for a, b in others if a <= middle <= b)
        money += history.between(start, end) / sharing
    return money


def run_span(run: RunState, offset: float) -> tuple[float, float] | None:
    """The run's training span on this machine's clock (box clock + `offset`)."""
    if run.status is None:
        return None
    started = parse_time(run.status.get("started_at"))
    ended = parse_time(run.status.get("updated_at"))
    if started is None or ended is None or ended <= started:
        return None
    return started + offset, ended + offset


def unit_costs(run: RunState, history: BoxHistory | None,
               others: Sequence[tuple[float, float]], offset: float) -> UnitCost:
    """The run's throughput and unit costs. `others` are the spans of the box's other
    runs (to share the bill), `offset` this machine's clock minus the box's."""
    times = [p.seconds for p in run.history if p.seconds is not None and p.seconds > 0]
    data = run.dataset
    images = data.images if data is not None else None
    rate = images_per_second(images, times)
    notes = []
    if data is None:
        notes.append("images per epoch unknown: no train_config.yaml read yet")
    elif images is None:
        notes.append(f"images per epoch unknown: {data.unknown}")
    span = run_span(run, offset)
    per_epoch = billed = None
    if history is not None and span is not None:
        windows = epoch_windows(span[0], span[1], times) or [span]
        billed = shared_usd(history, windows, others)
    if not times:
        notes.append("no finished epoch yet")
    elif billed is None:
        notes.append("no billing over this run's time")
    else:
        per_epoch = billed / len(times)
    per_1k = per_epoch / images * 1000 if per_epoch is not None and images else None
    return UnitCost(rate, per_epoch, per_1k, len(times), images, "; ".join(notes), billed,
                    span[1] - span[0] if span is not None and billed is not None else None)


def unit_words(unit: UnitCost | None) -> str | None:
    """`31.4 img/s · $0.0123/epoch · $0.0456/1k img` (or `$/epoch only: why`): one short
    line for a run's row, the detail and the status table. None when nothing is known."""
    if unit is None:
        return None
    parts = []
    if unit.images_per_second is not None:
        parts.append(f"{unit.images_per_second:.1f} img/s")
    if unit.usd_per_epoch is not None:
        parts.append(f"{unit_usd(unit.usd_per_epoch)}/epoch")
    if unit.usd_per_1k_images is not None:
        parts.append(f"{unit_usd(unit.usd_per_1k_images)}/1k img")
    elif unit.usd_per_epoch is not None and unit.images is None:
        parts.append("images unknown")
    return " · ".join(parts) or None
