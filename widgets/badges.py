"""Small renderables that read without colour: a symbol and a word carry the meaning."""

from __future__ import annotations

from rich.text import Text

# health or connection state -> (symbol, style)
BADGES: dict[str, tuple[str, str]] = {
    "running": ("▶", "bold green"),
    "completed": ("✔", "bold cyan"),
    "failed": ("✖", "bold red"),
    "stalled": ("‖", "bold yellow"),
    "dead": ("☠", "bold magenta"),
    "unreadable": ("?", "bold yellow"),
    "ok": ("●", "green"),
    "connecting": ("…", "dim"),
    # a box at rest (tui.model.rest): stopped or destroyed on purpose, not a problem
    "stopped": ("■", "bold blue"),
    "destroyed": ("⊘", "dim"),
}
PROBLEM = ("✖", "bold red")


def badge(state: str, width: int = 0) -> Text:
    """`▶ running`, `✖ failed`, ...: the symbol keeps the meaning without colour."""
    symbol, style = BADGES.get(state, PROBLEM)
    word = state.replace("_", " ")
    return Text(f"{symbol} {word}".ljust(width), style=style)


def bar(fraction: float | None, width: int) -> Text:
    """A progress bar in eighth blocks; an unknown fraction draws as dots."""
    if fraction is None:
        return Text("·" * width, style="dim")
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    cells = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return Text(cells.ljust(width, "─")[:width], style="green")
