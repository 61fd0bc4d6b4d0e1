"""Every message the panel posts, in one place.

Workers (one per box, the provider poller, the action flows) post these to
the app; the app folds them into its state, which the screens watch. They are
dataclasses carrying immutable snapshots, so a handler never sees a half-made
value. `can_replace` lets Textual drop a message that a newer one of the same
kind supersedes before it is handled: a box streaming its history in many
capped reads, faster than the screen can draw, is drawn once per frame, not
once per read.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from tui.model.box import BoxState


@dataclass
class BoxUpdated(Message):
    """A box's new snapshot, posted by its watcher worker."""

    state: BoxState

    def can_replace(self, message: Message) -> bool:
        # Snapshots are cumulative: the next one of the same box holds all of this one.
        return isinstance(message, BoxUpdated) and message.state.name == self.state.name


@dataclass
class CostsPolled(Message):
    """The providers were asked again: rates and states may have changed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CostsPolled)


@dataclass
class ActionProgress(Message):
    """Words about an action in flight on a box (None when it ended)."""

    box: str
    text: str | None

    def can_replace(self, message: Message) -> bool:
        # Progress of one push arrives per chunk: only the latest words matter, but the
        # end of an action (None) is never dropped in favour of older words.
        return isinstance(message, ActionProgress) and message.box == self.box \
            and self.text is not None


@dataclass
class ActionEnded(Message):
    """An action on a box finished (or failed): its words and exit code, and for a stop,
    start or destroy its outcome ("unknown": the effect was not seen, not a failure)."""

    box: str
    what: str
    lines: list[str]
    code: int
    outcome: str | None = None
