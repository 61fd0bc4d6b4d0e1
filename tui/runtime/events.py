"""What the runtime tells its front end: frozen values, one per thing that happened.

A sink is a plain callable that gets each event in order; the panel turns them
into its reactives and toasts, `watch` into one log line each (or none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from tui.model.alerts import AlertEvent
from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.model.guard import PushRecord
from tui.model.meter import FleetCost
from tui.model.policy import Notice as CostNotice
from tui.model.serverless_runs import ServerlessState

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class BoxChanged:
    """A box's new snapshot (a watcher's look, or a crashed watcher's failure)."""

    state: BoxState


@dataclass(frozen=True)
class ConfigReloaded:
    """The config file's new content is in force; `changes` says what changed, in words."""

    fleet: FleetConfig
    changes: tuple[str, ...]


@dataclass(frozen=True)
class CostChanged:
    """A new money picture of the whole fleet."""

    cost: FleetCost


@dataclass(frozen=True)
class ActionStarted:
    """An action took the box's lock. `title` names it in full for a log line (a
    milestone push names its run); `what` is the short name the box's line shows."""

    box: str
    what: str
    title: str
    quiet: bool = False  # a screen of its own shows it: nothing on the box's line


@dataclass(frozen=True)
class ActionRefused:
    """An action was asked for while `running` held the box: not sent twice."""

    box: str
    what: str
    running: str


@dataclass(frozen=True)
class ActionProgress:
    """Words about the action in flight on a box."""

    box: str
    text: str


@dataclass(frozen=True)
class ActionCancelling:
    """The user asked to cancel the box's action; it ends at its next await."""

    box: str
    what: str


@dataclass(frozen=True)
class ActionEnded:
    """An action ended and the box is free again: its words, exit code, and for a stop,
    start or destroy its outcome ("unknown": the effect was not seen, not a failure;
    "cancelled": the user cancelled it; "given up": its screen was left)."""

    box: str
    what: str
    title: str
    lines: tuple[str, ...]
    code: int
    outcome: str | None = None
    quiet: bool = False
    alarmed: bool = False  # its failure rang an alarm (PUSH_FAILED) right after this event


@dataclass(frozen=True)
class Alarm:
    """Alarms of one moment: budget and idle notices, and alerts that passed the
    cool-down (already on their way to the webhook and the command)."""

    notices: tuple[CostNotice, ...]
    alerts: tuple[AlertEvent, ...]
    severity: Severity
    bell: bool


@dataclass(frozen=True)
class Notice:
    """Words for the user that belong to no box's line (a storage problem)."""

    text: str
    severity: Severity


@dataclass(frozen=True)
class Crashed:
    """A watcher or the provider poller raised (a bug, never a box's or provider's own
    trouble) and is started again in `delay` seconds; `who` is a box or "providers"."""

    who: str
    error: str  # "RuntimeError: the rates broke"
    delay: float


@dataclass(frozen=True)
class PushesChanged:
    """The journal changed (an action here, the CLI, another panel): each box's last
    verified push per run, read again."""

    pushes: Mapping[str, Mapping[str, PushRecord]]


@dataclass(frozen=True)
class MonitorNote:
    """What a run's LibreYOLO monitor is doing, for its box's line."""

    box: str
    words: str
    style: str


@dataclass(frozen=True)
class ServerlessChanged:
    """A serverless entry's new picture (its app and runs, or why the CLI failed)."""

    state: ServerlessState


class BoxBusy(Exception):
    """The box is running another action (its name is the message): one at a time."""


Event = (BoxChanged | CostChanged | ActionStarted | ActionRefused | ActionProgress
         | ActionCancelling | ActionEnded | Alarm | Notice | Crashed | PushesChanged
         | MonitorNote | ConfigReloaded | ServerlessChanged)
Sink = Callable[[Event], None]
