"""The `?` panel: every key of the screen, readable whole from the keyboard.

Textual's own help panel cannot take focus, so on a short terminal its list
was cut and no key scrolled it (the panel is used over SSH with no mouse).
This one takes focus while shown (the scroll keys then scroll it; `?` and
Escape close it and give the focus back) and lists what the keys do on the
screen, not what they do to the panel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import HelpPanel, Static

# The keys that scroll the panel while it has the focus (the screen's own meaning of
# them comes back when it closes).
SCROLL_KEYS: dict[str, Callable[[VerticalScroll], object]] = {
    "down": lambda w: w.scroll_relative(y=1, animate=False),
    "up": lambda w: w.scroll_relative(y=-1, animate=False),
    "pagedown": lambda w: w.scroll_page_down(animate=False),
    "pageup": lambda w: w.scroll_page_up(animate=False),
    "end": lambda w: w.scroll_end(animate=False),
    "home": lambda w: w.scroll_home(animate=False),
}
SCROLL_KEYS.update(j=SCROLL_KEYS["down"], k=SCROLL_KEYS["up"])
HINT = "↑↓ j k pgup pgdn: scroll\n? esc: close"


def key_rows(bindings: Iterable[ActiveBinding], display: Callable[[Binding], str]
             ) -> list[list[tuple[str, str, str]]]:
    """(keys, words, tooltip) rows, one list per namespace (the focused widget's, the
    screen's, then the app's): an action's keys on one row, in the words of the panel's
    own binding of it (one with an id) over Textual's; system bindings left out, as
    Textual's help does."""
    groups: dict[int, dict[str, list[Binding]]] = {}
    for item in sorted(bindings, key=lambda i: isinstance(i.node, App)):  # the app's last
        if not item.binding.system:
            groups.setdefault(id(item.node), {}).setdefault(item.binding.action, []
                                                            ).append(item.binding)
    sections = []
    for actions in groups.values():
        rows = []
        for shown in actions.values():
            said = next((b for b in shown if b.id), shown[0])
            keys = " ".join(dict.fromkeys(display(b) for b in shown))
            rows.append((keys, said.description, said.tooltip))
        sections.append(rows)
    return sections


class KeyList(VerticalScroll, can_focus=True, inherit_bindings=False):
    """The list itself: no bindings of its own, so the screen's keys read as they are."""

    DEFAULT_CSS = """
    KeyList { height: 1fr; width: 1fr; padding: 0; }
    KeyList:focus { background-tint: transparent; }
    KeyList > Static { width: 1fr; height: auto; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keys-panel--key", "keys-panel--hint"}

    def on_key(self, event: events.Key) -> None:
        """Scroll keys scroll the list and `escape` closes it; no screen binding sees
        them. Every other key acts on the screen as usual (`?` closes through the app)."""
        if event.key == "escape":
            panel = self.parent
            if isinstance(panel, KeysPanel):
                panel.close()
        elif event.key in SCROLL_KEYS:
            SCROLL_KEYS[event.key](self)
        else:
            return
        event.stop()
        event.prevent_default()


class KeysPanel(HelpPanel):
    """A HelpPanel (Textual's palette command "Keys" finds it) that can be read whole."""

    DEFAULT_CSS = """
    KeysPanel KeyList > .keys-panel--key { color: $text-accent; text-style: bold; }
    KeysPanel KeyList > .keys-panel--hint { color: $text-muted; }
    """

    def __init__(self, bindings: Iterable[ActiveBinding], owner: Widget | None) -> None:
        super().__init__()
        self._at_open = {b.binding.key: b for b in bindings}  # what the keys did at `?`
        self._back_to = owner  # focused at `?`: the focus goes back to it

    def compose(self) -> ComposeResult:
        with KeyList():
            yield Static(id="keys-table")

    def on_mount(self) -> None:  # HelpPanel's own on_mount runs too (Textual calls each)
        self.screen.bindings_updated_signal.subscribe(self, lambda _: self._draw())
        self._draw()
        self.query_one(KeyList).focus(scroll_visible=False)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _shown(self) -> list[ActiveBinding]:
        """The focused widget's keys as they were at `?`, then the screen's and the app's
        as they are now (they follow the cursor's row)."""
        screen, app = self.screen, self.app
        own: dict[str, ActiveBinding] = {k: b for k, b in self._at_open.items()
                                         if b.node is not screen and b.node is not app}
        now = screen.active_bindings
        return [*own.values(), *(b for k, b in now.items() if k not in own)]

    def _draw(self) -> None:
        if not self.is_attached:
            return
        keys = self.query_one(KeyList)
        key_style = keys.get_component_rich_style("keys-panel--key")
        hint_style = keys.get_component_rich_style("keys-panel--hint")
        bindings = self._shown()
        table = Table(show_header=False, box=None, padding=(0, 1, 0, 0), pad_edge=False,
                      expand=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(ratio=1)
        for rows in key_rows(bindings, self.app.get_key_display):
            table.add_row()  # a blank line between the widget's, the screen's, the app's
            for keys_text, words, more in rows:
                said = Text(words)
                if more:
                    said.append(f" {more}", "dim")
                table.add_row(Text(keys_text, style=key_style), said)
        self.query_one("#keys-table", Static).update(Group(Text(HINT, style=hint_style),
                                                           table))

    def close(self) -> None:
        """Gone, and the focus back where `?` found it (nothing, on the fleet screen)."""
        owner = self._back_to
        back = owner if owner is not None and owner.is_attached \
            and owner.screen is self.screen else None
        self.screen.set_focus(back, scroll_visible=False)
        self.remove()
