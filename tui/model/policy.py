"""What the panel does about money on its own: which alarms ring, which box it acts on.

Pure: given the previous alarms and a new cost picture, say what is new. An
alarm rings once when a box enters it (not at every refresh while it stays),
and `on_budget = "push-and-stop"` acts once per box, only on a box the panel
can see (its runs are needed to push) and that has no action in flight.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Literal

from tui.model.meter import FleetCost

# A notice's weight, in the words Textual's notify takes.
Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Alarms:
    """The boxes in each alarm at the last look, and those the budget policy acted on."""

    idle: frozenset[str] = frozenset()
    over_budget: frozenset[str] = frozenset()
    acted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Notice:
    """Words for the user about one box; `bell` rings the terminal bell first."""

    box: str
    text: str
    severity: Severity = "error"
    bell: bool = True


@dataclass(frozen=True)
class Decision:
    alarms: Alarms
    notices: tuple[Notice, ...] = ()
    push_and_stop: tuple[str, ...] = field(default=())  # boxes to act on now


def judge_costs(prev: Alarms, cost: FleetCost, on_budget: str | None, *,
                reachable: Container[str], busy: Container[str]) -> Decision:
    """The alarms after `cost`, the notices for boxes that just entered one, and the
    boxes the budget policy acts on now."""
    idle = frozenset(name for name, box in cost.boxes.items() if box.idle_alarm)
    over = frozenset(name for name, box in cost.boxes.items() if box.budget_level == "alarm")
    notices = [Notice(name, f"{name} is billed as running but idle")
               for name in sorted(idle - prev.idle)]
    notices += [Notice(name, f"{name} is over its budget")
                for name in sorted(over - prev.over_budget)]
    acted = set(prev.acted)
    act: list[str] = []
    if on_budget == "push-and-stop":
        for name in sorted(over - prev.acted):
            if name in reachable and name not in busy:
                acted.add(name)
                act.append(name)
                notices.append(Notice(name, f"{name}: on_budget = push-and-stop: pushing its "
                                      "runs, then stopping it", severity="warning", bell=False))
    return Decision(Alarms(idle, over, frozenset(acted)), tuple(notices), tuple(act))
