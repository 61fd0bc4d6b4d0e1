"""The panel with 200 boxes: the strip counts boxes by health, `/NAME` enter goes to a box,
and a filter leaves out the boxes it finds nothing on."""

from __future__ import annotations

from support.panel_states import NOW, big_fleet
from support.pilot import until
from textual._xterm_parser import XTermParser
from textual.widgets import Input

from tui.app import GpurentApp
from tui.model.box import BoxState, Connection, fold_failure
from tui.screens.fleet import FleetScreen

BOXES = 200
SIZE = (120, 30)


def app_of(boxes: int = BOXES) -> GpurentApp:
    config, states = big_fleet(boxes)
    return GpurentApp(config, states=states, live=False, clock=lambda: NOW)


def screen_of(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


def head(app: GpurentApp) -> str:
    return str(screen_of(app).query_one("#fleet-head").render())


def boxes_shown(app: GpurentApp) -> list[str]:
    return sorted({box for box, _ in screen_of(app).fleet_list.order})


async def test_the_strip_counts_every_box_by_its_worst_state() -> None:
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # box i is template i % 3: fine, a failed + stalled + dead run, timed out.
        words = " ".join(head(app).split())
        assert "134/200 boxes up" in words
        assert "· 67 ok · 67 need a look · 66 unreachable" in words
        assert "stalled" not in words.split("boxes up")[1].split("▶")[0]  # dead outranks


async def test_slash_name_enter_goes_to_the_box() -> None:
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        everything = len(screen.fleet_list.order)
        await pilot.press("slash", *"BOX150", "enter")  # case aside
        await pilot.pause()
        key = screen.selected
        assert key is not None and key[0] == "box150"
        assert key == next(k for k in screen.fleet_list.order if k[0] == "box150")
        assert screen.fleet_list.is_visible(key)
        assert screen.filter == "" and not screen.query_one("#filter").display
        assert len(screen.fleet_list.order) == everything  # the whole fleet again
        await pilot.press("j")  # and the cursor moves on from there
        assert screen.selected is not None and screen.selected[0] == "box150"
        assert screen.selected != key


async def test_a_jump_typed_in_one_burst_lands_too() -> None:
    """`/box199` + Enter in one write (a paste, a laggy link): the field has no focus yet
    when the keys arrive, and the jump still happens."""
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        parser = XTermParser()
        for event in [*parser.feed("/box199\r"), *parser.feed("")]:
            app.post_message(event)
        await until(pilot, lambda: screen_of(app).selected is not None
                    and screen_of(app).selected[0] == "box199"  # type: ignore[index]
                    and screen_of(app).filter == "")
        screen = screen_of(app)
        assert screen.selected is not None and screen.fleet_list.is_visible(screen.selected)


async def test_a_filter_that_names_no_box_is_kept_and_shows_only_boxes_it_found() -> None:
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        await pilot.press("slash", *"box15", "enter")
        await pilot.pause()
        assert screen.filter == "box15" and screen.query_one("#filter", Input).display
        assert boxes_shown(app) == [f"box{i}" for i in range(150, 160)]
        text = screen.fleet_list.text()
        # the boxes the filter finds nothing on are left out
        assert "box000" not in text and "■ box015" not in text and "■ box151" in text
        await pilot.press("escape")
        await pilot.pause()
        assert len(boxes_shown(app)) == BOXES
        await pilot.press("slash", *"dead", "enter")
        await pilot.pause()
        # one dead run on every third box: only those boxes, each with its hidden count
        assert boxes_shown(app) == [f"box{i:03d}" for i in range(1, BOXES, 3)]
        assert "2 run(s) hidden by the filter" in screen.fleet_list.text("box001")
        assert screen.fleet_list.text("box000") == ""


async def test_a_box_with_no_run_is_scrolled_to() -> None:
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        before = screen.selected
        app.runtime.box_updated(BoxState(name="box120"))  # its runs gone
        await pilot.pause()
        await pilot.press("slash", *"box120", "enter")
        await pilot.pause()
        assert screen.selected == before  # no run there to put the cursor on
        top = screen.fleet_list.top_of("box120")
        assert top is not None and top > 0 and screen.fleet_list.scroll_offset.y == top


async def test_clearing_a_filter_shows_what_boxes_said_while_it_was_on() -> None:
    """Boxes the filter left out are put back as they were when it clears; one that
    answered meanwhile reads as it answered (here: it went down, its runs kept)."""
    app = app_of()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        before = screen.fleet_list.text("box003")
        await pilot.press("slash", *"dead", "enter")
        await pilot.pause()
        assert screen.fleet_list.text("box003") == ""
        down = fold_failure(app.states["box003"], Connection.TIMEOUT,
                            "box box003: no SSH login within 15 s", NOW, retry_at=NOW + 30)
        app.runtime.box_updated(down)
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        after = screen.fleet_list.text("box003")
        assert "no SSH login within 15 s" in after and after != before
        assert screen.fleet_list.text("box006") == before.replace("box003", "box006")
        await pilot.press("slash", *"box003", "enter")
        await pilot.pause()
        key = screen.selected
        assert key is not None and key[0] == "box003" and screen.fleet_list.is_visible(key)
