"""The panel's widgets and Rich text formatters: they draw plain model values.

What a widget may import, so it stays drawable from fixed snapshots and cheap to
test: `tui.model` (pure values and functions), Textual and Rich. No I/O (no SSH,
HTTP, files or subprocesses), and never `tui.app`, `tui.screens`, `tui.actions`,
`tui.remote` or the other layers above the model: a screen hands a widget the
values it draws. tests/unit/test_layers.py enforces it; docs/architecture.md
says why.
"""

from widgets.badges import badge, bar

__all__ = ["badge", "bar"]
