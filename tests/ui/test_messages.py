"""The panel's messages coalesce in Textual's own queue: a flood of one box's snapshots is
handled as its newest, progress words as the latest, and an action's end is never dropped."""

from __future__ import annotations

from textual.app import App

from tui.messages import ActionEnded, ActionProgress, BoxUpdated, CostsPolled
from tui.model.box import BoxState


class Recorder(App[None]):
    """Handles the panel's messages by writing down what reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, object]] = []

    def on_box_updated(self, message: BoxUpdated) -> None:
        self.seen.append(("box", (message.state.name, message.state.box_time)))

    def on_costs_polled(self, _: CostsPolled) -> None:
        self.seen.append(("costs", None))

    def on_action_progress(self, message: ActionProgress) -> None:
        self.seen.append(("progress", (message.box, message.text)))

    def on_action_ended(self, message: ActionEnded) -> None:
        self.seen.append(("ended", (message.box, message.code)))


def snapshot(name: str, at: float) -> BoxState:
    return BoxState(name=name, box_time=at)


async def test_a_flood_of_one_boxs_snapshots_is_handled_as_its_newest() -> None:
    app = Recorder()
    async with app.run_test() as pilot:
        await pilot.pause()
        for at in range(50):  # queued faster than handled: all posted before any runs
            app.post_message(BoxUpdated(snapshot("a", float(at))))
        for at in range(50):
            app.post_message(BoxUpdated(snapshot("b", float(at))))
        app.post_message(BoxUpdated(snapshot("a", 99.0)))
        await pilot.pause()
        boxes = [what for kind, what in app.seen if kind == "box"]
        assert boxes == [("a", 49.0), ("b", 49.0), ("a", 99.0)]


async def test_one_boxs_snapshot_never_replaces_anothers() -> None:
    app = Recorder()
    async with app.run_test() as pilot:
        await pilot.pause()
        for at in range(5):  # interleaved: each is the newest of its box when handled
            app.post_message(BoxUpdated(snapshot("a", float(at))))
            app.post_message(BoxUpdated(snapshot("b", float(at))))
        await pilot.pause()
        boxes = [what for kind, what in app.seen if kind == "box"]
        assert boxes == [(name, float(at)) for at in range(5) for name in ("a", "b")]


async def test_progress_keeps_the_latest_words_and_never_drops_an_actions_end() -> None:
    app = Recorder()
    async with app.run_test() as pilot:
        await pilot.pause()
        for done in range(20):
            app.post_message(ActionProgress("a", f"pushing: {done}/20 MB"))
        app.post_message(ActionProgress("a", None))  # the end of the push
        app.post_message(ActionProgress("a", "check: torch"))  # the next action's words
        app.post_message(ActionProgress("b", "pushing: 1/2 MB"))
        app.post_message(ActionEnded("a", "push", ["done"], 0))
        app.post_message(ActionEnded("a", "check", ["ok"], 0))
        for _ in range(10):
            app.post_message(CostsPolled())
        await pilot.pause()
        assert app.seen == [
            ("progress", ("a", None)),  # 20 chunks' words superseded by the end
            ("progress", ("a", "check: torch")),
            ("progress", ("b", "pushing: 1/2 MB")),
            ("ended", ("a", 0)), ("ended", ("a", 0)),  # every end handled
            ("costs", None)]


def test_can_replace_says_which_message_supersedes_which() -> None:
    """Textual asks the older message whether the newer one may take its place."""
    older, newer = BoxUpdated(snapshot("a", 1.0)), BoxUpdated(snapshot("a", 2.0))
    assert older.can_replace(newer)
    assert not older.can_replace(BoxUpdated(snapshot("b", 2.0)))
    assert not older.can_replace(CostsPolled())
    assert CostsPolled().can_replace(CostsPolled())
    assert ActionProgress("a", "1 MB").can_replace(ActionProgress("a", None))
    assert not ActionProgress("a", None).can_replace(ActionProgress("a", "words"))
    assert not ActionProgress("a", "1 MB").can_replace(ActionProgress("b", "2 MB"))
    ended = ActionEnded("a", "push", [], 0)
    assert not ended.can_replace(ActionEnded("a", "push", [], 0))
