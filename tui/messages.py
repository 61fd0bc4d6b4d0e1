"""Every message the panel posts, in one place: the runtime's news, the screens' requests.

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
from typing import Literal

from textual.message import Message

from tui.model.box import BoxState
from tui.model.guard import Unpushed


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
    alarmed: bool = False  # its failure rang an alarm, whose toast says it: no second one


# --- what the screens ask the app for ("attributes down, messages up") -------------------
# A screen reads the fleet through tui/screens/view.py and posts one of these; the app
# runs it (through the runtime) or opens the screen it names. No screen imports the app.


@dataclass
class OpenRunRequested(Message):
    """Open a run's detail screen."""

    box: str
    path: str


@dataclass
class PushRequested(Message):
    """Push the named runs of a box (None: every run)."""

    box: str
    runs: list[str] | None


@dataclass
class PowerRequested(Message):
    """Stop or start a box (already confirmed)."""

    box: str
    action: Literal["stop", "start"]


@dataclass
class DestroyRequested(Message):
    """The destroy dialog's answer, with the refusals it showed."""

    box: str
    answer: str
    shown: list[Unpushed]


@dataclass
class CheckRequested(Message):
    """Check a box: torch, CUDA, a real matmul per GPU, LibreYOLO, HF_HOME."""

    box: str


@dataclass
class DoctorRequested(Message):
    """Open LibreYOLO's doctor for a data set on a box."""

    box: str


@dataclass
class ProfileRequested(Message):
    """Open the profile screen: LibreYOLO's profiler on a box (for one of its runs)."""

    box: str
    run: str | None = None


@dataclass
class FetchRequested(Message):
    """Open the fetch screen: a staged data set onto a box."""

    box: str


@dataclass
class StageRequested(Message):
    """Open the stage screen: a data set folder onto the Hub."""


@dataclass
class SizeRequested(Message):
    """Open the size form (for a box: priced at its stopped rate)."""

    box: str | None = None


@dataclass
class LaunchRequested(Message):
    """Open the launch form for a box."""

    box: str


@dataclass
class MonitorRequested(Message):
    """Open a run's LibreYOLO monitor, or close the one open."""

    box: str
    path: str


@dataclass
class CancelRequested(Message):
    """Cancel the action running on a box (asked first when it may be left half-done)."""

    box: str
