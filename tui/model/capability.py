"""What a box can be asked to do now, so the panel offers only that. Pure.

A confirmation that ends in "refused" wastes the user's attention and
teaches them to press y without reading: the panel asks this first and says
why instead of asking (a manual box has no API to start it; Lambda cannot
stop; a box already stopped needs no stop).
"""

from __future__ import annotations

from tui.model.config import BoxConfig
from tui.model.cost import BoxRates, Rate, usd
from tui.model.instance import POWER_ACTIONS, PowerAction
from tui.model.rest import Rest

_ALREADY = {"stop": ("stopped", "stopping"), "start": ("running", "starting")}


def refusal(action: PowerAction, box: BoxConfig, rates: BoxRates | None = None,
            rest: Rest | None = None) -> str | None:
    """Why `action` cannot be done on `box` now; None when it can be offered.

    `rates` carries the provider's last word on the box (state, whether it can
    stop); without it only the config decides. `rest` is the box at rest as the
    runtime reads it (tui.model.rest.box_rest): our own seen stop or destroy, which
    outweighs a provider answer read before it (the meter polls once a minute, so
    right after a stop its state still says running; S must offer the start).
    """
    if action not in POWER_ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if box.provider == "manual":
        if action == "start":
            return (f"{box.name} is a manual box: the panel has no way to start it; start it "
                    "from its own console")
        key, command = ("stop_command", box.stop_command) if action == "stop" \
            else ("destroy_command", box.destroy_command)
        if not command:
            return (f"{box.name} is a manual box with no {key}: {action} it from its own "
                    f"console, or set {key} in its [[box]] table")
        return None
    if not box.instance_id:
        return (f"{box.name} has no instance_id in the config, so the panel cannot tell "
                f"{box.provider} what to {action}")
    if rest is not None:
        if rest.kind == "destroyed":
            return f"{box.name} is destroyed: nothing is left to {action}"
        return f"{box.name} is already stopped" if action == "stop" else None
    if rates is None:
        return None
    if rates.state == "destroyed":
        return f"{box.name} is destroyed: nothing is left to {action}"
    if action == "stop" and not rates.can_stop:
        return f"{box.name}: {box.provider} cannot stop this box (destroy it, or keep it)"
    if rates.state in _ALREADY.get(action, ()):
        return f"{box.name} is already {rates.state}"
    return None


def stop_words(box: BoxConfig, stopped: Rate | None) -> str:
    """The stop confirmation's body: what the stop does and what stays billed.

    A provider's box keeps billing its disk and may lose its GPU to another renter; a
    manual box has no provider: its `stop_command` runs on it, and only what the config
    prices for it stopped is billed (the user's own figure, if any).
    """
    if box.provider == "manual":
        bill = (f"While stopped your config prices its disk at {usd(stopped.usd_per_hr)}/hr."
                if stopped and stopped.usd_per_hr > 0
                else "No provider bills it while stopped.")
        return (f"{box.name} is a manual box: its stop_command runs on it over SSH:\n"
                f"  {box.stop_command}\n{bill}\nRuns on it stop now; start it again from "
                "its own console.")
    bill = (f"While stopped it still bills {usd(stopped.usd_per_hr)}/hr for its disk."
            if stopped else "While stopped its disk is still billed (rate unknown).")
    return (f"{bill}\nThe GPU may be gone when you start it again (the provider gives "
            "it to someone else): runs on it stop now.")
