"""The cost meter: what the fleet costs now, has cost, will cost; and when the ledger moves.

Pure: folds the boxes' snapshots, the providers' facts and the ledger's
history at one instant. The I/O around it (polling providers, appending to
the ledger) lives in tui.providers.meter.

The rules, in the order a person would ask:
- Only the configured boxes are metered: a box removed from the config keeps
  its history in the ledger, not its meter, and counts in no total, budget or alarm.
- The ledger follows observed effects. A segment starts only on an observation
  the meter can stand behind: the provider's API read the instance in a state,
  a box answered over SSH (it is up), or an action's effect was read back.
  Where a box has never been observed nothing is billed, and the meter says
  what it would cost if it is running.
- A manual box that no longer answers at all (refused, unreachable, timed out)
  after its stop or destroy command was seen to go; one that still answers
  SHUTDOWN_GRACE_SECONDS after it did not stop.
- An observation older than the ledger's newest word on a box changes nothing
  (a stop read back by an action outranks a provider poll from before it).
- When a change is seen, it is dated so that, where unsure, money is going
  out: a cheaper state from when it was seen, a dearer one from when the old
  state was last seen (or the provider's own start time).
- Where the meter cannot see a box it keeps billing the last state and says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tui.model.bill import (
    RUNNING_STATES,
    Book,
    BoxHistory,
    Event,
    Mark,
    card_running_spend,
    unconfirmed_action,
)
from tui.model.box import BoxState, Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.model.cost import (
    BoxRates,
    Rate,
    RunCost,
    box_rates,
    budget_level,
    idle_since,
    run_cost,
    usd,
)
from tui.model.instance import InstanceInfo
from tui.model.runs import Health, RunState, format_age, parse_time
from tui.model.throughput import UnitCost, run_span, unit_costs

# A manual box that no longer answers at all (not one that refuses a login).
GONE_QUIET = (Connection.UNREACHABLE, Connection.TIMEOUT)
# A box still answering this long after its stop command did not stop.
SHUTDOWN_GRACE_SECONDS = 600.0
FAILED = (Connection.UNREACHABLE, Connection.TIMEOUT, Connection.AUTH_FAILED,
          Connection.HOST_KEY_UNKNOWN, Connection.HOST_KEY_CHANGED, Connection.PROBE_FAILED)

# A manual box that answered but was not read: what it answered, and what to do.
ANSWERS_BUT = {
    Connection.HOST_KEY_UNKNOWN: ("it answers, but its host key is unknown: check the "
                                  "fingerprint, then add it as its error says (or set "
                                  'host_keys = "accept-new")'),
    Connection.HOST_KEY_CHANGED: "it answers, but with a changed host key (refused)",
    Connection.AUTH_FAILED: "it answers, but refuses the login",
}


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def observe(box: BoxConfig, facts: InstanceInfo | None, read_at: float | None,
            read_before: float | None, state: BoxState | None, history: BoxHistory | None,
            down_at: float | None, known_running: Rate | None) -> Event | None:
    """The segment to start when the newest observation of `box` differs from the ledger.

    `read_at`/`read_before`: when the provider last and previously read the
    instance (this process); `down_at`: when the box was last seen not answering.
    `known_running`: the running rate last known (a stopped RunPod pod reports none).
    """
    last = history.last if history is not None else None
    if facts is not None and read_at is not None:
        if last is not None and read_at <= last.t:
            return None  # the ledger holds a newer word (an action read back, say)
        rates = box_rates(box.provider, box.pricing, facts)
        rate = rates.now
        if rates.state in RUNNING_STATES and rates.running is None:
            rate = known_running
        if rate is None:
            return None
        if last is not None and last.state == rates.state and _same(last.usd_per_hr,
                                                                    rate.usd_per_hr):
            return None
        started = facts.started_at
        t = read_at
        if last is None:
            if rates.state == "running" and started is not None and started < read_at:
                t = started  # it was billing before anything looked
        elif rate.usd_per_hr > last.usd_per_hr:
            if started is not None and last.t < started <= read_at:
                t = started
            elif read_before is not None:
                t = max(read_before, last.t)
        note = rate.note if rate.source == "unknown" else ""  # doubts only, not derivations
        return Event(t, box.name, rates.state, rate.usd_per_hr, rate.source, note)
    # No word from a provider: a box that answers over SSH is up, and bills running;
    # one that stops answering after its stop or destroy command was seen to go.
    pending = unconfirmed_action(last)
    if state is not None and last is not None and pending in ("stop", "destroy") \
            and state.connection in GONE_QUIET and state.failed_since is not None \
            and state.failed_since >= last.t:
        if pending == "destroy":
            return Event(state.failed_since, box.name, "destroyed", 0.0, "computed")
        rates = box_rates(box.provider, box.pricing, None)
        gone = replace(rates, state="stopped").now
        assert gone is not None  # a stopped box always has a rate, if only "unknown" 0
        return Event(state.failed_since, box.name, "stopped", gone.usd_per_hr, gone.source,
                     gone.note if gone.source == "unknown" else "")
    if state is None or state.connection is not Connection.OK or state.last_ok_at is None:
        return None
    seen = state.last_ok_at
    if last is not None and seen <= last.t:
        return None
    if last is not None and pending in ("stop", "destroy") \
            and seen - last.t < SHUTDOWN_GRACE_SECONDS:
        return None  # still answering moments after its stop: it may be going down
    rate = box_rates(box.provider, box.pricing, None).running or known_running
    if rate is None:
        return None
    t = seen
    if last is not None:
        if last.state == "running" and _same(last.usd_per_hr, rate.usd_per_hr):
            return None
        if last.state not in RUNNING_STATES and down_at is not None:
            t = max(last.t, min(down_at, seen))  # up again: from when it was last seen down
    return Event(t, box.name, "running", rate.usd_per_hr, rate.source)


def activity_marks(name: str, state: BoxState | None, history: BoxHistory | None,
                   now: float) -> list[Mark]:
    """The activity marks to add when what the box's runs do changed (billed boxes only).

    Training is dated from the earliest start of the runs that progress, idle
    from the last update of any run (when the last one stopped progressing),
    both on the panel's clock; never before the previous mark. A run that
    started and finished while nobody looked (before the box was first seen,
    or between two looks) still trained: its own start marks training and the
    last update idle, so what was billed after it counts as after its last run
    (the "forgot to stop it" money), not as nothing.
    """
    if history is None or not history.events or state is None:
        return []
    last = history.last_mark
    if state.connection is Connection.OK and state.last_ok_at is not None:
        offset = state.last_ok_at - state.box_time if state.box_time is not None else 0.0
        progressing = [r for r in state.runs if r.health is Health.RUNNING]
        if progressing:
            activity = "training"
            starts = [parse_time(r.status.get("started_at")) if r.status else None
                      for r in progressing]
            known = [s + offset for s in starts if s is not None]
            t = min(known) if known else state.last_ok_at
        else:
            activity = "idle"
            ends = [parse_time(r.updated_at) for r in state.runs]
            known = [e + offset for e in ends if e is not None]
            t = max(known) if known else state.last_ok_at
            if last is None or last.activity != "training":
                floor = last.t if last is not None else -math.inf
                starts = [parse_time(r.status.get("started_at")) if r.status else None
                          for r in state.runs]
                # A start ahead of the box's own clock (a skewed or hostile status) is no
                # start yet: counted, it would mark training and idle again at every fold.
                unseen = [s + offset for s in starts
                          if s is not None and floor < s + offset <= state.last_ok_at]
                if unseen:  # trained while nobody looked, and finished
                    trained = min(min(unseen), state.last_ok_at)
                    return [Mark(trained, name, "training"),
                            Mark(max(min(t, state.last_ok_at), trained), name, "idle")]
        t = min(t, state.last_ok_at)
    elif state.connection in FAILED:
        activity = "unseen"
        t = state.failed_since if state.failed_since is not None else now
    else:
        return []
    if last is not None:
        if last.activity == activity:
            return []
        t = max(t, last.t)
    return [Mark(t, name, activity)]


def idle_on_record(history: BoxHistory | None, now: float) -> float | None:
    """When the ledger says this box went idle, for a meter that starts while it is: its
    last activity mark is idle and it has been billed as running without a break since
    (idle counts from the later of the two, as `costs` does). None otherwise.

    A panel restarted in the middle of an idle spell takes its idle clock from here,
    so the idle alarm comes at idle-since + threshold, not restart + threshold."""
    if history is None or history.last_mark is None or history.last_mark.activity != "idle":
        return None
    running_since: float | None = None
    for event in reversed(history.events):
        if event.t > now:
            continue
        if event.state not in RUNNING_STATES:
            break
        running_since = event.t
    if running_since is None:
        return None
    return max(history.last_mark.t, running_since)


def down_on_record(history: BoxHistory | None) -> float | None:
    """Since when the ledger says the box has not answered: its last activity mark is
    "unseen" (a box seen answering since would have a training or idle mark after it).

    A panel restarted while a box is down counts the outage from here, so the
    unreachable alert comes at down-since + its minutes, not restart + its minutes."""
    last = history.last_mark if history is not None else None
    return last.t if last is not None and last.activity == "unseen" else None


@dataclass(frozen=True)
class BoxCost:
    name: str
    rates: BoxRates          # the box's rates; rates.state is what the ledger bills now
    accrued_usd: float
    today_usd: float
    runs: Mapping[str, RunCost] = field(default_factory=dict)  # by run path
    units: Mapping[str, UnitCost] = field(default_factory=dict)  # every run's, by path
    idle_since: float | None = None
    idle_usd: float = 0.0
    idle_alarm: bool = False
    budget_usd: float | None = None
    budget_level: str | None = None
    provider_error: str | None = None
    billing: Event | None = None          # the open segment: what accrues now
    doubt: str | None = None              # where unsure: what may still be going out
    maybe_usd_per_hr: float | None = None  # never observed: what it bills if running
    idle_reason: str = ""
    # The box's billing history (what prices its runs' past epochs at the rate then).
    history: BoxHistory | None = field(default=None, compare=False, repr=False)
    # The box's GPUs (tui/model/busy.py): how busy over the seconds the driver's windows
    # covered, and the money their unused share cost: what this card billed running x
    # (1 - busy); None before any driver window. The covered and billed seconds say how
    # thin the sample is.
    gpu_busy_pct: float | None = None
    gpu_idle_usd: float | None = None
    gpu_busy_covered_s: float = 0.0
    gpu_busy_billed_s: float | None = None
    gpu_busy_billed_usd: float | None = None

    @property
    def rate_now(self) -> Rate | None:
        """What accrues now (the open segment); None while nothing is billed for sure."""
        if self.billing is None:
            return None
        return Rate(self.billing.usd_per_hr, self.billing.source, self.billing.note)

    @property
    def to_finish_usd(self) -> float:
        return sum(c.to_finish_usd or 0.0 for c in self.runs.values())


@dataclass(frozen=True)
class FleetCost:
    boxes: Mapping[str, BoxCost]
    usd_per_hr: float
    accrued_usd: float
    today_usd: float
    to_finish_usd: float
    budget_usd: float | None = None
    budget_level: str | None = None
    unpriced: tuple[str, ...] = ()  # boxes with no known rate
    maybe_usd_per_hr: float = 0.0   # boxes never observed, if they are running
    doubts: tuple[str, ...] = ()    # boxes whose meter is unsure (see BoxCost.doubt)


def _doubt(box: BoxConfig, open_: Event | None, state: BoxState | None, rates: BoxRates,
           provider_error: str | None, now: float) -> str | None:
    """Words for what the meter cannot be sure of, toward money going out."""
    if open_ is None:
        rate = rates.running
        if rate is None:
            return None
        return (f"not observed yet: bills {usd(rate.usd_per_hr)}/hr if it is running "
                "(nothing is metered until the provider or the box answers)")
    if open_.state == "destroyed":
        return None
    if open_.state == "unknown":
        return open_.note or (f"state unknown: may still be billing "
                              f"{usd(open_.usd_per_hr)}/hr")
    if open_.state in ("stopping", "starting"):
        return (f"{open_.state}, not yet read back: billed at the running rate "
                f"{usd(open_.usd_per_hr)}/hr until it is")
    if box.provider != "manual" and provider_error:
        return (f"{box.provider} is not answering: billed as last seen ({open_.state}, "
                f"{usd(open_.usd_per_hr)}/hr); it may have changed")
    if box.provider == "manual" and open_.state in RUNNING_STATES and state is not None \
            and state.connection in FAILED:
        answered = ANSWERS_BUT.get(state.connection)
        if answered is not None:  # it answered: "not answering for 0s" would be untrue
            return f"{answered}: may still be billing {usd(open_.usd_per_hr)}/hr"
        since = state.failed_since
        ago = f" for {format_age(now - since)}" if since is not None else ""
        return (f"not answering{ago}: may still be billing {usd(open_.usd_per_hr)}/hr "
                "(a stop nobody observed bills on)")
    return None


def box_units(state: BoxState, history: BoxHistory | None) -> dict[str, UnitCost]:
    """Every run's throughput and unit costs; runs whose spans overlap share the bill."""
    offset = (state.last_ok_at - state.box_time
              if state.last_ok_at is not None and state.box_time is not None else 0.0)
    spans = {r.path: run_span(r, offset) for r in state.runs}
    units = {}
    for run in state.runs:
        others = [s for p, s in spans.items() if p != run.path and s is not None]
        units[run.path] = unit_costs(run, history, others, offset)
    return units


@dataclass
class _BoxFacts:
    """What one box's meter row takes from its snapshot and its ledger history, neither of
    which moves with the clock: computed when either changes, reused every second between.

    Keyed on the snapshot's identity (a BoxState is frozen; a refresh makes a new one, and
    holding it here keeps its id from being reused) and on the history's identity and
    segment count (a history only grows; a ledger read afresh makes new ones)."""

    state: BoxState
    history: BoxHistory | None
    segments: int
    running: list[RunState]
    units: dict[str, UnitCost]
    gpu_max: float | None
    idle_words: str
    billed: float | None = None  # the rate `runs` were priced at
    runs: dict[str, RunCost] | None = None


@dataclass
class _BoxRates:
    box: BoxConfig
    facts: InstanceInfo | None
    rates: BoxRates
    billing: dict[str, BoxRates] = field(default_factory=dict)  # with the ledger's state


@dataclass
class MeterCache:
    """What `meter` keeps between folds so that a fold costs in proportion to what changed:
    per box, the parts that depend only on its snapshot, its history and its rates. Every
    figure that moves with the clock (the open segment, money so far, idle time) is still
    worked out at each fold, so a fold with a cache equals one without."""

    boxes: dict[str, _BoxFacts] = field(default_factory=dict)
    rates: dict[str, _BoxRates] = field(default_factory=dict)

    def box_rates(self, box: BoxConfig, facts: InstanceInfo | None, state: str) -> BoxRates:
        """The box's rates from its config and the provider's facts (equal facts: the same),
        in the `state` the ledger bills now."""
        kept = self.rates.get(box.name)
        if kept is None or not (kept.box is box or kept.box == box) \
                or not (kept.facts is facts or kept.facts == facts):
            kept = _BoxRates(box, facts, box_rates(box.provider, box.pricing, facts))
            self.rates[box.name] = kept
        rates = kept.billing.get(state)
        if rates is None:
            rates = kept.billing[state] = replace(kept.rates, state=state)
        return rates

    def box_facts(self, state: BoxState, history: BoxHistory | None) -> _BoxFacts:
        """The snapshot's running runs, unit costs and GPU reading, kept while it and the
        history stand."""
        segments = len(history.events) if history is not None else 0
        kept = self.boxes.get(state.name)
        if kept is not None and kept.state is state and kept.history is history \
                and kept.segments == segments:
            return kept
        utils = [g.util_pct for g in state.gpus if g.util_pct is not None]
        gpu_max = max(utils) if utils else None
        idle_words = "no run progressing"
        if gpu_max is not None:
            idle_words += ", GPUs under 5%"
        else:
            idle_words += f", and no GPU reading ({state.gpu_note or 'no nvidia-smi'})"
        made = _BoxFacts(state, history, segments,
                         [r for r in state.runs if r.health is Health.RUNNING],
                         box_units(state, history), gpu_max, idle_words)
        self.boxes[state.name] = made
        return made

    def keep_only(self, names: set[str]) -> None:
        """Forget the boxes no longer in the config."""
        for kept in (self.boxes, self.rates):
            for name in [n for n in kept if n not in names]:
                del kept[name]


def _run_costs(facts: _BoxFacts, billed: float | None) -> dict[str, RunCost]:
    """The running runs' costs at `billed` $/hr, kept until the rate changes."""
    if facts.runs is not None and facts.billed == billed:
        return facts.runs
    runs: dict[str, RunCost] = {}
    for run in facts.running:
        cost = run_cost(billed, len(facts.running), run.epoch_seconds, run.eta_seconds)
        if cost is not None:
            runs[run.path] = cost
    facts.billed, facts.runs = billed, runs
    return runs


def meter(fleet: FleetConfig, boxes: Iterable[BoxState], facts: Mapping[str, InstanceInfo],
          book: Book | Iterable[Event], idle_prev: Mapping[str, float], now: float,
          day_start: float, provider_errors: Mapping[str, str] | None = None,
          cache: MeterCache | None = None) -> FleetCost:
    """Everything the panel and `status --json` show about money, at `now`.

    `cache`: kept by a caller that folds again and again (the meter, once a second), so
    only boxes whose snapshot, history or rates changed are worked out afresh; the result
    is the same as without it."""
    if not isinstance(book, Book):
        book = Book(book)
    if cache is None:
        cache = MeterCache()
    states = {b.name: b for b in boxes}
    costs: dict[str, BoxCost] = {}
    unpriced: list[str] = []
    errors = provider_errors or {}
    for box in fleet.boxes:
        history = book.boxes.get(box.name)
        open_ = history.at(now) if history is not None else None
        error = errors.get(box.name)
        rates = cache.box_rates(box, facts.get(box.name),
                                open_.state if open_ is not None else "unknown")
        state = states.get(box.name)
        rate = open_.usd_per_hr if open_ is not None else None
        maybe = rates.running.usd_per_hr if open_ is None and rates.running else None
        if rate is None and maybe is None:
            unpriced.append(box.name)
        runs: Mapping[str, RunCost] = {}
        units: Mapping[str, UnitCost] = {}
        progressing = False
        gpu_max = None
        idle_words = "no run progressing"
        if state is not None:
            kept = cache.box_facts(state, history)
            progressing = bool(kept.running)
            billed = rate if rate is not None and rates.state in RUNNING_STATES else maybe
            runs = _run_costs(kept, billed)
            units = kept.units
            gpu_max = kept.gpu_max
            idle_words = kept.idle_words
        billed_running = rates.state in RUNNING_STATES and bool(rate and rate > 0)
        since = idle_since(idle_prev.get(box.name), billed_running, progressing, gpu_max, now)
        idle_usd = rate * (now - since) / 3600 if since is not None and rate else 0.0
        spent = history.spent(now) if history is not None else 0.0
        card = card_running_spend(history, now) if state is not None else None
        costs[box.name] = BoxCost(
            name=box.name, rates=rates, accrued_usd=spent,
            today_usd=history.between(day_start, now) if history is not None else 0.0,
            runs=runs, units=units, idle_since=since, idle_usd=idle_usd,
            idle_alarm=since is not None and now - since >= fleet.idle_minutes * 60,
            budget_usd=box.budget_usd, budget_level=budget_level(spent, box.budget_usd),
            provider_error=error, billing=open_,
            doubt=_doubt(box, open_, state, rates, error, now),
            maybe_usd_per_hr=maybe, idle_reason=idle_words, history=history,
            gpu_busy_pct=state.busy.pct if state is not None else None,
            gpu_idle_usd=state.busy.idle_usd(card.usd if card else None) if state else None,
            gpu_busy_covered_s=state.busy.covered_s if state is not None else 0.0,
            gpu_busy_billed_s=card.hours * 3600 if card else None,
            gpu_busy_billed_usd=card.usd if card else None)
    cache.keep_only(set(costs))
    accrued_total = sum(c.accrued_usd for c in costs.values())
    return FleetCost(
        boxes=costs,
        usd_per_hr=sum(c.rate_now.usd_per_hr for c in costs.values() if c.rate_now),
        accrued_usd=accrued_total,
        today_usd=sum(c.today_usd for c in costs.values()),
        to_finish_usd=sum(c.to_finish_usd for c in costs.values()),
        budget_usd=fleet.budget_usd,
        budget_level=budget_level(accrued_total, fleet.budget_usd),
        unpriced=tuple(unpriced),
        maybe_usd_per_hr=sum(c.maybe_usd_per_hr or 0.0 for c in costs.values()),
        doubts=tuple(n for n, c in costs.items() if c.doubt),
    )
