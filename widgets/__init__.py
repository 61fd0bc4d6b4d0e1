"""Reusable Textual widgets and renderables that take plain data and never import tui."""

from widgets.badges import badge, bar

__all__ = ["badge", "bar"]
