"""What a box can be asked to do: the panel offers only that."""

from __future__ import annotations

import pytest

from tui.model.capability import refusal, stop_words
from tui.model.config import parse_config
from tui.model.cost import BoxRates, Rate

FLEET = parse_config("""
[[box]]
name = "lab"
host = "lab.example.org"
stop_command = "sudo poweroff"
[[box]]
name = "bare"
host = "bare.example.org"
[[box]]
name = "vast"
host = "ssh4.vast.ai"
provider = "vast"
instance_id = "12345678"
[[box]]
name = "lambda"
host = "198.51.100.4"
provider = "lambda"
instance_id = "0920582c"
[[box]]
name = "unnamed"
host = "a100.runpod.example"
provider = "runpod"
""", "fleet.toml")


def rates(state: str, can_stop: bool = True) -> BoxRates:
    return BoxRates(state, None, None, 720.0, "api", None, can_stop)


def test_a_manual_box_is_never_offered_a_start() -> None:
    why = refusal("start", FLEET.box("lab"))
    assert why is not None and "manual box" in why and "own console" in why
    assert refusal("stop", FLEET.box("lab")) is None  # its stop_command can
    assert "no destroy_command" in (refusal("destroy", FLEET.box("lab")) or "")
    assert "no stop_command" in (refusal("stop", FLEET.box("bare")) or "")


def test_a_provider_box_needs_its_instance_id() -> None:
    assert "no instance_id" in (refusal("stop", FLEET.box("unnamed")) or "")
    assert refusal("stop", FLEET.box("vast")) is None  # nothing known yet: the flow reads it


@pytest.mark.parametrize(("action", "state", "refused"), [
    ("stop", "running", False), ("stop", "stopped", True), ("stop", "stopping", True),
    ("start", "stopped", False), ("start", "running", True), ("start", "starting", True),
    ("destroy", "stopped", False), ("destroy", "running", False),
    ("stop", "destroyed", True), ("start", "destroyed", True), ("destroy", "destroyed", True),
    ("stop", "unknown", False), ("start", "unknown", False),
])
def test_state_decides_what_is_offered(action: str, state: str, refused: bool) -> None:
    assert (refusal(action, FLEET.box("vast"), rates(state)) is not None) is refused


def test_a_box_whose_provider_cannot_stop_is_offered_destroy_only() -> None:
    box = FLEET.box("lambda")
    assert "cannot stop" in (refusal("stop", box, rates("running", can_stop=False)) or "")
    assert refusal("destroy", box, rates("running", can_stop=False)) is None


def test_an_unknown_action_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="reboot"):
        refusal("reboot", FLEET.box("vast"))


def test_stop_words_say_what_applies_to_the_box() -> None:
    """A manual box: its stop_command runs, and only a disk rate the config gives is
    billed; a provider's box: its disk bills on and the GPU may go to another renter."""
    lab = stop_words(FLEET.box("lab"), None)
    assert "sudo poweroff" in lab and "No provider bills it" in lab and "provider gives" not in lab
    priced = stop_words(FLEET.box("lab"), Rate(0.02, "config"))
    assert "your config prices its disk at $0.0200/hr" in priced
    vast = stop_words(FLEET.box("vast"), Rate(0.05, "api"))
    assert "still bills $0.0500/hr" in vast and "provider gives it to someone else" in vast
    assert "rate unknown" in stop_words(FLEET.box("vast"), None)


def test_our_seen_stop_outweighs_the_providers_older_running() -> None:
    """Right after our stop the meter's last provider answer (from before it) still says
    running: the box reads "stopped (by you, ...)", so S offers the start instead of "is
    already running", and a second s says it is stopped. (A provider reading it up after
    the stop ends the rest: tui.model.rest.box_rest.)"""
    from tui.model.rest import Rest

    box, stopped = FLEET.box("vast"), Rest("stopped", "you", 100.0)
    assert refusal("start", box, rates("running"), stopped) is None
    assert "already stopped" in (refusal("stop", box, rates("running"), stopped) or "")
    assert refusal("destroy", box, rates("running"), stopped) is None
    gone = Rest("destroyed", "you", 100.0)
    for action in ("start", "stop", "destroy"):
        assert "is destroyed" in (refusal(action, box, rates("running"), gone) or "")
    assert refusal("start", box, None, stopped) is None
    assert "manual box" in (refusal("start", FLEET.box("lab"), None, stopped) or "")
