"""What a crash would cost now: a run's epochs since its last verified push, in GPU money. Pure.

"unpushed: 7 epochs, $1.84 of GPU time" = the epochs finished since the last
verified push (the journal records the run's epoch with each push), each priced
at the time it ran: its window (its own time from metrics.jsonl, the mean epoch
for any not loaded, counted back from the run's last update) integrated over
the box's billing history in the ledger (the rate billed then, not today's),
split evenly between the box's runs that were training then (from each run's
start and last update). So a finished run's figure is fixed once it finished,
whatever runs since, and a rate changed in the config reprices only what runs
after it. Where the ledger has no word on a window (before the box was first
metered) the box's running rate prices it; with no timeline at all, the run's
share of the running rate now. Where the last push carried no epoch (a journal
line from before this was recorded) the count is unknown unless last.pt is the
very file pushed (then nothing is at stake).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tui.model.bill import BoxHistory
from tui.model.box import BoxState
from tui.model.cost import usd
from tui.model.guard import PushRecord
from tui.model.meter import BoxCost
from tui.model.runs import Health, RunState, parse_time

SUMMED_EPOCHS = 64


@dataclass(frozen=True)
class AtStake:
    epochs: int | None     # None: not known (see the module's docstring)
    usd: float | None      # None: no rate or no epoch time known
    pushed_at: float | None  # the last verified push (None: never pushed)

    def words(self) -> str:
        if self.epochs is None:
            return "unpushed: epochs since the last push unknown"
        text = f"unpushed: {self.epochs} epoch{'' if self.epochs == 1 else 's'}"
        if self.usd is not None and self.epochs:
            text += f", {usd(self.usd)} of GPU time"
        return text


@dataclass(frozen=True)
class Timeline:
    """What prices a box's past epochs: its billing history (panel clock), its running rate
    where the ledger is silent, and when each of its runs trained (box clock)."""

    history: BoxHistory | None
    running_usd_per_hr: float | None
    offset: float  # panel clock - box clock
    spans: Mapping[str, tuple[float, float]]  # run path -> (started, last update)

    def sharing(self, path: str, at: float) -> int:
        """How many runs were training on the box at `at` (box clock), this one included."""
        return 1 + sum(1 for other, (a, b) in self.spans.items()
                       if other != path and a <= at <= b)

    def billed(self, start: float, end: float) -> float | None:
        """What the box billed from `start` to `end` (box clock): the ledger's segments, or
        its running rate where the ledger has no word on `start`."""
        history = self.history
        if history is not None and history.at(start + self.offset) is not None:
            return history.between(start + self.offset, end + self.offset)
        if self.running_usd_per_hr is not None:
            return self.running_usd_per_hr * (end - start) / 3600
        return None

    def price(self, path: str, windows: list[tuple[float, float]]) -> float | None:
        """The run's share of what the box billed over its epochs' `windows` (newest first,
        each ending where the next begins): one ledger sum per stretch run with the same
        number of runs training (a draw of 64 epochs costs a few sums, not 64)."""
        total = 0.0
        i = 0
        while i < len(windows):
            share = self.sharing(path, (windows[i][0] + windows[i][1]) / 2)
            j = i + 1
            while j < len(windows) and \
                    self.sharing(path, (windows[j][0] + windows[j][1]) / 2) == share:
                j += 1
            billed = self.billed(windows[j - 1][0], windows[i][1])
            if billed is None:
                return None
            total += billed / share
            i = j
        return total


def box_timeline(box: BoxState | None, cost: BoxCost | None) -> Timeline | None:
    """The box's timeline, or None when its runs' times cannot be placed on the panel's
    clock (no answer yet) or nothing prices them."""
    if box is None or cost is None or box.box_time is None or box.last_ok_at is None:
        return None
    running = cost.rates.running
    spans = {}
    for run in box.runs:
        started = parse_time(run.status.get("started_at")) if run.status else None
        ended = box.box_time if run.health is Health.RUNNING else parse_time(run.updated_at)
        if started is not None and ended is not None:
            spans[run.path] = (started, max(started, ended))
    return Timeline(cost.history, running.usd_per_hr if running is not None else None,
                    box.last_ok_at - box.box_time, spans)


def rate_share(run: RunState, cost: BoxCost | None, running_runs: int) -> float | None:
    """The run's share of its box's running $/hr: the meter's own split while it runs,
    else the running rate over the box's running runs (at least one)."""
    if cost is None:
        return None
    if run.path in cost.runs:
        return cost.runs[run.path].usd_per_hr
    running = cost.rates.running
    if running is None:
        return None
    return running.usd_per_hr / max(running_runs, 1)


def at_stake(run: RunState, record: PushRecord | None, share_usd_per_hr: float | None,
             timeline: Timeline | None = None) -> AtStake | None:
    """The run's unpushed epochs and their cost; None while it has no finished epoch.
    With the box's `timeline`, each epoch is priced at the time it ran."""
    epoch = run.current_epoch
    if epoch is None:
        return None
    if run.health is Health.FAILED and run.status is not None \
            and run.status.get("completed_epochs") is None:
        epoch = max(epoch - 1, 0)  # a failed run's current_epoch is the one it died in
    if record is None:
        start = run.status.get("start_epoch") if run.status else None
        epochs: int | None = epoch - (start - 1) if isinstance(start, int) and \
            not isinstance(start, bool) and 1 <= start <= epoch + 1 else epoch
    else:
        # the probe lists weights by name: last.pt comes after the epoch_<N>.pt files
        last = next((w for w in reversed(run.weights) if w.name == "last.pt"), None)
        pushed = record.files.get("weights/last.pt")
        if last is not None and pushed is not None and \
                pushed == (last.size, last.mtime_ns, last.inode):
            epochs = 0
        elif record.epoch is not None:
            epochs = max(epoch - record.epoch, 0)
        else:
            epochs = None
    money = None
    if epochs is not None:
        money = _priced(run, epoch, epochs, timeline)
        if money is None:
            seconds = _seconds(run, epoch, epochs)
            if share_usd_per_hr is not None and seconds is not None:
                money = seconds * share_usd_per_hr / 3600
    return AtStake(epochs, money, record.at if record is not None else None)


def _durations(run: RunState, last: int, epochs: int) -> list[float] | None:
    """Each of the `epochs` epochs up to `last`, newest first: its own time from
    metrics.jsonl for the latest SUMMED_EPOCHS, else the run's mean epoch; None when
    some is unknown."""
    own = {}
    for seen, point in enumerate(reversed(run.history)):
        if point.epoch <= last - epochs or seen >= SUMMED_EPOCHS:
            break
        if point.epoch <= last and point.seconds is not None:
            own[point.epoch] = point.seconds
    each = run.mean_epoch_seconds or run.epoch_seconds
    durations = []
    for number in range(last, last - min(epochs, SUMMED_EPOCHS), -1):
        seconds = own.get(number, each)
        if seconds is None:
            return None
        durations.append(seconds)
    if epochs > SUMMED_EPOCHS:
        if each is None:
            return None
        durations.append(each * (epochs - SUMMED_EPOCHS))  # older ones: one window
    return durations


def _priced(run: RunState, last: int, epochs: int, timeline: Timeline | None
            ) -> float | None:
    """The epochs' money at the time each ran: windows counted back from the run's last
    update (box clock); None without a timeline or a known time for each."""
    if timeline is None or not epochs:
        return None if timeline is None else 0.0
    end = parse_time(run.updated_at)
    durations = _durations(run, last, epochs)
    if end is None or durations is None:
        return None
    windows = []
    for seconds in durations:
        windows.append((end - seconds, end))
        end -= seconds
    return timeline.price(run.path, windows)


def _seconds(run: RunState, last: int, epochs: int) -> float | None:
    """What the `epochs` epochs up to `last` took: the latest SUMMED_EPOCHS of them their
    own times from metrics.jsonl, older ones and any not loaded (yet) the run's mean epoch
    (a row drawn on each refresh never walks a 2,000-epoch history); None when unknown."""
    known, counted = 0.0, 0
    for seen, point in enumerate(reversed(run.history)):
        if point.epoch <= last - epochs or seen >= SUMMED_EPOCHS:
            break
        if point.epoch <= last and point.seconds is not None:
            known += point.seconds
            counted += 1
    missing = max(epochs - counted, 0)
    if not missing:
        return known
    each = run.mean_epoch_seconds or run.epoch_seconds
    return known + missing * each if each is not None else None
