"""The money policy: alarms ring once as a box enters them; push-and-stop acts once."""

from __future__ import annotations

from tui.model.cost import BoxRates
from tui.model.meter import BoxCost, FleetCost
from tui.model.policy import Alarms, judge_costs


def cost(**boxes: tuple[bool, str | None]) -> FleetCost:
    rates = BoxRates("running", None, None, 730, "default", None, True)
    return FleetCost(boxes={name: BoxCost(name, rates, 1.0, 1.0, idle_alarm=idle,
                                          budget_level=level)
                            for name, (idle, level) in boxes.items()},
                     usd_per_hr=0.0, accrued_usd=0.0, today_usd=0.0, to_finish_usd=0.0)


def test_an_alarm_rings_once_when_a_box_enters_it() -> None:
    first = judge_costs(Alarms(), cost(a=(True, None), b=(False, "alarm")), "warn",
                        reachable={"a", "b"}, busy=())
    assert [n.text for n in first.notices] == ["a is billed as running but idle",
                                               "b is over its budget"]
    assert all(n.bell for n in first.notices) and first.push_and_stop == ()
    again = judge_costs(first.alarms, cost(a=(True, None), b=(False, "alarm")), "warn",
                        reachable={"a", "b"}, busy=())
    assert again.notices == ()
    left = judge_costs(again.alarms, cost(a=(False, None), b=(False, None)), "warn",
                       reachable={"a", "b"}, busy=())
    back = judge_costs(left.alarms, cost(a=(True, None), b=(False, None)), "warn",
                       reachable={"a", "b"}, busy=())
    assert [n.box for n in back.notices] == ["a"]  # it left the alarm and came back


def test_push_and_stop_acts_once_on_a_box_it_can_see_and_that_is_free() -> None:
    over = cost(a=(False, "alarm"), b=(False, "alarm"), c=(False, "alarm"))
    first = judge_costs(Alarms(), over, "push-and-stop", reachable={"a", "c"}, busy={"c"})
    assert first.push_and_stop == ("a",)  # b cannot be seen, c is busy
    second = judge_costs(first.alarms, over, "push-and-stop", reachable={"a", "b", "c"},
                         busy=())
    assert second.push_and_stop == ("b", "c")
    third = judge_costs(second.alarms, over, "push-and-stop", reachable={"a", "b", "c"},
                        busy=())
    assert third.push_and_stop == ()
