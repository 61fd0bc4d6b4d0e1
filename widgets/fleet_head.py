"""The strip at the top of the fleet screen: boxes up, runs by health, the fleet's burn."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import var
from textual.widget import Widget

from tui.model.box import BoxState
from tui.model.meter import FleetCost
from tui.model.serverless_runs import ServerlessState
from widgets.fleet_text import fleet_line


class FleetHead(Widget):
    """Drawn from its reactives; wraps (and grows) at narrow widths."""

    DEFAULT_CSS = """
    FleetHead { height: auto; background: $panel; }
    """

    boxes: var[tuple[BoxState, ...]] = var((), always_update=True)
    cost: var[FleetCost | None] = var(None, always_update=True)
    # the serverless apps' last polls and their estimated burn (apart from the money)
    apps: var[tuple[tuple[ServerlessState, ...], float | None]] = var(((), None),
                                                                       always_update=True)

    def __init__(self, boxes: tuple[BoxState, ...], cost: FleetCost | None,
                 apps: tuple[tuple[ServerlessState, ...], float | None] = ((), None), *,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.set_reactive(FleetHead.boxes, boxes)
        self.set_reactive(FleetHead.cost, cost)
        self.set_reactive(FleetHead.apps, apps)
        self._text = fleet_line(list(boxes), cost, *apps)

    def render(self) -> Text:
        return self._text

    def _changed(self) -> None:
        text = fleet_line(list(self.boxes), self.cost, *self.apps)
        if text != self._text:
            # A relayout re-arranges the whole screen: only when the strip's height changes.
            layout = self._height(text) != self._height(self._text)
            self._text = text
            self.refresh(layout=layout)

    def _height(self, text: Text) -> int:
        width = self.size.width
        return len(text.wrap(self.app.console, width)) if width > 0 else 1

    def watch_boxes(self) -> None:
        self._changed()

    def watch_cost(self) -> None:
        self._changed()

    def watch_apps(self) -> None:
        self._changed()
