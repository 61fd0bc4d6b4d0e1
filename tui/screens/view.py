"""What a screen may read of the panel: a read-only view, never the app itself.

The app satisfies this protocol; screens cast `self.app` to it, read the fleet's
state through it, watch its reactives, and send what they want done up as
messages (tui/messages.py). So no screen imports tui/app.py, and the app is the
only place that decides what runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from rich.text import Text

from tui.model.box import BoxState
from tui.model.config import FleetConfig
from tui.model.guard import PushRecord
from tui.model.meter import FleetCost
from tui.model.preflight import CheckVerdict
from tui.model.serverless_runs import ServerlessState
from tui.store.journal import Journal


class FleetView(Protocol):
    """The panel's state, read-only (each value is replaced, never changed in place)."""

    @property
    def fleet(self) -> FleetConfig: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def live(self) -> bool: ...

    @property
    def states(self) -> Mapping[str, BoxState]: ...

    @property
    def cost(self) -> FleetCost | None: ...

    @property
    def serverless(self) -> Mapping[str, ServerlessState]: ...

    @property
    def notes(self) -> Mapping[str, Text]: ...

    @property
    def pushes(self) -> Mapping[str, Mapping[str, PushRecord]]: ...

    @property
    def checks(self) -> Mapping[str, CheckVerdict]: ...

    @property
    def busy(self) -> Mapping[str, str]: ...

    @property
    def journal(self) -> Journal: ...

    def stopped_words(self, box: str) -> str | None:
        """Why a box reads stopped though nobody here stopped it (None: it does not)."""

    def stopped_unasked(self) -> frozenset[str]:
        """The boxes stopped by their provider (or unsure who stopped them)."""
