"""At 80x24 the cursor shows what matters: the panel opens on the run that trains (even
when other boxes fill the screen above it), and the cursor's box header stays in view."""

from __future__ import annotations

from dataclasses import replace

from support.panel_states import CONFIG, NOW, fleet_states

from tui.app import GpurentApp
from tui.model.box import BoxState
from tui.model.config import parse_config
from tui.screens.fleet import FleetScreen

# The fleet of the snapshots, with the box whose run trains last in the config.
TRAINING_LAST = CONFIG.replace('[[box]]\nname = "vast-4090"', '[[box]]\nname = "vast-first"')
TRAINING_LAST = TRAINING_LAST[TRAINING_LAST.index('[[box]]\nname = "runpod-a100"'):] \
    + TRAINING_LAST[:TRAINING_LAST.index('[[box]]\nname = "runpod-a100"')].replace(
        "vast-first", "vast-4090")


def long_fleet() -> list[BoxState]:
    """The snapshots' boxes, runpod-a100 with each of its runs twice: taller than 80x24."""
    states = fleet_states()
    runpod = next(s for s in states if s.name == "runpod-a100")
    again = tuple(replace(r, path=r.path + "-2", name=r.name + "-2") for r in runpod.runs)
    return [replace(s, runs=s.runs + again) if s is runpod else s for s in states]


def fleet_screen(app: GpurentApp) -> FleetScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FleetScreen)
    return screen


def header_visible(screen: FleetScreen, box: str) -> bool:
    """Whether the box's first line (its header) lies inside the scrolled window."""
    fleet_list = screen.fleet_list
    top = fleet_list._tops[fleet_list._index[box]]
    return fleet_list.scroll_offset.y <= top < fleet_list.scroll_offset.y \
        + fleet_list.scrollable_content_region.height


async def test_the_panel_opens_on_the_run_that_trains_though_it_is_last() -> None:
    config = parse_config(TRAINING_LAST, "snapshot.toml")
    assert [b.name for b in config.boxes] == ["runpod-a100", "lab-3090", "vast-4090"]
    app = GpurentApp(config, states=fleet_states(), live=False, clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = fleet_screen(app)
        training = ("vast-4090", "/root/runs/yolox-n coco")
        assert screen.fleet_list.order[0] != training  # the top row is another box's
        assert screen.selected == training
        assert screen.fleet_list.is_visible(training)
        assert header_visible(screen, "vast-4090")
        # Once the user moves, the cursor is theirs: a key goes where they said.
        await pilot.press("k")
        assert screen.selected != training


async def test_moving_onto_a_box_shows_its_header() -> None:
    app = GpurentApp(parse_config(CONFIG, "snapshot.toml"), states=long_fleet(),
                     live=False, clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = fleet_screen(app)
        order = screen.fleet_list.order
        assert screen.fleet_list.virtual_size.height > 24
        firsts = {k for i, k in enumerate(order) if i == 0 or order[i - 1][0] != k[0]}
        for key in "j" * len(order) + "k" * len(order):
            await pilot.press(key)
            assert screen.selected is not None and screen.fleet_list.is_visible(screen.selected)
            if screen.selected in firsts:  # a box's first run: its header shows above it
                assert header_visible(screen, screen.selected[0]), (key, screen.selected)


async def test_runs_that_go_away_leave_the_cursors_header_in_view() -> None:
    """A destroy takes a box's runs: the cursor lands on a run whose box header shows."""
    states = long_fleet()
    app = GpurentApp(parse_config(CONFIG, "snapshot.toml"), states=states, live=False,
                     clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = fleet_screen(app)
        order = screen.fleet_list.order
        for _ in order:
            await pilot.press("j")
        assert screen.selected is not None and screen.selected[0] == "lab-3090"
        runpod = next(s for s in states if s.name == "runpod-a100")
        lab = next(s for s in states if s.name == "lab-3090")
        app.runtime.box_updated(replace(lab, runs=()))  # destroyed: its runs are gone
        await pilot.pause()
        await pilot.pause()
        assert screen.selected is not None and screen.selected[0] != "lab-3090"
        assert screen.fleet_list.is_visible(screen.selected)
        assert header_visible(screen, screen.selected[0])
        assert runpod.name in [k[0] for k in screen.fleet_list.order]


async def test_the_footer_keeps_costs_and_keys_clear_of_the_palette_at_80_columns() -> None:
    """Every footer key lies whole left of the command palette's: `c Costs` and `? Keys`
    (the key to all the others) are not drawn over or cut at 80 columns."""
    from textual.widgets import Footer

    app = GpurentApp(parse_config(CONFIG, "fleet.toml"), states=fleet_states(),
                     live=False, clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        keys = {c.description: c.region for c in app.screen.query_one(Footer).children
                if hasattr(c, "description")}
        palette = keys.pop("palette")
        assert {"Costs", "Keys", "Refresh now", "Filter"} <= set(keys), keys
        for name, region in keys.items():
            assert region.right <= palette.x, (name, region, palette)
