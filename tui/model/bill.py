"""The billing history replayed: what each box billed when, and what its runs were doing.

Pure: no I/O. A box's history is two sorted timelines: billing segments
(`Event`: from `t` on the box bills `usd_per_hr` in a state) and activity
marks (`Mark`: from `t` on its runs were training, idle, or could not be
seen). Dollars are the integral of the rate over time, kept as a running sum
at every segment start, so "spent so far" or "spent today" costs a binary
search, not a replay, on every refresh; a segment that arrives out of order
(a backfill, another process's append) re-sums only that box from there.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from tui.model.busy import BusyIntegral, idle_usd

# Billed at the running rate: "stopping" and "starting" until the provider
# reads the new state, "unknown" while an action's effect was not observed.
RUNNING_STATES = ("running", "starting", "stopping", "error", "unknown")
ACTIVITIES = ("training", "idle", "unseen")


class Event(NamedTuple):
    """The start of a billing segment: from `t` on, `box` bills `usd_per_hr`.

    A NamedTuple, not a dataclass: a month of ledger builds tens of thousands at
    a panel's start, and a tuple is made several times faster."""

    t: float
    box: str
    state: str
    usd_per_hr: float
    source: str
    note: str = ""  # why this segment began, when a person should know ("stop not observed")

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"v": 1, "t": round(self.t, 3), "box": self.box,
                                  "state": self.state, "usd_per_hr": self.usd_per_hr,
                                  "source": self.source}
        if self.note:
            record["note"] = self.note
        return record


class Mark(NamedTuple):
    """From `t` on, `box`'s runs were `activity`: training (one progressed), idle (none
    did), unseen (the box could not be looked at)."""

    t: float
    box: str
    activity: str

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "kind": "activity", "t": round(self.t, 3), "box": self.box,
                "activity": self.activity}


class Seen(NamedTuple):
    """At `t` a meter still had `box` in its config and counted what it billed: a removed
    box's history runs to its last one (a billing box gets one at most every 15 minutes)."""

    t: float
    box: str

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "kind": "seen", "t": round(self.t, 3), "box": self.box}


class Busy(NamedTuple):
    """`box`'s GPU-busy integral grown since its previous record (tui/model/busy.py): of the
    `covered_s` seconds the driver's windows covered up to `t`, `busy_s` were busy. A meter
    writes one per box at most every BUSY_EVERY_SECONDS (15 min), so `costs` can say how busy a
    box's GPUs were over its billed time after the panel that watched them quit."""

    t: float
    box: str
    covered_s: float
    busy_s: float
    since: float | None = None  # the box's previous record (None: its first, t - covered_s)

    @property
    def span(self) -> tuple[float, float]:
        """The wall-clock stretch this record's covered seconds fell in (what prices them)."""
        return (self.t - self.covered_s if self.since is None else self.since), self.t

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"v": 1, "kind": "gpu_busy", "t": round(self.t, 3),
                                  "box": self.box, "covered_s": round(self.covered_s, 3),
                                  "busy_s": round(self.busy_s, 3)}
        if self.since is not None:
            record["since"] = round(self.since, 3)
        return record


# A busy record per box at most every 15 minutes (and one as a meter closes): a month of
# a 20-box fleet adds ~58,000 small lines, what its seen notes and segments already are,
# not the 860,000 of one a minute, which would multiply the panel's start-up replay.
BUSY_EVERY_SECONDS = 900.0
MAX_BUSY_COVERED_S = 86_400.0  # one record never claims more than a day


def unconfirmed_note(action: str, usd_per_hr_text: str) -> str:
    """The words on a segment an action started without its effect read back."""
    still = "may be billing" if action == "start" else "may still be billing"
    return (f"a {action} was sent but its effect was not read back: {still} "
            f"{usd_per_hr_text}/hr; check it")


def unconfirmed_action(event: Event | None) -> str | None:
    """The action ("stop", "destroy", "start") whose effect this segment awaits, if any."""
    if event is None or event.state != "unknown":
        return None
    for action in ("stop", "destroy", "start"):
        if event.note.startswith(f"a {action} was sent but"):
            return action
    return None


_INF = math.inf


def parse_record(record: Mapping[str, Any]) -> Event | Mark | Seen | Busy | None:
    """A ledger line as a segment, a mark or a seen note; None when it is none of them
    (skipped, counted).

    Numbers must be JSON numbers (not booleans or strings) and finite; the
    comparisons `-inf < x < inf` also refuse NaN. Written for speed: a panel's
    start parses every line of the month."""
    get = record.get
    t, box = get("t"), get("box")
    if type(box) is not str or (type(t) is not float and type(t) is not int) \
            or not -_INF < t < _INF:
        return None
    kind = get("kind")
    if kind == "activity":
        activity = get("activity")
        return Mark(float(t), box, activity) if activity in ACTIVITIES else None
    if kind == "seen":
        return Seen(float(t), box)
    if kind == "gpu_busy":
        return _busy(float(t), box, get("covered_s"), get("busy_s"), get("since"))
    rate, state, note = get("usd_per_hr"), get("state"), get("note", "")
    if (type(rate) is not float and type(rate) is not int) or not 0 <= rate < _INF \
            or type(state) is not str or type(note) is not str:
        return None
    return Event(float(t), box, state, float(rate), str(get("source", "")), note)


def _busy(t: float, box: str, covered: object, busy: object, since: object) -> Busy | None:
    """A gpu_busy line, or None unless 0 <= busy_s <= covered_s <= t - since <= a day
    (finite numbers; `since` may be absent)."""
    if type(covered) not in (int, float) or type(busy) not in (int, float):
        return None
    c, b = float(covered), float(busy)  # type: ignore[arg-type]
    if not (0 < c <= MAX_BUSY_COVERED_S and 0 <= b <= c):
        return None
    if since is None:
        return Busy(t, box, c, b)
    if type(since) not in (int, float):
        return None
    f = float(since)  # type: ignore[arg-type]
    if not (c - 0.001 <= t - f <= MAX_BUSY_COVERED_S):  # also refuses NaN
        return None
    return Busy(t, box, c, b, f)


@dataclass
class BoxHistory:
    """One box's segments and marks, sorted by time, with the dollars billed before each
    segment's start (`cum`)."""

    events: list[Event] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    cum: list[float] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    mark_times: list[float] = field(default_factory=list)
    seen_at: float | None = None  # the newest Seen note
    busy: list[Busy] = field(default_factory=list)  # GPU-busy records, sorted by time
    busy_times: list[float] = field(default_factory=list)

    @property
    def watched_until(self) -> float | None:
        """The last moment a meter is known to have counted this box: its newest segment,
        mark or seen note (each written while a meter had it in its config)."""
        times = [t for t in (self.times[-1] if self.times else None,
                             self.mark_times[-1] if self.mark_times else None,
                             self.seen_at) if t is not None]
        return max(times) if times else None

    def add(self, event: Event) -> None:
        # After any equal time: of two segments at one instant the later word wins.
        i = bisect_right(self.times, event.t)
        self.events.insert(i, event)
        self.times.insert(i, event.t)
        self.cum.insert(i, 0.0)
        for j in range(max(i, 1), len(self.events)):
            prev = self.events[j - 1]
            self.cum[j] = self.cum[j - 1] + prev.usd_per_hr * (self.times[j] - prev.t) / 3600

    def add_busy(self, busy: Busy) -> None:
        if self.busy and busy.t >= self.busy_times[-1]:
            self.busy.append(busy)
            self.busy_times.append(busy.t)
            return
        i = bisect_right(self.busy_times, busy.t)
        self.busy.insert(i, busy)
        self.busy_times.insert(i, busy.t)

    def mark(self, mark: Mark) -> None:
        i = bisect_right(self.mark_times, mark.t)
        self.marks.insert(i, mark)
        self.mark_times.insert(i, mark.t)

    @property
    def last(self) -> Event | None:
        return self.events[-1] if self.events else None

    @property
    def last_mark(self) -> Mark | None:
        return self.marks[-1] if self.marks else None

    def at(self, t: float) -> Event | None:
        """The segment in force at `t`."""
        i = bisect_right(self.times, t) - 1
        return self.events[i] if i >= 0 else None

    def spent(self, t: float) -> float:
        """Dollars billed from the first segment up to `t`."""
        i = bisect_right(self.times, t) - 1
        if i < 0:
            return 0.0
        event = self.events[i]
        return self.cum[i] + event.usd_per_hr * (t - event.t) / 3600

    def between(self, start: float, end: float) -> float:
        return self.spent(end) - self.spent(start) if end > start else 0.0

    def last_rate(self, states: Iterable[str]) -> Event | None:
        """The newest segment in one of `states` (the running rate last billed, say)."""
        wanted = set(states)
        for event in reversed(self.events):
            if event.state in wanted:
                return event
        return None


class Book:
    """Every box's history, indexed by name."""

    def __init__(self, events: Iterable[Event] = (), marks: Iterable[Mark] = (),
                 seen: Iterable[Seen] = (), busy: Iterable[Busy] = ()) -> None:
        self.boxes: dict[str, BoxHistory] = {}
        by_box: dict[str, list[Event]] = {}
        for event in events:
            by_box.setdefault(event.box, []).append(event)
        for box, box_events in by_box.items():  # bulk: one sort and one sum per box
            box_events.sort(key=itemgetter(0))
            history = self.history(box)
            history.events = box_events
            history.times = [e.t for e in box_events]
            cum, total = [0.0], 0.0
            for prev, event in itertools.pairwise(box_events):
                total += prev.usd_per_hr * (event.t - prev.t) / 3600
                cum.append(total)
            history.cum = cum
        by_box_marks: dict[str, list[Mark]] = {}
        for mark in marks:
            by_box_marks.setdefault(mark.box, []).append(mark)
        for box, box_marks in by_box_marks.items():
            box_marks.sort(key=itemgetter(0))
            history = self.history(box)
            history.marks = box_marks
            history.mark_times = [m.t for m in box_marks]
        for note in seen:
            self.add_seen(note)
        for record in sorted(busy, key=itemgetter(0)):
            self.history(record.box).add_busy(record)

    def history(self, box: str) -> BoxHistory:
        if box not in self.boxes:
            self.boxes[box] = BoxHistory()
        return self.boxes[box]

    def add(self, event: Event) -> None:
        self.history(event.box).add(event)

    def add_mark(self, mark: Mark) -> None:
        history = self.history(mark.box)
        if history.marks and mark.t >= history.mark_times[-1]:
            history.marks.append(mark)
            history.mark_times.append(mark.t)
        else:
            history.mark(mark)

    def add_seen(self, seen: Seen) -> None:
        history = self.history(seen.box)
        if history.seen_at is None or seen.t > history.seen_at:
            history.seen_at = seen.t

    def add_busy(self, busy: Busy) -> None:
        self.history(busy.box).add_busy(busy)

    def last(self, box: str) -> Event | None:
        history = self.boxes.get(box)
        return history.last if history is not None else None

    def spent(self, box: str, now: float, since: float | None = None) -> float:
        history = self.boxes.get(box)
        if history is None:
            return 0.0
        return history.spent(now) if since is None else history.between(since, now)


def accrued(events: Iterable[Event], now: float, *, since: float | None = None
            ) -> dict[str, float]:
    """Dollars per box: each segment bills its rate until the box's next segment (or now),
    counting only time after `since` when given (e.g. today's spend)."""
    book = Book(events)
    return {box: book.spent(box, now, since) for box in book.boxes if book.boxes[box].events}


def spend_series(events: Iterable[Event] | Book, now: float, points: int = 60,
                 boxes: Iterable[str] | None = None) -> list[tuple[float, float]]:
    """Cumulative spend of `boxes` (default: all) at `points` evenly spaced times."""
    book = events if isinstance(events, Book) else Book(events)
    names = [b for b in (book.boxes if boxes is None else boxes)
             if b in book.boxes and book.boxes[b].events]
    if not names:
        return []
    start = min(book.boxes[b].times[0] for b in names)
    if now <= start:
        return [(start, 0.0)]
    step = (now - start) / max(points - 1, 1)
    times = [start + i * step for i in range(points)]
    return [(t, sum(book.boxes[b].spent(t) for b in names)) for t in times]


# --- the `costs` report -----------------------------------------------------


@dataclass(frozen=True)
class Spend:
    hours: float = 0.0
    usd: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.hours + other.hours, self.usd + other.usd)


@dataclass(frozen=True)
class BoxBill:
    """What one box billed between `start` and `end`, split the ways a person asks."""

    box: str
    start: float
    end: float
    running: Spend          # billed at the running rate (starting, stopping, unknown too)
    stopped: Spend          # the disk while stopped
    idle: Spend             # billed as running while no run progressed
    unseen: Spend           # billed as running while its runs could not be seen
    after_last_run: Spend   # everything billed after its last run ended
    last_run_ended_at: float | None
    state: str | None       # the segment in force at `end`
    # A box out of the config whose last watched segment bills: what it may still bill.
    may_still_bill_usd_per_hr: float | None = None
    gpu: GpuBusy | None = None  # None: no busy record in the window (not measured)

    @property
    def usd(self) -> float:
        return self.running.usd + self.stopped.usd


@dataclass(frozen=True)
class GpuBusy:
    """How busy a box's GPUs were over the covered part of its billed time, and the money
    their unused share cost: the running money billed in the window x (1 - busy), the
    covered seconds' ratio standing for the whole (`billed_s` says how thin they are)."""

    covered_s: float
    busy_s: float
    billed_s: float = 0.0
    billed_usd: float = 0.0

    @property
    def pct(self) -> float:
        return 100.0 * self.busy_s / self.covered_s

    @property
    def idle_usd(self) -> float:
        return idle_usd(self.billed_usd, self.covered_s, self.busy_s) or 0.0


def rented_since(history: BoxHistory) -> float | None:
    """When the box's last destroyed segment began (a box of the same name rented again
    after it is another card); None when it never was."""
    return next((e.t for e in reversed(history.events) if e.state == "destroyed"), None)


def _this_card(history: BoxHistory) -> list[Busy]:
    """The box's busy records since its last destroyed segment."""
    since = rented_since(history)
    lo = 0 if since is None else bisect_left(history.busy_times, since)
    return history.busy[lo:]


def running_spend(history: BoxHistory, start: float, end: float) -> Spend:
    """Hours and dollars billed in a running state over [start, end]: the billed time a
    GPU-busy figure speaks for. O(segments)."""
    total = Spend()
    for i, event in enumerate(history.events):
        a = max(event.t, start)
        b = min(history.times[i + 1] if i + 1 < len(history.times) else end, end)
        if b > a and event.state in RUNNING_STATES:
            total += Spend((b - a) / 3600, event.usd_per_hr * (b - a) / 3600)
    return total


def card_running_spend(history: BoxHistory | None, now: float) -> Spend | None:
    """What the box's current card billed running so far (since its last destroyed
    segment); None without a history."""
    if history is None or not history.events:
        return None
    since = rented_since(history)
    return running_spend(history, history.times[0] if since is None else since, now)


def last_busy_end(history: BoxHistory | None) -> float | None:
    """When the box's last busy record ends: seconds before it are in the ledger already,
    so a new record covers only what came after (two `status` runs a moment apart)."""
    records = _this_card(history) if history is not None else []
    return records[-1].t if records else None


def restored_busy(history: BoxHistory | None) -> BusyIntegral:
    """The box's busy integral as the ledger kept it, since its last destroyed segment:
    what a starting panel or `watch` carries on from, so a restart does not reset the
    busy figure. It ends where the last record ends, so a first window reaching back
    before that adds only its newer seconds. No windows: the trailing alert waits for
    new ones."""
    records = _this_card(history) if history is not None else []
    if not records:
        return BusyIntegral()
    return BusyIntegral(sum(r.covered_s for r in records), sum(r.busy_s for r in records),
                        records[-1].t)


def gpu_busy(history: BoxHistory, start: float, end: float) -> GpuBusy | None:
    """The busy records written in [start, end], folded, beside the running time and money
    billed then; None when there is none (a box's first record is written as it first
    answers, when its first segment starts)."""
    lo, hi = bisect_left(history.busy_times, start), bisect_right(history.busy_times, end)
    if lo >= hi:
        return None
    records = history.busy[lo:hi]
    billed = running_spend(history, start, end)
    return GpuBusy(sum(r.covered_s for r in records), sum(r.busy_s for r in records),
                   billed.hours * 3600, billed.usd)


def _last_run_end(history: BoxHistory) -> float | None:
    """When the box's last training stretch ended, if nothing trained after it."""
    ended, trained = None, False
    for mark in history.marks:
        if mark.activity == "training":
            ended, trained = None, True
        elif mark.activity == "idle" and trained and ended is None:
            ended = mark.t
    return ended


def box_bill(history: BoxHistory, box: str, start: float, end: float) -> BoxBill:
    """Replay one box over [start, end]: O(segments + marks) in the window."""
    running = stopped = idle = unseen = Spend()
    ended = _last_run_end(history)
    after = Spend()
    cuts = sorted({start, end, *(t for t in history.times if start < t < end),
                   *(t for t in history.mark_times if start < t < end)})
    ei = bisect_right(history.times, start) - 1
    mi = bisect_right(history.mark_times, start) - 1
    for a, b in itertools.pairwise(cuts):
        while ei + 1 < len(history.times) and history.times[ei + 1] <= a:
            ei += 1
        while mi + 1 < len(history.mark_times) and history.mark_times[mi + 1] <= a:
            mi += 1
        if ei < 0:
            continue
        event = history.events[ei]
        if event.state == "destroyed":
            continue
        piece = Spend((b - a) / 3600, event.usd_per_hr * (b - a) / 3600)
        if event.state in RUNNING_STATES:
            running += piece
            activity = history.marks[mi].activity if mi >= 0 else None
            if activity == "idle":
                idle += piece
            elif activity == "unseen":
                unseen += piece
        else:
            stopped += piece
        if ended is not None and a >= ended:
            after += piece
    state_now = history.at(end)
    return BoxBill(box, start, end, running, stopped, idle, unseen, after, ended,
                   state_now.state if state_now else None, gpu=gpu_busy(history, start, end))


@dataclass(frozen=True)
class CostsReport:
    """Per box and for the fleet (the configured boxes), over [since, until]."""

    since: float | None
    until: float
    boxes: tuple[BoxBill, ...]
    removed: tuple[BoxBill, ...]  # in the ledger, not in the config: until last watched

    def total(self, part: str) -> Spend:
        spends = [getattr(b, part) for b in self.boxes]
        return sum(spends, Spend())

    @property
    def usd(self) -> float:
        return sum(b.usd for b in self.boxes)


def costs_report(book: Book, configured: Iterable[str], since: float | None,
                 until: float) -> CostsReport:
    """The `costs` command's figures: each configured box billed up to `until`; a box that
    left the config up to when a meter last watched it (its meter stopped with the config),
    flagged with what it may still bill if it was billing then."""
    names = list(configured)
    bills = []
    for name in names:
        history = book.boxes.get(name)
        if history is None or not history.events:
            bills.append(BoxBill(name, since or until, until, Spend(), Spend(), Spend(), Spend(),
                                 Spend(), None, None))
            continue
        start = history.times[0] if since is None else since
        bills.append(box_bill(history, name, start, max(until, start)))
    removed = []
    for name in sorted(set(book.boxes) - set(names)):
        history = book.boxes[name]
        if not history.events:
            continue
        start = history.times[0] if since is None else since
        end = min(history.watched_until or history.times[-1], until)
        if end > start:
            bill = box_bill(history, name, start, end)
            last = history.at(end)
            if last is not None and last.state != "destroyed" and last.usd_per_hr > 0:
                bill = dataclasses.replace(bill, may_still_bill_usd_per_hr=last.usd_per_hr)
            removed.append(bill)
    return CostsReport(since, until, tuple(bills), tuple(removed))
