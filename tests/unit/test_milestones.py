"""Milestone pushes, what a crash would cost, alerts and preemption: the pure policies."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tui.model.alerts import (
    BOX_IDLE,
    PUSH_FAILED,
    RUN_DIED,
    RUN_FAILED,
    Gate,
    event,
    gate,
    run_events,
    unreachable_event,
    watchdog_acted,
    webhook_label,
    webhook_request,
)
from tui.model.box import BoxState, Connection
from tui.model.config import BoxConfig, PushTarget
from tui.model.cost import BoxRates, Rate, RunCost
from tui.model.guard import last_verified_pushes
from tui.model.meter import BoxCost
from tui.model.milestones import Milestones, plan, settle
from tui.model.preemption import preempted
from tui.model.runs import Health, RunState, WeightFile
from tui.model.unpushed import at_stake, rate_share

PATH = "/root/runs/r1"


def weight(name: str, t: int) -> WeightFile:
    return WeightFile(name, 1000 + t, float(t), t * 1_000_000_000, t)


def run_at(epoch: int, *names: str, health: Health = Health.RUNNING, best_epoch: int = 1,
           best: float = 0.1, mean: float = 60.0) -> RunState:
    status = {"schema_version": 1, "state": "completed" if health is Health.COMPLETED
              else "running", "current_epoch": epoch, "total_epochs": 20,
              "best_epoch": best_epoch, "best_metric": best,
              "best_metric_name": "metrics/mAP50-95", "mean_epoch_seconds": mean,
              "start_epoch": 1}
    return RunState(path=PATH, name="r1", root="/root/runs", health=health, status=status,
                    weights=tuple(weight(n, i + 1) for i, n in enumerate(names)))


def box_with(*runs: RunState) -> BoxState:
    return BoxState(name="b", connection=Connection.OK, runs=runs, last_ok_at=1.0)


def pushed(run: RunState, names: tuple[str, ...], at: float = 50.0) -> dict[str, object]:
    files = [{"name": f"weights/{w.name}", "size": w.size, "mtime": w.mtime,
              "mtime_ns": w.mtime_ns, "inode": w.inode} for w in run.weights if w.name in names]
    return {"time": at, "box": "b", "run": run.name, "run_path": run.path, "action": "push",
            "outcome": "done", "verified": True, "files": files,
            "epoch": run.current_epoch, "best_epoch": run.best_epoch,
            "best_metric": run.best_metric}


EVERY = PushTarget(local_dir="/w", every_epochs=2, on_best=True, on_complete=True)


def test_epoch_multiples_are_pushed_once_each_and_never_in_a_burst() -> None:
    run = run_at(3, "epoch_1.pt", "epoch_2.pt", "epoch_3.pt", "best.pt", "last.pt")
    push = replace(EVERY, on_best=False)
    wish = plan(push, box_with(run), [], Milestones(), 100.0)
    assert wish is not None and wish.epochs == (2,) and wish.why == "epoch 2"
    assert plan(push, box_with(run), [], Milestones(), 100.0, busy=True) is None
    # The push verified: the journal holds epoch_2.pt, so nothing more is due.
    entries = [pushed(run, ("epoch_2.pt", "best.pt", "last.pt"))]
    assert plan(push, box_with(run), entries, Milestones(), 101.0) is None
    # Even with no journal (unwritable), this process remembers what it answered.
    memory = settle(Milestones(), wish, True, 101.0)
    assert plan(push, box_with(run), [], memory, 102.0) is None
    later = run_at(4, "epoch_2.pt", "epoch_3.pt", "epoch_4.pt", "last.pt")
    wish4 = plan(push, box_with(later), entries, memory, 103.0)
    assert wish4 is not None and wish4.epochs == (4,)


def test_a_failed_push_backs_off_and_is_retried() -> None:
    run = run_at(2, "epoch_2.pt")
    wish = plan(EVERY, box_with(run), [], Milestones(), 100.0)
    assert wish is not None
    memory = settle(Milestones(), wish, False, 100.0, jitter=0.0, error="disk full")
    assert plan(EVERY, box_with(run), [], memory, 110.0) is None  # waits out the backoff
    again = plan(EVERY, box_with(run), [], memory, 131.0)
    assert again == wish
    memory = settle(memory, again, False, 131.0, jitter=0.0)
    (attempt,) = memory.attempts.values()
    assert attempt.failures == 2 and attempt.retry_at == 131.0 + 30.0  # doubled: 60 / 2


def test_best_is_pushed_when_it_changed_and_the_best_moved() -> None:
    run = run_at(3, "best.pt", "last.pt", best_epoch=3, best=0.4)
    push = PushTarget(hf_repo="me/r", on_best=True)
    wish = plan(push, box_with(run), [], Milestones(), 10.0)
    assert wish is not None and wish.epochs == () and "best.pt improved at epoch 3" in wish.why
    entries = [pushed(run, ("best.pt", "last.pt"))]
    assert plan(push, box_with(run), entries, Milestones(), 11.0) is None
    # best.pt rewritten but the run's best did not move (a resave): not a milestone.
    resaved = replace(run, weights=(weight("best.pt", 9), weight("last.pt", 2)))
    assert plan(push, box_with(resaved), entries, Milestones(), 12.0) is None
    better = replace(run_at(5, "best.pt", best_epoch=5, best=0.5),
                     weights=(weight("best.pt", 9),))
    assert plan(push, box_with(better), entries, Milestones(), 13.0) is not None


def test_a_completed_run_is_pushed_until_its_weights_are_the_ones_pushed() -> None:
    run = run_at(20, "best.pt", "last.pt", health=Health.COMPLETED)
    push = PushTarget(local_dir="/w", on_complete=True)
    wish = plan(push, box_with(run), [], Milestones(), 10.0)
    assert wish is not None and wish.why == "run completed"
    assert plan(push, box_with(run), [pushed(run, ("best.pt", "last.pt"))], Milestones(),
                11.0) is None
    assert plan(push, box_with(replace(run, health=Health.RUNNING)), [], Milestones(),
                11.0) is None
    down = replace(box_with(run), connection=Connection.TIMEOUT)
    assert plan(push, down, [], Milestones(), 11.0) is None


def test_unpushed_epochs_and_their_cost() -> None:
    run = run_at(12, "best.pt", "last.pt", mean=600.0)
    never = at_stake(run, None, 2.0)
    assert never is not None and never.epochs == 12
    assert never.usd == pytest.approx(12 * 600 * 2.0 / 3600)
    assert never.words() == "unpushed: 12 epochs, $4.00 of GPU time"
    record = last_verified_pushes([pushed(run_at(5, "best.pt", "last.pt"), ("best.pt",))],
                                  "b")[PATH]
    seven = at_stake(run, record, 0.92)
    assert seven is not None and seven.epochs == 7
    assert seven.words() == "unpushed: 7 epochs, $1.07 of GPU time"
    same = at_stake(run, last_verified_pushes([pushed(run, ("last.pt",))], "b")[PATH], 1.0)
    assert same is not None and same.epochs == 0 and same.words() == "unpushed: 0 epochs"
    old = replace(record, epoch=None)
    assert at_stake(run, old, 1.0).epochs is None  # type: ignore[union-attr]
    assert at_stake(replace(run, status=None), None, 1.0) is None


def test_rate_share_splits_the_running_rate() -> None:
    rates = BoxRates("running", Rate(3.0, "api"), None, 720.0, "vast", None)
    cost = BoxCost("b", rates, 0.0, 0.0, runs={PATH: RunCost(1.5, 2, None, None)})
    run = run_at(3)
    assert rate_share(run, cost, 2) == 1.5
    assert rate_share(replace(run, path="/other"), cost, 2) == 1.5
    assert rate_share(replace(run, path="/other"), cost, 0) == 3.0
    assert rate_share(run, None, 1) is None


def test_run_events_fire_on_entering_a_bad_state_only() -> None:
    running = box_with(run_at(3))
    dead = box_with(replace(run_at(3), health=Health.DEAD, reason="pid gone"))
    assert run_events(None, dead, 5.0) == []  # a first look reports history, not news
    (died,) = run_events(running, dead, 5.0)
    assert died.kind == RUN_DIED and died.run == "r1" and "pid gone" in died.text
    assert run_events(dead, dead, 6.0) == []
    failed = box_with(replace(run_at(3), health=Health.FAILED, reason="\x1b[31mboom"))
    (fail,) = run_events(dead, failed, 7.0)
    assert fail.kind == RUN_FAILED and "\x1b" not in fail.text


def test_unreachable_after_the_configured_minutes() -> None:
    down = BoxState(name="b", connection=Connection.TIMEOUT, error="timed out",
                    failed_since=100.0)
    assert unreachable_event(down, 2.0, 200.0) is None
    hit = unreachable_event(down, 2.0, 221.0)
    assert hit is not None and "has not answered for 2m" in hit.text
    assert unreachable_event(replace(down, connection=Connection.OK), 2.0, 999.0) is None


def test_gate_sends_each_event_once_per_cooldown() -> None:
    idle = event(BOX_IDLE, "b", "b is idle", 0.0)
    other = event(PUSH_FAILED, "b", "push failed", 0.0, run="r1")
    out, memory = gate(Gate(), [idle, idle, other], 0.0, 10.0)
    assert out == [idle, other]
    out, memory = gate(memory, [idle], 599.0, 10.0)
    assert out == []
    out, memory = gate(memory, [idle], 600.0, 10.0)
    assert out == [idle]


def test_webhook_bodies_per_format_and_the_url_redacted() -> None:
    item = watchdog_acted("b", "pushed, then stopped the box", 0.0)
    url = "https://ntfy.example.org/my-secret-topic"
    where, body = webhook_request(url, "ntfy", item)
    assert where == "https://ntfy.example.org/"
    ntfy = json.loads(body)
    assert ntfy["topic"] == "my-secret-topic" and ntfy["title"].endswith("watchdog acted on b")
    assert "pushed, then stopped" in ntfy["message"] and ntfy["tags"] == ["robot"]
    assert json.loads(webhook_request(url, "slack", item)[1]).keys() == {"text"}
    long = event(RUN_FAILED, "b", "x" * 5000, 0.0)
    discord = json.loads(webhook_request(url, "discord", long)[1])
    assert discord.keys() == {"content"} and len(discord["content"]) <= 2000
    plain = json.loads(webhook_request(url, "json", item)[1])
    assert plain["kind"] == "watchdog_acted" and plain["schema"] == "gpurent.alert/1"
    assert "secret" not in json.dumps(plain)
    assert webhook_label("https://hooks.slack.com/services/T0/B0/XYZ?x=1") == \
        "webhook (hooks.slack.com)"
    assert webhook_label("http://user:pw@127.0.0.1:8123/t") == "webhook (127.0.0.1)"
    assert webhook_label("https://SECRET.m.pipedream.net/x") == "webhook"
    assert webhook_label("https://u:p@[::1]:9/x") == "webhook (::1)"
    assert webhook_label("https://SECRET.m.pipedream.net/x", "pager") == "webhook 'pager'"


def test_preempted_only_when_no_stop_of_ours_explains_it() -> None:
    box = BoxConfig(name="b", host="h", provider="vast", instance_id="1")
    stopped = BoxCost("b", BoxRates("stopped", None, None, 720.0, "vast", None), 0.0, 0.0)
    running = replace(stopped, rates=replace(stopped.rates, state="running"))
    assert preempted(box, stopped, [])
    assert not preempted(box, running, [])
    assert not preempted(box, stopped, [{"box": "b", "action": "stop", "outcome": "done"}])
    assert preempted(box, stopped, [{"box": "b", "action": "stop", "outcome": "done"},
                                    {"box": "b", "action": "start", "outcome": "done"}])
    assert not preempted(replace(box, provider="manual"), stopped, [])


def test_the_guardian_alerts_what_the_watchdog_did_between_two_looks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tui.actions.guardian import Guardian
    from tui.model.alerts import UNREACHABLE, WATCHDOG_ACTED
    from tui.model.config import parse_config
    from tui.model.watchdog import GuardStep, GuardView
    from tui.store.journal import Journal

    fleet = parse_config('[[box]]\nname = "b"\nhost = "h"\nprovider = "vast"\n'
                         'instance_id = "1"\n', "f.toml")
    guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), clock=lambda: 1000.0)
    armed = replace(box_with(), guard=GuardView(armed=True))
    push = GuardStep("push", "done", 990.0, "verified on the Hub")
    stop = GuardStep("stop", "done", 995.0, "\x1b[2Jstopped")
    acted = replace(armed, guard=GuardView(armed=False, did=(push, stop)))
    assert guardian.box_updated(None, acted) == []  # a first look: history, not news
    (told,) = guardian.box_updated(armed, acted)
    assert told.kind == WATCHDOG_ACTED and "\x1b" not in told.text
    assert "acted: push done: verified on the Hub; stop done: " in told.text
    assert guardian.box_updated(acted, acted) == []
    # Its stop is ours: a provider reading the box stopped is not a preemption then.
    stopped = BoxCost("b", BoxRates("stopped", None, None, 720.0, "vast", None), 0.0, 0.0)
    from tui.model.meter import FleetCost

    _, found = guardian.judge_costs(FleetCost({"b": stopped}, 0, 0, 0, 0), {}, set())
    assert found == [] and guardian.preempted == frozenset()
    down = replace(acted, connection=Connection.TIMEOUT, failed_since=0.0, error="timed out")
    assert guardian.box_updated(acted, down) == []  # its watchdog stopped it: no news
    up = replace(armed, guard=None)
    fresh = Guardian(fleet, Journal(tmp_path / "k.jsonl"), clock=lambda: 1000.0)
    (gone,) = fresh.box_updated(up, replace(up, connection=Connection.TIMEOUT,
                                            failed_since=0.0, error="timed out"))
    assert gone.kind == UNREACHABLE
    assert fresh.box_updated(down, replace(down, guard=None)) == []  # once per outage


def test_a_box_listing_thousands_of_epoch_files_gets_them_a_few_at_a_time() -> None:
    names = [f"epoch_{k}.pt" for k in range(1, 2001)]
    run = run_at(2000, *names)
    push = PushTarget(local_dir="/w", every_epochs=1)
    wish = plan(push, box_with(run), [], Milestones(), 1.0)
    assert wish is not None and wish.epochs == tuple(range(1, 33))
    memory = settle(Milestones(), wish, True, 2.0)
    again = plan(push, box_with(run), [], memory, 3.0)
    assert again is not None and again.epochs == tuple(range(33, 65))


def test_unpushed_money_counts_the_unpushed_epochs_own_times() -> None:
    from tui.model.runs import EpochPoint

    history = tuple(EpochPoint(e, 1.0, seconds=s) for e, s in ((1, 900.0), (2, 900.0),
                                                               (3, 60.0), (4, 120.0)))
    run = replace(run_at(4, "last.pt", mean=495.0), history=history)
    record = last_verified_pushes([pushed(run_at(2, "last.pt"), ())], "b")[PATH]
    stake = at_stake(run, record, 3.6)
    assert stake is not None and stake.epochs == 2
    assert stake.usd == pytest.approx((60 + 120) * 3.6 / 3600)  # not 2 x the 495 s mean
    partial = replace(run, history=history[:3])  # epoch 4 not loaded yet: the mean stands in
    assert at_stake(partial, record, 3.6).usd == pytest.approx((60 + 495) * 3.6 / 3600)  # type: ignore[union-attr]


def test_the_journal_folded_line_by_line_equals_one_fold() -> None:
    from tui.model.milestones import pushed_by_box

    a, b = run_at(4, "epoch_2.pt", "epoch_4.pt", "last.pt"), run_at(2, "epoch_2.pt")
    b = replace(b, path="/root/runs/r2")
    entries = [pushed(a, ("epoch_2.pt",), at=10.0), pushed(b, ("epoch_2.pt",), at=11.0),
               {**pushed(a, ("epoch_4.pt", "last.pt"), at=12.0), "box": "other"},
               pushed(a, ("epoch_4.pt", "last.pt"), at=13.0),
               pushed(a, ("last.pt",), at=9.0)]  # an older clock's line, appended late
    whole = pushed_by_box(entries, ["b", "other"])
    step = pushed_by_box([], ["b", "other"])
    for entry in entries:
        before = step
        step = pushed_by_box([entry], ["b", "other"], step)
        untouched = "other" if entry["box"] == "b" else "b"
        assert step[untouched] is before[untouched]  # its plan stays cached
    assert step == whole
    assert whole["b"].epochs == {PATH: {2, 4}, "/root/runs/r2": {2}}
    assert whole["b"].records[PATH].at == 13.0


def test_a_push_written_over_by_another_run_is_void_folded_either_way() -> None:
    """Line by line the fold kept a run's push although a later push of another run of
    that name went to the same folder: milestones read it as still pushed."""
    from tui.model.milestones import pushed_by_box

    a, b = run_at(4, "last.pt"), replace(run_at(4, "last.pt"), path="/other/runs/r1")
    entries = [{**pushed(a, ("last.pt",), at=10.0), "destination": "/w/b/r1/"},
               {**pushed(b, ("last.pt",), at=11.0), "destination": "/w/b/r1/"}]
    whole = pushed_by_box(entries, ["b"])
    step = pushed_by_box(entries[1:], ["b"], pushed_by_box(entries[:1], ["b"]))
    for fold in (whole, step):
        assert fold["b"].records[PATH].overwritten == "run /other/runs/r1 of box b"
        assert fold["b"].records[PATH].files == {}
        assert not fold["b"].records[b.path].overwritten


def test_a_watchdog_stop_explains_a_stopped_box_until_we_start_it_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tui.actions.guardian import Guardian
    from tui.model.config import parse_config
    from tui.model.meter import FleetCost
    from tui.model.watchdog import GuardStep, GuardView
    from tui.store.journal import Journal

    fleet = parse_config('[[box]]\nname = "b"\nhost = "h"\nprovider = "vast"\n'
                         'instance_id = "1"\n', "f.toml")
    journal = Journal(tmp_path / "j.jsonl")
    guardian = Guardian(fleet, journal, clock=lambda: 2000.0)
    armed = replace(box_with(), guard=GuardView(armed=True))
    guardian.box_updated(armed, replace(armed, guard=GuardView(
        did=(GuardStep("stop", "done", 1000.0, ""),))))
    stopped = FleetCost({"b": BoxCost("b", BoxRates("stopped", None, None, 720.0, "vast",
                                                    None), 0.0, 0.0)}, 0, 0, 0, 0)
    assert guardian.judge_costs(stopped, {}, set())[1] == []
    journal.record(box="b", action="start", outcome="done", at=1500.0)
    (found,) = guardian.judge_costs(stopped, {}, set())[1]  # started since: outbid now
    assert found.kind == "preempted"


STOPPED_VAST = 'name = "b"\nhost = "h"\nprovider = "vast"\ninstance_id = "1"\n'


def stopped_fleet_cost() -> object:
    from tui.model.meter import FleetCost

    return FleetCost({"b": BoxCost("b", BoxRates("stopped", None, None, 720.0, "vast", None),
                                   0.0, 0.0)}, 0, 0, 0, 0)


@pytest.mark.parametrize("seen", ["fired", "stop sending", "destroy sending", "stop failed"])
def test_a_watchdog_seen_firing_or_sending_its_stop_explains_a_stopped_box(
        seen: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The watchdog writes its stop as done only after the provider confirms it, when the
    box (and SSH) is usually gone: what the panel last saw is its firing or its sending."""
    from tui.actions.guardian import Guardian
    from tui.model.config import parse_config
    from tui.model.watchdog import GuardStep, GuardView
    from tui.store.journal import Journal

    fleet = parse_config("[[box]]\n" + STOPPED_VAST, "f.toml")
    guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), clock=lambda: 2000.0)
    armed = replace(box_with(), guard=GuardView(armed=True, armed_at=900.0))
    fired = GuardStep("stalled", "fired", 1000.0, "no epoch progress")
    action, _, outcome = seen.partition(" ")
    did = (GuardStep("fired", "acting", 1000.0, ""), GuardStep("push", "verified", 1001.0, ""))
    view = GuardView(fired=fired, did=did) if action == "fired" else \
        GuardView(fired=fired, did=(*did, GuardStep(action, outcome, 1002.0, "")))
    guardian.box_updated(armed, replace(armed, guard=view))
    cost = stopped_fleet_cost()
    assert guardian.judge_costs(cost, {}, set())[1] == []  # type: ignore[arg-type]
    assert guardian.preempted == frozenset() and guardian.stopped_words("b") is None


def test_a_dry_run_watchdog_that_fired_explains_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tui.actions.guardian import Guardian
    from tui.model.config import parse_config
    from tui.model.watchdog import GuardStep, GuardView
    from tui.store.journal import Journal

    fleet = parse_config("[[box]]\n" + STOPPED_VAST, "f.toml")
    guardian = Guardian(fleet, Journal(tmp_path / "j.jsonl"), clock=lambda: 2000.0)
    armed = replace(box_with(), guard=GuardView(armed=True, dry_run=True))
    guardian.box_updated(armed, replace(armed, guard=GuardView(
        dry_run=True, fired=GuardStep("timeout", "fired", 1000.0, ""),
        did=(GuardStep("stop", "dry_run", 1001.0, ""),))))
    (found,) = guardian.judge_costs(stopped_fleet_cost(), {}, set())[1]  # type: ignore[arg-type]
    assert found.kind == "preempted"


def test_an_armed_watchdog_in_the_journal_makes_a_stopped_box_a_question(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The panel was closed while the watchdog stopped the box: only the journal knows a
    watchdog was armed there. Its stop or the provider's? The panel asks, not accuses."""
    from tui.actions.guardian import Guardian
    from tui.model.alerts import BOX_STOPPED, PREEMPTED
    from tui.model.config import parse_config
    from tui.store.journal import Journal

    fleet = parse_config("[[box]]\n" + STOPPED_VAST, "f.toml")
    journal = Journal(tmp_path / "j.jsonl")
    journal.record(box="b", action="start", outcome="done", at=500.0)
    journal.record(box="b", action="guard", outcome="armed", at=1000.0)
    guardian = Guardian(fleet, journal, clock=lambda: 2000.0)
    cost = stopped_fleet_cost()
    (found,) = guardian.judge_costs(cost, {}, set())[1]  # type: ignore[arg-type]
    assert found.kind == BOX_STOPPED and "by its watchdog or the provider?" in found.text
    assert guardian.preempted == frozenset() and guardian.unsure == frozenset({"b"})
    assert guardian.stopped_words("b") == "stopped by its watchdog or the provider?"
    assert guardian.judge_costs(cost, {}, set())[1] == []  # type: ignore[arg-type]
    for entry in ({"action": "guard", "outcome": "dry_run", "at": 1100.0},  # acts on nothing
                  {"action": "guard-remove", "outcome": "removed", "at": 1200.0},
                  {"action": "start", "outcome": "done", "at": 1300.0}):  # it died with a stop
        fresh = Journal(tmp_path / f"{entry['action']}-{entry['outcome']}.jsonl")
        fresh.record(box="b", action="guard", outcome="armed", at=1000.0)
        fresh.record(box="b", **entry)  # type: ignore[arg-type]
        guardian = Guardian(fleet, fresh, clock=lambda: 2000.0)
        (found,) = guardian.judge_costs(cost, {}, set())[1]  # type: ignore[arg-type]
        assert found.kind == PREEMPTED, entry
        assert guardian.stopped_words("b") == "stopped by the provider (outbid / preempted?)"


def test_a_box_we_stopped_is_not_alerted_unreachable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A stopped box does not answer SSH: that is no news when the stop was ours (the
    journal's, its watchdog's) or the provider reads it stopped; it is once we start it."""
    from tui.actions.guardian import Guardian
    from tui.model.alerts import UNREACHABLE
    from tui.model.config import parse_config
    from tui.model.meter import FleetCost
    from tui.model.watchdog import GuardStep, GuardView
    from tui.store.journal import Journal

    fleet = parse_config("[[box]]\n" + STOPPED_VAST, "f.toml")
    up = box_with()
    down = replace(up, connection=Connection.TIMEOUT, failed_since=0.0, error="timed out")
    journal = Journal(tmp_path / "j.jsonl")
    guardian = Guardian(fleet, journal, clock=lambda: 2000.0)
    journal.record(box="b", action="stop", outcome="done", at=1500.0)
    assert guardian.box_updated(up, down) == []
    journal.record(box="b", action="start", outcome="done", at=1600.0)
    (gone,) = guardian.box_updated(up, down)
    assert gone.kind == UNREACHABLE
    # Its watchdog fired (every rule ends in a stop), as the panel last saw it.
    guardian = Guardian(fleet, Journal(tmp_path / "w.jsonl"), clock=lambda: 2000.0)
    fired = replace(up, guard=GuardView(fired=GuardStep("timeout", "fired", 1900.0, "")))
    guardian.box_updated(up, fired)
    assert guardian.box_updated(fired, replace(fired, connection=Connection.TIMEOUT,
                                               failed_since=0.0)) == []
    # The provider reads it stopped (whoever stopped it: that has its own alert).
    guardian = Guardian(fleet, Journal(tmp_path / "p.jsonl"), clock=lambda: 2000.0)
    stopped = stopped_fleet_cost()
    guardian.judge_costs(stopped, {}, set())  # type: ignore[arg-type]
    assert guardian.box_updated(up, down) == []
    running = FleetCost({"b": replace(stopped.boxes["b"], rates=BoxRates(  # type: ignore[attr-defined]
        "running", None, None, 720.0, "vast", None))}, 0, 0, 0, 0)
    guardian.judge_costs(running, {}, set())
    assert [e.kind for e in guardian.box_updated(up, down)] == [UNREACHABLE]
