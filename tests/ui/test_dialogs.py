"""Dialogs fit the screen: a long list scrolls, the keys and the name field stay in view."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Input, Static

from tui.model.guard import Unpushed
from tui.screens.confirm import ConfirmScreen, DestroyScreen

SIZE = (80, 24)


class Holder(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[object] = []

    def compose(self) -> ComposeResult:
        yield Static("fleet")


def on_screen(widget: Static | Input) -> bool:
    region = widget.region
    return region.height > 0 and region.y >= 0 and region.bottom <= SIZE[1] \
        and region.right <= SIZE[0]


async def test_destroy_dialog_of_a_box_with_six_runs_fits_80x24() -> None:
    runs = [f"sweep-yolox-n-lr0{i}" for i in range(6)]
    losses = [f"{r} (running, 14 checkpoint files, 165 MB)" for r in runs]
    unpushed = [Unpushed(r, f"/root/runs/{r}", ("weights/best.pt", "weights/last.pt"),
                         "never pushed") for r in runs]
    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(DestroyScreen("vast-4090x2", losses, unpushed), app.answers.append)
        await pilot.pause()
        screen = app.screen
        body = screen.query_one("#body", VerticalScroll)
        keys = screen.query_one("#keys", Static)
        assert on_screen(keys) and "t: type 'vast-4090x2'" in str(keys.render())
        assert body.max_scroll_y > 0  # the list is longer than the room: it scrolls
        await pilot.press("t")
        await pilot.pause()
        typed = screen.query_one("#typed", Input)
        assert typed.has_focus and on_screen(typed) and on_screen(keys)
        await pilot.press(*"vast-4090x2", "enter")
        await pilot.pause()
    assert app.answers == ["destroy"]


async def test_destroy_dialog_without_unpushed_weights_shows_its_field_at_once() -> None:
    losses = [f"run-{i} (completed, 3 checkpoint files, 11 MB)" for i in range(30)]
    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(DestroyScreen("lab", losses, []), app.answers.append)
        await pilot.pause()
        typed = app.screen.query_one("#typed", Input)
        assert typed.has_focus and on_screen(typed)
        assert on_screen(app.screen.query_one("#keys", Static))


async def test_a_long_confirmation_keeps_its_keys_in_view() -> None:
    body = "\n".join(f"line {i} of what stays billed" for i in range(40))
    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(ConfirmScreen("Stop vast-4090x2?", body), app.answers.append)
        await pilot.pause()
        assert on_screen(app.screen.query_one("#keys", Static))
        await pilot.press("y")
        await pilot.pause()
    assert app.answers == [True]
