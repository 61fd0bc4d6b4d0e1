"""Typed readers for the fields of untrusted documents: a box's JSON answer, a run's
status.json, a provider's API answer. Pure.

Why one place: every reader of a stranger's document must turn what it finds into
the type the panel uses or into None, never raise, and agree with every other reader
on what counts (a boolean is no number, NaN is no value, 1e300 epochs are no count).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

MAX_WHOLE = 1e12  # a count, pid, size or offset past this is garbage, not a value
MAX_COUNT = (1 << 64) - 1  # a byte count, inode or nanosecond mtime a box may claim, at most
MAX_SECONDS = 1e9  # a duration a run reports (an epoch, an ETA): 31 years at most
MAX_DIGITS = 9    # a number a box writes in text (an epoch, a GPU index) has at most this
# A checkpoint's epoch, as tui/onbox/push.py picks epoch files (ASCII digits, at most nine):
# `epoch_<5000 digits>.pt` is an odd file, never an int() past Python's 4300-digit limit.
EPOCH_NAME = re.compile(rf"epoch_([0-9]{{1,{MAX_DIGITS}}})\.pt")
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


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


def seconds(value: object) -> float | None:
    """A duration a box reports (an epoch's time, an ETA): 0 to MAX_SECONDS, else None.
    Sums and products of these stay finite, so no ETA, cost or JSON field is inf."""
    number = finite(value)
    return number if number is not None and 0 <= number <= MAX_SECONDS else None


def size(value: object) -> int | None:
    """A byte count (a disk, a file): a whole number from 0 to MAX_COUNT, kept exact; a
    count's 1e12 bound would read a 4 TB disk as nothing."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= MAX_COUNT else None
    number = finite(value)
    if number is None or number != int(number) or not 0 <= number <= MAX_COUNT:
        return None
    return int(number)


def digits(value: str) -> int | None:
    """A whole number a box wrote as text (`7`, `007`), else None: ASCII digits only, at
    most MAX_DIGITS of them, so no text a box sends reaches int() unbounded."""
    return int(value) if _DIGITS.fullmatch(value) else None


def epoch_of(name: str) -> int | None:
    """N of a checkpoint named `epoch_<N>.pt`, else None (another file, or an odd one)."""
    match = EPOCH_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def brief(value: object, limit: int = 40) -> str:
    """A box's value named in words (`got 'paused'`): short, and a number past the digit
    limit by its size, so naming a bad value never raises or floods a line."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"
    shown = repr(value) if isinstance(value, str | int | float | bool | None) \
        else f"a {type(value).__name__}"
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


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
