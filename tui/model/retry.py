"""When to try a box again after a failed refresh: exponential backoff with jitter."""

from __future__ import annotations

BACKOFF_BASE_SECONDS = 2.0
BACKOFF_CAP_SECONDS = 300.0


def backoff_delay(failures: int, jitter: float, *, base: float = BACKOFF_BASE_SECONDS,
                  cap: float = BACKOFF_CAP_SECONDS) -> float:
    """Seconds to wait after `failures` failures in a row; `jitter` is a draw in [0, 1).

    Doubles from `base` up to `cap`, then keeps a random half of it ("equal
    jitter"), so boxes that failed together (a jump host went down) do not all
    come back at the same instant.
    """
    if failures <= 0:
        return 0.0
    delay = min(cap, base * 2.0 ** min(failures - 1, 32))
    return delay / 2 + delay / 2 * min(max(jitter, 0.0), 1.0)
