"""A box its provider stopped when we did not: outbid (Vast's interruptible
instances), preempted (spot), or stopped from the provider's own console. Pure.

The journal holds every stop and start the panel and the CLI sent; a box the
provider reads as stopped while the journal's last power action on it is not a
stop (or there is none) was stopped by someone else. It can be started again
(the GPU may be gone) or destroyed (through the destroy guard, as always).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tui.model.config import BoxConfig
from tui.model.meter import BoxCost
from tui.model.rest import POWER_ACTIONS, power_change

__all__ = ["OFFER", "POWER_ACTIONS", "UNSURE_WORDS", "WORDS", "last_power_action",
           "power_change", "preempted"]

WORDS = "stopped by the provider (outbid / preempted?)"
# A watchdog was armed on it (the journal says so) and the panel did not see it act: its
# own stop is recorded only after the provider confirms it, when the box is usually gone.
UNSURE_WORDS = "stopped by its watchdog or the provider?"
OFFER = "S starts it again (the GPU may be gone), D destroys it (guarded); also in ctrl+p"


def last_power_action(entries: Iterable[Mapping[str, Any]], box: str) -> str | None:
    """The last stop, start or destroy the journal holds for `box` that may have changed
    its power (tui.model.rest.power_change)."""
    last = None
    for entry in entries:
        if entry.get("box") == box:
            last = power_change(entry) or last
    return last


def preempted(box: BoxConfig, cost: BoxCost | None,
              ours: Iterable[Mapping[str, Any]] | str | None) -> bool:
    """The provider reads the box as stopped and no stop of ours explains it. `ours`: the
    journal's entries, or the box's last power action already read from them."""
    if box.provider == "manual" or cost is None or cost.rates.state != "stopped":
        return False
    last = ours if isinstance(ours, str) or ours is None else \
        last_power_action(ours, box.name)
    return last != "stop"
