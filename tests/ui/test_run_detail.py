"""The run detail: what its pid means, its weights in a useful order, scrolled by keys."""

from __future__ import annotations

from typing import Any

from support.panel_states import NOW, _run
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.model.box import BoxState, fold_answer
from tui.model.runs import RunState
from tui.model.unpushed import AtStake
from tui.screens.run_detail import RunDetail, fields_table, weight_order


def run_with(fixture: str, **extra: Any) -> RunState:
    answer = {"v": 1, "time": NOW, "runs": [{**_run("r", fixture), **extra}],
              "gpus": {"absent": True}, "disks": []}
    (run,) = fold_answer(BoxState(name="box"), answer, NOW).runs
    return run


def rendered(run: RunState) -> str:
    from rich.console import Console

    console = Console(width=60, record=True)
    console.print(fields_table(run))
    return console.export_text()


def test_weights_sort_naturally_with_last_and_best_first() -> None:
    names = ["epoch_105.pt", "epoch_10.pt", "best.pt", "epoch_100.pt", "epoch_2.pt",
             "last.pt", "epoch_9.pt"]
    assert sorted(names, key=weight_order) == [
        "last.pt", "best.pt", "epoch_2.pt", "epoch_9.pt", "epoch_10.pt", "epoch_100.pt",
        "epoch_105.pt"]


def test_a_finished_runs_pid_is_history() -> None:
    done = rendered(run_with("yolox_completed", pid_alive=False))
    assert "(while it ran)" in done and "gone" not in done and "alive" not in done
    running = rendered(run_with("yolox_running", pid_alive=True))
    assert "(alive)" in running
    dead = rendered(run_with("yolox_running", pid_alive=False))
    assert "(gone)" in dead


class Holder(App[None]):
    def __init__(self, run: RunState) -> None:
        super().__init__()
        self.run_state = run

    def compose(self) -> ComposeResult:
        yield Static("fleet")

    def on_mount(self) -> None:
        self.push_screen(RunDetail("box", self.run_state))


async def test_a_long_weights_list_scrolls_from_the_keyboard() -> None:
    weights = [["best.pt", 1000, NOW - 300], ["last.pt", 1000, NOW - 20]]
    weights += [[f"epoch_{n}.pt", 1000, NOW - 1000 + n] for n in range(5, 205, 5)]
    app = Holder(run_with("yolox_completed", weights=weights))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        fields = app.screen.query_one("#fields", VerticalScroll)
        assert app.focused is fields and fields.max_scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert fields.scroll_y == fields.max_scroll_y
        await pilot.press("home", "pagedown")
        await pilot.pause()
        assert fields.scroll_y > 0
        await pilot.press("home", "down", "down")
        await pilot.pause()
        assert fields.scroll_y == 2


async def test_the_title_keeps_a_gap_between_health_and_reason() -> None:
    """The title read as "▶ runningepoch 7/30": each styled span of a screen is drawn on
    its own (a screenshot's SVG holds one text element per span, and readers of those
    drop a span's leading blanks), so the gap between two words must end the span before,
    never open the next one."""
    app = Holder(run_with("yolox_running"))
    async with app.run_test(size=(120, 24)) as pilot:
        await pilot.pause()
        title = app.screen.query_one("#title", Static)
        spans = [segment.text for segment in title.render_line(0) if segment.text.strip()]
        words = "".join(span.lstrip() for span in spans)
        run = app.run_state
        assert f"▶ running  {run.reason}" in words, spans


class Stakes(App[None]):
    """Passes the screen what a crash would cost, as the panel does from its own state."""

    def __init__(self, run: RunState, stake: AtStake) -> None:
        super().__init__()
        self.run_state, self.stake = run, stake

    def compose(self) -> ComposeResult:
        yield Static("fleet")

    def on_mount(self) -> None:
        self.push_screen(RunDetail("box", self.run_state, stake=lambda run: self.stake))


def field_text(app: App[None]) -> str:
    table = app.screen.query_one("#field-table", Static)
    return "".join(segment.text for y in range(table.size.height)
                   for segment in table.render_line(y))


async def test_the_unpushed_row_comes_from_what_the_screen_is_given() -> None:
    app = Stakes(run_with("yolox_running"), AtStake(epochs=3, usd=1.25, pushed_at=None))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "3 epochs, $1.25 of GPU time" in field_text(app)


async def test_a_new_run_snapshot_redraws_the_screen() -> None:
    """`run` is reactive: assigning a newer snapshot of the run redraws the title and
    fields, with no separate show() to call."""
    app = Holder(run_with("yolox_running"))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunDetail)
        finished = run_with("yolox_completed")
        screen.run = finished
        await pilot.pause()
        title = "".join(s.text for s in screen.query_one("#title", Static).render_line(0))
        assert "done" in title or "completed" in title, title
        assert "(while it ran)" in field_text(app)
