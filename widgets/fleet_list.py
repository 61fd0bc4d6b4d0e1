"""The fleet list: every box and every run as lines of one line-API widget.

Why one widget: a widget per line (16 per box) made every content change
re-arrange the whole tree, and a key press cost ~100 ms of CPU at 20 boxes.
Here a box's new snapshot rebuilds that box's lines only, a key press repaints
the two rows whose highlight moved, and the compositor sees one widget
whatever the size of the fleet (as Textual's own Log and DataTable draw).

The list holds no selection logic of its own: `selected` (a run key, bound to
the fleet screen's cursor) and `filter` (bound to the screen's filter) are
reactives the screen sets; `order` says which runs are shown, top to bottom.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from rich.cells import cell_len
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from rich.style import Style as RichStyle
from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.style import Style as VisualStyle

from widgets.fleet_text import (
    SPARK_BLOCKS,
    SPARK_CELLS,
    BoxLines,
    BoxView,
    Line,
    box_lines,
    matches,
    shown_runs,
)
from widgets.serverless_text import APP_ROW, ServerlessView, app_lines

RunKey = tuple[str, str]  # (box or serverless entry name, run path; "" an app's own row)
View = BoxView | ServerlessView  # a box, or a serverless app (Modal, Beam) beside the boxes


def shown_of(view: View, filter_text: str) -> tuple[tuple[str, ...], bool]:
    """What the filter shows of a box (shown_runs), or of an app: its head row always, and
    the runs the words match (an app is never left out: there are few, and its head is
    where its keys act)."""
    if isinstance(view, ServerlessView):
        return (APP_ROW, *(r.path for r in view.state.runs if matches(r, filter_text))), True
    return shown_runs(view.state, filter_text)


def lines_of(view: View, filter_text: str, now: float) -> BoxLines:
    """A box's lines, or a serverless app's."""
    if isinstance(view, ServerlessView):
        return app_lines(view, filter_text, now)
    return box_lines(view, filter_text, now)


@dataclass
class _Block:
    """One box's lines, and their strips at the width they were last drawn at."""

    view: View
    lines: BoxLines
    due: float = float("inf")  # a staged view is drawn by then
    strips: list[Strip] | None = None
    owners: list[str | None] | None = None  # the run path each strip belongs to
    width: int = 0
    drawn: dict[tuple[object, ...], list[Strip]] = field(default_factory=dict)  # by line
    unfiltered: bool = True  # its lines were made with no filter on
    # Its lines and strips with no filter, kept while a filter is on: clearing the filter
    # (or a jump to a box) at 1,000 boxes puts them back instead of drawing 1,000 boxes.
    stash: tuple[BoxLines, list[Strip] | None, list[str | None] | None, int,
                 dict[tuple[object, ...], list[Strip]]] | None = None


def line_key(line: Line) -> tuple[object, ...]:
    """What a line's strips depend on (Rich Text itself is not hashable)."""
    text = line.text
    return (text.plain, tuple(text.spans), text.style, line.indent, line.spark, line.style,
            line.run)


class FleetList(ScrollView, can_focus=False):
    """Boxes in config order; a run's two lines are highlighted when it is `selected`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fleet-list--cursor", "fleet-list--activity", "fleet-list--muted",
        "fleet-list--spark-low", "fleet-list--spark-high"}
    DEFAULT_CSS = """
    FleetList { height: 1fr; overflow-x: hidden; }
    FleetList > .fleet-list--cursor { background: $accent 25%; }
    FleetList > .fleet-list--activity { color: $accent; text-style: bold; }
    FleetList > .fleet-list--muted { color: $text-muted; }
    FleetList > .fleet-list--spark-low { color: $primary 30%; }
    FleetList > .fleet-list--spark-high { color: $primary; }
    """

    filter: var[str] = var("", init=False)
    selected: var[RunKey | None] = var(None, init=False)

    def __init__(self, views: Iterable[View], now: float, *, id: str | None = "fleet",
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(id=id)
        self._now = now
        self._clock = clock  # what "now" is when a box scrolls into view
        self._ticking = False
        self._blocks: dict[str, _Block] = {
            v.state.name: _Block(v, lines_of(v, "", now)) for v in views}
        self._names = list(self._blocks)
        self._tops: list[int] = []  # first row of each box, in self._names order
        self._index = {name: i for i, name in enumerate(self._names)}
        self._order: list[RunKey] | None = None
        self._styles: dict[str, VisualStyle] = {}
        self._bars: dict[tuple[str, Style], Style] = {}
        self._converted: dict[tuple[RichStyle | None, VisualStyle], RichStyle] = {}
        self._bases: dict[tuple[str | RichStyle, VisualStyle], VisualStyle] = {}
        self._cursor: tuple[tuple[RunKey, int], list[Strip]] | None = None
        self._wrap_width = 80
        self._base: Style | None = None

    # --- what the screen calls -------------------------------------------------------

    def show(self, view: View, now: float) -> None:
        """A box's new picture: its lines are rebuilt, repainted only if they changed. A
        box out of the window that shows the same runs is only marked due: it is drawn as
        it scrolls in (or is read), so 1,000 boxes answering every few seconds cost the
        redraw of a screenful, and the runs' order (the cursor's path) stays exact."""
        name = view.state.name
        block = self._blocks.get(name)
        if block is None:
            return
        block.view = view
        if self._tops and isinstance(view, BoxView) and not self._on_screen(name) \
                and shown_runs(view.state, self.filter) == (block.lines.runs,
                                                            bool(block.lines.lines)):
            block.due = min(block.due, now)
            return
        self._rebuild(name, now)

    def _on_screen(self, name: str) -> bool:
        """Whether any row of the box lies in the scrolled window."""
        at = self._index[name]
        start = self._tops[at]
        end = self._tops[at + 1] if at + 1 < len(self._tops) else self.virtual_size.height
        top = self.scroll_offset.y
        return start < top + max(self.scrollable_content_region.height, self.size.height, 1) \
            and end > top

    def set_boxes(self, views: Iterable[View], now: float) -> None:
        """The boxes the config now lists, in its order (a reloaded config added or
        removed some): a box kept keeps its lines, a new one is drawn, a gone one goes."""
        self._now = now
        blocks = {}
        for view in views:
            block = self._blocks.get(view.state.name)
            if block is None:
                block = _Block(view, lines_of(view, self.filter, now),
                               unfiltered=not self.filter)
            blocks[view.state.name] = block
        if list(blocks) == self._names:
            return
        self._blocks = blocks
        self._names = list(blocks)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._order = None
        self._cursor = None
        if self._tops:
            self._layout()
            self.refresh()

    def stage(self, view: View, by: float) -> None:
        """A box's new picture that may wait until `by` (or the box's next redraw)."""
        block = self._blocks.get(view.state.name)
        if block is not None:
            block.view = view
            block.due = min(block.due, by)

    def view(self, name: str) -> View:
        return self._blocks[name].view

    def views(self) -> list[View]:
        return [b.view for b in self._blocks.values()]

    def tick(self, now: float) -> None:
        """Redraw the boxes in the window whose ages or countdowns read differently by now
        (and only those; a line whose words did not change is not repainted). A box out
        of the window stays due and is redrawn as it scrolls in (or when read): at 1,000
        boxes whose ages turn every second, a tick redraws a screenful, not the fleet."""
        if self._ticking:
            return
        self._ticking = True
        try:
            for name in self._in_window():
                block = self._blocks[name]
                if min(block.lines.due, block.due) <= now:
                    self._rebuild(name, now)
        finally:
            self._ticking = False

    def _in_window(self) -> list[str]:
        """The boxes with a row in the scrolled window (every box before the layout)."""
        if not self._tops:
            return list(self._names)
        top = self.scroll_offset.y
        bottom = top + max(self.scrollable_content_region.height, self.size.height, 1)
        first = max(bisect_right(self._tops, top) - 1, 0)
        return self._names[first:bisect_left(self._tops, bottom)]

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._clock is not None and round(old_value) != round(new_value):
            self.tick(self._clock())  # the boxes scrolled in read as of now

    @property
    def order(self) -> list[RunKey]:
        """The runs shown, top to bottom."""
        if self._order is None:
            self._order = [(name, path) for name, block in self._blocks.items()
                           for path in block.lines.runs]
        return self._order

    def is_visible(self, key: RunKey) -> bool:
        """Whether any row of the run lies inside the scrolled window."""
        rows = self._run_rows(key)
        top = self.scroll_offset.y
        return rows is not None and rows.y < top + self.scrollable_content_region.height \
            and rows.bottom > top

    def fits_on_top(self, key: RunKey) -> bool:
        """Whether the run is seen with the list scrolled to its top (True before the list
        is laid out: nothing is known to be hidden yet)."""
        rows = self._run_rows(key)
        height = self.scrollable_content_region.height
        return rows is None or not height or rows.bottom <= height

    def text(self, name: str | None = None) -> str:
        """The plain words of one box's lines (or the whole list): what a reader sees."""
        if self._clock is not None:  # what a reader sees is as of now, scrolled there
            now = self._clock()
            for each in [name] if name is not None else list(self._blocks):
                block = self._blocks[each]
                if min(block.lines.due, block.due) <= now:
                    self._rebuild(each, now)
        blocks = [self._blocks[name]] if name is not None else self._blocks.values()
        return "\n".join(line.text.plain for b in blocks for line in b.lines.lines)

    # --- reactives ---------------------------------------------------------------------

    def watch_filter(self) -> None:
        """Only the boxes whose shown runs change are rebuilt, then the list is laid out
        once: a keystroke at 1,000 boxes looks at every run's name, and redraws (and lays
        out) only what the new words show or hide."""
        changed = False
        now = self._clock() if self._clock is not None else self._now
        for name, block in self._blocks.items():
            want = shown_of(block.view, self.filter)
            if want == (block.lines.runs, bool(block.lines.lines)):
                continue
            if self.filter and block.unfiltered:
                block.stash = (block.lines, block.strips, block.owners, block.width,
                               block.drawn)
            elif not self.filter and block.stash is not None \
                    and block.stash[0].runs == want[0]:
                # Back as they were; a box that answered since is drawn as it is seen.
                block.lines, block.strips, block.owners, block.width, block.drawn = \
                    block.stash
                block.stash, block.unfiltered = None, True
                block.due = min(block.due, now)
                self._order = None
                if self._cursor is not None and self._cursor[0][0][0] == name:
                    self._cursor = None
                changed = True
                continue
            changed = self._rebuild(name, self._now, force=True, layout=False) or changed
        if changed and self._tops:
            self._layout()
            self.refresh()
            self._show_cursor()
            self.tick(now)  # what the window shows, as of now

    def top_of(self, name: str) -> int | None:
        """The row the box's head line is on (None before the list is laid out)."""
        if name not in self._index or not self._tops:
            return None
        return self._tops[self._index[name]]

    def scroll_to_box(self, name: str) -> None:
        """The box's head line at the top of the window (a jump to a box with no run)."""
        top = self.top_of(name)
        if top is not None:
            self.scroll_to(y=top, animate=False, immediate=True)

    def show_cursor(self) -> None:
        """Scroll the selected run (and its box's head) into view, as a cursor move does."""
        if self._tops:
            self._show_cursor()

    def watch_selected(self, old: RunKey | None, new: RunKey | None) -> None:
        self._cursor = None
        if not self._tops:
            return
        for key in (old, new):
            rows = self._run_rows(key)
            if rows is not None:
                self.refresh_lines(rows.y, rows.height)
        self._show_cursor()

    def _show_cursor(self) -> None:
        """Scroll the selected run into view with its box's header above it (when both fit
        in the window): a run seen without the header says nothing of which box it is on."""
        rows = self._run_rows(self.selected)
        if rows is None or self.selected is None:
            return
        top = self._tops[self._index[self.selected[0]]]
        whole = Region(0, top, rows.width, rows.bottom - top)
        fits = whole.height <= self.scrollable_content_region.height
        self.scroll_to_region(whole if fits else rows, animate=False, immediate=True,
                              x_axis=False)

    # --- lines -------------------------------------------------------------------------

    def _rebuild(self, name: str, now: float, *, force: bool = False,
                 layout: bool = True) -> bool:
        """A box's lines made again; whether they changed. `layout=False`: the caller lays
        the list out once after rebuilding many boxes."""
        self._now = now
        block = self._blocks[name]
        block.due = float("inf")
        block.unfiltered = not self.filter
        if block.unfiltered:
            block.stash = None
        lines = lines_of(block.view, self.filter, now)
        if not force and lines.lines == block.lines.lines:
            block.lines = lines  # the same words; only the due time moved
            return False
        old_height = len(block.strips) if block.strips is not None else None
        if lines.runs != block.lines.runs:
            self._order = None
        block.lines = lines
        block.strips = None
        if self._cursor is not None and self._cursor[0][0][0] == name:
            self._cursor = None
        if not self._tops or not layout:
            return True  # not laid out yet (on_mount does it), or the caller lays it out
        top = self._tops[self._index[name]]
        if old_height != len(self._strips(name)[0]):
            self._layout()
            self.refresh()
            self._show_cursor()  # runs came or went (a destroy): the cursor stays in view
        else:
            self.refresh_lines(top, old_height)
        return True

    def on_mount(self) -> None:
        self._layout()

    def on_resize(self) -> None:
        self._layout()
        self.refresh()

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._base = None
        self._bars.clear()
        self._converted.clear()
        self._bases.clear()
        self._cursor = None
        for block in self._blocks.values():
            block.strips = None
            block.drawn = {}
            if block.stash is not None:  # its strips were drawn in the old colours
                block.stash = (block.stash[0], None, None, 0, {})
        super().notify_style_update()
        if self._tops:
            self._layout()

    def _width(self) -> int:
        """The width lines wrap at (set by the last layout)."""
        return self._wrap_width

    def _layout(self) -> None:
        """Where each box starts, at the width the lines wrap at: the list's, less the
        scrollbar when the lines overflow (so wrapping never hides under the bar)."""
        full = max(self.size.width, 20)
        narrow = max(full - self.styles.scrollbar_size_vertical, 20)
        # Try the width of the last layout first: its strips are cached, and the scrollbar
        # comes or goes rarely (only then are the lines wrapped again at the other width).
        first = self._wrap_width if self._wrap_width in (full, narrow) else full
        # More lines than rows overflow at any width (wrapping only adds rows): start at the
        # narrow width then, or a filter cleared at 1,000 boxes would first wrap every box
        # at the full width it had while the few shown boxes fitted.
        if sum(len(self._blocks[name].lines.lines) for name in self._names) > self.size.height:
            first = narrow
        for width in (first, narrow if first == full else full):
            self._wrap_width = width
            y = 0
            tops = []
            for name in self._names:
                tops.append(y)
                y += len(self._strips(name)[0])
            if (y > self.size.height) == (width == narrow) or full == narrow:
                break
        self._tops = tops
        self._base = None
        self.virtual_size = Size(0, y)  # lines wrap at the width: nothing to scroll across
        # The scrollbar follows the new height now, not at the next layout: until then the
        # list may not scroll (a filter cleared, then the cursor shown far down).
        self._refresh_scrollbars()

    def _style(self, part: str) -> VisualStyle:
        """The list's style with one of its components (cached until the CSS changes)."""
        style = self._styles.get(part)
        if style is None:
            style = self._styles[part] = self.get_visual_style(f"fleet-list--{part}") \
                if part else self.visual_style
        return style

    def _bar_style(self, bar: str, base: Style) -> Style:
        """A sparkline bar's colour, from the low colour to the high one by its height
        (as Textual's Sparkline blends them), over the line's background."""
        key = (bar, base)
        style = self._bars.get(key)
        if style is None:
            low = self.get_component_rich_style("fleet-list--spark-low").color
            high = self.get_component_rich_style("fleet-list--spark-high").color
            ratio = SPARK_BLOCKS.index(bar) / (len(SPARK_BLOCKS) - 1)
            color = high
            if low is not None and high is not None and low.triplet and high.triplet:
                color = Color.from_rgb(*(a + (b - a) * ratio for a, b in zip(
                    low.triplet, high.triplet, strict=True)))
            style = self._bars[key] = base + Style(color=color)
        return style

    def _strips(self, name: str) -> tuple[list[Strip], list[str | None]]:
        block = self._blocks[name]
        width = self._width()
        if block.strips is None or block.owners is None or block.width != width:
            # A refresh changes a line or two of a box: the others keep their strips.
            before = block.drawn if block.width == width else {}
            drawn: dict[tuple[object, ...], list[Strip]] = {}
            strips: list[Strip] = []
            owners: list[str | None] = []
            for line in block.lines.lines:
                key = line_key(line)
                rendered = before.get(key) or drawn.get(key)
                if rendered is None:
                    rendered = self._line_strips(line, width, self._style(line.style))
                drawn[key] = rendered
                strips.extend(rendered)
                owners.extend([line.run] * len(rendered))
            block.strips, block.owners, block.width, block.drawn = strips, owners, width, drawn
        return block.strips, block.owners

    def _cursor_strips(self, key: RunKey) -> list[Strip]:
        """The selected run's lines drawn over the cursor's background (kept until the
        cursor moves or its box is redrawn)."""
        width = self._width()
        if self._cursor is None or self._cursor[0] != (key, width):
            style = self._style("cursor")
            block = self._blocks[key[0]]
            strips = [strip for line in block.lines.lines if line.run == key[1]
                      for strip in self._line_strips(line, width, style)]
            self._cursor = ((key, width), strips)
        return self._cursor[1]

    def _line_strips(self, line: Line, width: int, style: VisualStyle) -> list[Strip]:
        """A line in the theme's colours (as Static would draw it), word-wrapped, then laid
        out: indented, or with the sparkline at the right edge."""
        base = style.rich_style
        if line.spark is not None:
            room = width - SPARK_CELLS - 1
            main = self._segments(line.text, style) if room > 0 else []
            spark = [Segment(" ", base),
                     *(Segment(bar, self._bar_style(bar, base)) for bar in line.spark)]
            return [Strip([*Strip(main).crop_extend(0, max(room, 0), base), *spark])
                    .crop_extend(0, width, base)]
        if not line.text.plain:
            return [Strip.blank(width, base)]
        room = max(width - line.indent, 1)
        pad = [Segment(" " * line.indent, base)] if line.indent else []
        parts = [line.text] if cell_len(line.text.plain) <= room else \
            list(line.text.wrap(self.app.console, room))
        for part in parts[:-1]:
            part.rstrip()  # a wrapped line ends where its last word does
        return [Strip([*pad, *self._segments(part, style)]).crop_extend(0, width, base)
                for part in parts]

    def _segments(self, text: Text, style: VisualStyle) -> list[Segment]:
        """One line of Rich text as segments in the theme's colours over `style`: what
        Textual's Content does for a Static (the text's own style read as CSS, its spans'
        colours through the terminal theme), without its per-line overhead."""
        console = self.app.console
        if text.style:
            key = (text.style, style)
            base = self._bases.get(key)
            if base is None:
                own = text.style if isinstance(text.style, str) else str(text.style)
                base = self._bases[key] = style + VisualStyle.parse(own)
            text = text.copy()
            text.style = ""
        else:
            base = style
        out = []
        for segment in text.render(console, end=""):
            key2 = (segment.style, base)
            final = self._converted.get(key2)
            if final is None:
                final = (base + VisualStyle.from_rich_style(segment.style or RichStyle(),
                                                            self.app.ansi_theme)).rich_style
                self._converted[key2] = final
            out.append(Segment(segment.text, final))
        return out

    def _run_rows(self, key: RunKey | None) -> Region | None:
        """The rows of a run's lines, in list coordinates."""
        if key is None or key[0] not in self._index or not self._tops:
            return None
        name, path = key
        _, owners = self._strips(name)
        rows = [i for i, owner in enumerate(owners) if owner == path]
        if not rows:
            return None
        top = self._tops[self._index[name]]
        return Region(0, top + rows[0], self._width(), rows[-1] - rows[0] + 1)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self._wrap_width
        row = scroll_y + y
        base = self._base
        if base is None:
            base = self._base = self.rich_style
        at = bisect_right(self._tops, row) - 1
        if at >= 0:
            name = self._names[at]
            strips, owners = self._strips(name)
            offset = row - self._tops[at]
            if offset < len(strips):
                strip = strips[offset]
                selected = self.selected
                if selected is not None and selected == (name, owners[offset]):
                    strip = self._cursor_strips(selected)[offset - owners.index(selected[1])]
                return strip.crop_extend(scroll_x, scroll_x + width, base)
        return Strip.blank(width, base)
