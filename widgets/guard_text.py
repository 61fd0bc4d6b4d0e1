"""The on-box watchdog's line under a box's header. Pure Rich Text from the model's values.

`guarded: stops in 3h12m or after 20 min without progress`, or what it did while
the panel was away, or `guard not running`, or, for a box gone silent after a
trigger's condition held, `stopped, most likely by its watchdog (timeout at
15:31)` (decided in tui.model.watchdog_silence); an unreadable state file marks
this line alone. Every word from the box was cleaned and cut in tui.model.watchdog.
"""

from __future__ import annotations

from rich.text import Text

from tui.model.box import BoxState
from tui.model.watchdog_silence import guard_reading

LEVEL_STYLE = {"ok": "green", "warn": "yellow", "acted": "bold yellow", "bad": "bold red"}
LINE_CELLS = 400


def guard_line(box: BoxState, now: float) -> Text | None:
    """The watchdog's line for this box, or None when none was ever seen there."""
    reading = guard_reading(box, now)
    if reading is None:
        return None
    words, level = reading
    if len(words) > LINE_CELLS:
        words = words[:LINE_CELLS - 1] + "…"
    return Text(words, style=LEVEL_STYLE.get(level, ""))
