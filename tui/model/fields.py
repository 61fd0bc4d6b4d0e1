"""Typed readers for the fields of untrusted documents: a box's JSON answer, a run's
status.json, a provider's API answer. Pure.

Why one place: every reader of a stranger's document must turn what it finds into
the type the panel uses or into None, never raise, and agree with every other reader
on what counts (a boolean is no number, NaN is no value, 1e300 epochs are no count).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_WHOLE = 1e12  # a count, pid, size or offset past this is garbage, not a value


def finite(value: object, *, from_text: bool = False) -> float | None:
    """A finite float, or None for null, NaN, infinities, booleans and non-numbers.
    `from_text`: a number written as a string counts too (some APIs quote prices)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, str) and not from_text:
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError):
        return None
    return number if math.isfinite(number) else None


def whole(value: object, *, from_text: bool = False) -> int | None:
    """An integer field (epoch counts, pids, sizes): None unless a sane whole number."""
    number = finite(value, from_text=from_text)
    if number is None or number != int(number) or abs(number) > MAX_WHOLE:
        return None
    return int(number)


def text(value: object) -> str | None:
    """A string field as it is (clean it before it reaches a terminal), else None."""
    return value if isinstance(value, str) else None


def table(value: object) -> Mapping[str, Any]:
    """An object field, or an empty one."""
    return value if isinstance(value, Mapping) else {}


def items(value: object) -> list[Any]:
    """An array field, or an empty one."""
    return value if isinstance(value, list) else []


def nonempty(value: object) -> str | None:
    """A string field that says something (an API's label, a GPU's name), else None."""
    return value if isinstance(value, str) and value else None
