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


def snapshots(run: str) -> Unpushed:
    return Unpushed(run, f"/root/runs/{run}", ("weights/epoch_10.pt", "weights/epoch_20.pt"),
                    "never pushed: epoch snapshots go with push --epochs", snapshots=True,
                    size=330_000_000)


def keys_text(app: App[None]) -> str:
    return str(app.screen.query_one("#keys", Static).render())


async def test_destroy_dialog_offers_to_push_the_snapshots_or_destroy_without_them() -> None:
    """With only never-pushed epoch snapshots refused, the dialog's ways out were the push
    (p) or the typed override (t), which reads as losing weights: no "without them"."""
    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(DestroyScreen("lab", ["r1 (completed, 4 checkpoint files, 430 MB)"],
                                      [snapshots("r1")]), app.answers.append)
        await pilot.pause()
        text = "\n".join(str(w.render()) for w in app.screen.query(Static))
        assert "2 epoch snapshots (330.0 MB) were never pushed; best.pt, last.pt and the " \
               "history are verified" in text, text
        keys = keys_text(app)
        assert "p: push them too (push --epochs, verify, then destroy)" in keys
        assert "w: destroy without them" in keys and "t: type 'lab'" in keys
        await pilot.press("w")
        await pilot.pause()
        typed = app.screen.query_one("#typed", Input)
        assert typed.has_focus and on_screen(typed)
        await pilot.press(*"lab", "enter")
        await pilot.pause()
    assert app.answers == ["destroy-without-snapshots"]


async def test_destroy_without_snapshots_is_not_offered_past_an_unpushed_best() -> None:
    best = Unpushed("r1", "/root/runs/r1", ("weights/best.pt",),
                    "best.pt changed since the last verified push")
    app = Holder()
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(DestroyScreen("lab", ["r1"], [best, snapshots("r1")]),
                        app.answers.append)
        await pilot.pause()
        assert "w:" not in keys_text(app)
        await pilot.press("w")
        await pilot.pause()
        assert not app.screen.query_one("#typed", Input).display
        await pilot.press("t", *"lab", "enter")
        await pilot.pause()
    assert app.answers == ["destroy"]


class Unfocused(Holder):
    AUTO_FOCUS = None  # as the panel: nothing is focused unless a screen says so


async def test_a_dialogs_long_body_scrolls_from_the_keyboard() -> None:
    """The refusal's reasons sit below the list of what is lost: at 80x24 they are out
    of view until the body scrolls, and down / page down must scroll it."""
    runs = [f"sweep-yolox-n-lr0{i}" for i in range(6)]
    losses = [f"{r} (running, 14 checkpoint files, 165 MB)" for r in runs]
    unpushed = [Unpushed(r, f"/root/runs/{r}", ("weights/best.pt",), "never pushed")
                for r in runs]
    long_text = "\n".join(f"line {i} of what stays billed" for i in range(40))
    for dialog in (DestroyScreen("vast-4090x2", losses, unpushed),
                   ConfirmScreen("Stop vast-4090x2?", long_text)):
        app = Unfocused()
        async with app.run_test(size=SIZE) as pilot:
            app.push_screen(dialog, app.answers.append)
            await pilot.pause()
            body = app.screen.query_one("#body", VerticalScroll)
            assert body.max_scroll_y > 0
            await pilot.press("pagedown")
            await pilot.pause()
            assert body.scroll_y > 0, type(dialog).__name__
