"""What a crash would cost now: a run's epochs since its last verified push, in GPU money. Pure.

"unpushed: 7 epochs, $1.84 of GPU time" = the epochs finished since the last
verified push (the journal records the run's epoch with each push), their own
times from metrics.jsonl (the mean epoch for any not loaded), x the run's share
of its box's running rate (the box's rate split evenly between its running
runs, as the cost per epoch is). Where the last
push carried no epoch (a journal line from before this was recorded) the
count is unknown unless last.pt is the very file pushed (then nothing is at
stake).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.model.cost import usd
from tui.model.guard import PushRecord
from tui.model.meter import BoxCost
from tui.model.runs import Health, RunState

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


def at_stake(run: RunState, record: PushRecord | None, share_usd_per_hr: float | None
             ) -> AtStake | None:
    """The run's unpushed epochs and their cost; None while it has no finished epoch."""
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
    seconds = _seconds(run, epoch, epochs) if epochs is not None else None
    money = None
    if share_usd_per_hr is not None and seconds is not None:
        money = seconds * share_usd_per_hr / 3600
    return AtStake(epochs, money, record.at if record is not None else None)


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
