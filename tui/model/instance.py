"""A rented instance as its provider sees it, in the panel's words, and what can be asked of
it. Pure: the provider adapters (tui.providers) build these; the money (tui.model.cost,
tui.model.meter) and the actions (tui.actions.power) read them.

Why one type: the adapters, the meter and the demo's stills must agree on every field,
so a rate the meter reads is always a rate an adapter wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

InstanceState = Literal["running", "starting", "stopped", "stopping", "destroyed", "error",
                        "unknown"]
STATES: tuple[InstanceState, ...] = get_args(InstanceState)
PowerAction = Literal["stop", "start", "destroy"]
POWER_ACTIONS: tuple[PowerAction, ...] = get_args(PowerAction)
# How an action ended: done (read back), failed (refused by the provider or the box),
# unknown (sent, effect not seen), refused (the panel did not send it).
PowerResult = Literal["done", "failed", "unknown", "refused"]


@dataclass(frozen=True)
class InstanceInfo:
    """One instance as its provider reports it: state, rates, size, GPUs."""

    provider: str
    instance_id: str
    state: InstanceState
    raw_state: str | None = None
    running_usd_per_hr: float | None = None
    disk_usd_per_hr: float | None = None
    disk_gb: float | None = None
    storage_usd_per_gb_month: float | None = None
    hours_per_month: float | None = None
    can_stop: bool = True
    gpu_name: str | None = None
    num_gpus: int | None = None
    started_at: float | None = None
    label: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def gone(provider: str, instance_id: str) -> InstanceInfo:
    """An instance its provider no longer has (HTTP 404 after it was seen): destroyed,
    billing nothing."""
    return InstanceInfo(provider, instance_id, "destroyed")


@dataclass(frozen=True)
class PowerOutcome:
    """How one stop, start or destroy ended, in words a person can act on."""

    action: PowerAction
    box: str
    outcome: PowerResult
    message: str       # what happened on which box, and what is still safe / still billing
    state_before: str | None = None
    state_after: str | None = None
    gpus_before: int | None = None
    gpus_after: int | None = None
    # The instance as last read: its rates bill the new state (tui.providers.meter)
    info_after: InstanceInfo | None = field(default=None, repr=False, compare=False)
