"""The fleet's filter line: an Input that remembers which keys it was sent."""

from __future__ import annotations

from typing import Any
from weakref import WeakSet

from textual import events
from textual.widgets import Input


class FilterField(Input):
    """The filter line; it notes the keys it was sent, so the screen can tell them from
    keys sent to the screen before the field had focus (see `FleetScreen.on_key`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: WeakSet[events.Key] = WeakSet()

    async def _on_key(self, event: events.Key) -> None:
        self.seen.add(event)
        await super()._on_key(event)
