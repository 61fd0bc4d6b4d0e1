"""Keeping the panel's loop free of long garbage-collector pauses (no Textual here).

A box's history is tens of thousands of immutable points that never form cycles,
yet every full collection walks them all: 100-300 ms with the event loop held,
several times while 20 boxes stream 2,000 epochs each. `HistorySettler` takes
what was loaded out of the collector's scans every few thousand points and when
a box's first load ends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

from tui.model.box import BoxState

SETTLE_POINTS = 4000  # history points loaded between two settle_history()


def settle_history() -> None:
    """Take the history loaded so far out of the cyclic garbage collector's scans.

    Cyclic garbage is collected first, so nothing collectable is frozen with the
    history (cheap: what was frozen before is not walked again); freezing itself is a
    list splice. Frozen objects are still freed when their last reference goes."""
    gc.collect()
    gc.freeze()
    if _LIBC is not None:
        # glibc keeps the pages the parse of a history burst freed; give them back.
        _LIBC.malloc_trim(0)


def thaw() -> None:
    """What settle_history() froze goes back to the collector: in one process that runs
    several panels (the tests), a closed panel's objects must be collectable."""
    gc.unfreeze()


def _libc() -> ctypes.CDLL | None:
    """The C library when it is glibc (malloc_trim); None elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def points(state: BoxState) -> int:
    return sum(len(run.history) for run in state.runs)


class HistorySettler:
    """Settles the history every SETTLE_POINTS points loaded, and when a box's first load
    ends (its whole history arrived in one burst)."""

    def __init__(self) -> None:
        self.new_points = 0  # history points loaded since the last settle_history()

    def updated(self, before: BoxState, after: BoxState) -> None:
        self.new_points += max(0, points(after) - points(before))
        if self.new_points >= SETTLE_POINTS or (before.loading and not after.loading):
            settle_history()
            self.new_points = 0
