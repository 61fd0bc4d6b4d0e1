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

WORDS = "stopped by the provider (outbid / preempted?)"
# A watchdog was armed on it (the journal says so) and the panel did not see it act: its
# own stop is recorded only after the provider confirms it, when the box is usually gone.
UNSURE_WORDS = "stopped by its watchdog or the provider?"
OFFER = "S starts it again (the GPU may be gone), D destroys it (guarded); also in ctrl+p"
POWER_ACTIONS = ("stop", "start", "destroy")
# Outcomes that changed nothing: the provider or the box said no (a start answered 409
# because the GPU was rented out), or the panel never sent it.
CHANGED_NOTHING = ("failed", "refused")


def power_change(entry: Mapping[str, Any]) -> str | None:
    """The stop, start or destroy a journal entry records, if it may have changed the box's
    power: done, or unknown (sent, effect not read back: it may still have acted). A failed
    or refused one is not a power change; it must not hide the stop before it."""
    action = entry.get("action")
    if action not in POWER_ACTIONS or entry.get("outcome") in CHANGED_NOTHING:
        return None
    return str(action)


def last_power_action(entries: Iterable[Mapping[str, Any]], box: str) -> str | None:
    """The last stop, start or destroy the journal holds for `box` that may have changed
    its power (tui.model.preemption.power_change)."""
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
