"""How big a disk to rent, and whether a watched box's disk will last its runs.

Pure. A provider bills the allocated disk, not what is used, and a disk cannot
shrink after creation: the guide's rule is staged data + checkpoints + ~30%
headroom, no more. Checkpoint sizes are LibreYOLO's own, measured (see
tools/measure_checkpoints.py); a finished run's real checkpoint beats them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tui.model.box import BoxState, DiskRow
from tui.model.config import Pricing
from tui.model.cost import (
    DEFAULT_HOURS_PER_MONTH,
    PROVIDER_HOURS_PER_MONTH,
    RUNPOD_STOPPED_USD_PER_GB_MONTH,
    stopped_usd_per_hr,
)
from tui.model.runs import Health, RunState, WeightFile

HEADROOM = 0.30
GB = 1000**3
DEFAULT_SAVE_PERIOD = 10  # LibreYOLO's save_period default
LOG_BYTES_PER_EPOCH = 16 * 1024  # metrics.jsonl + train.log; tiny next to a checkpoint
FAR_ABOVE = 2.0  # an allocation this many times what the runs need is "far above"
FAR_ABOVE_MIN_GB = 20.0
PEAK_MARGIN = 0.05  # filesystem overhead on top of the fetch's peak

# weights/last.pt of LibreYOLO 1.6.0 after one epoch, 2 classes (EMA + training weights +
# optimizer state + metadata); measured by tools/measure_checkpoints.py on this machine.
CHECKPOINT_BYTES: dict[str, int] = {
    "yolox-n": 11463109,
    "yolox-t": 60949261,
    "yolox-s": 107853517,
    "yolox-m": 304261997,
    "yolox-l": 651008717,
    "yolox-x": 1189561837,
    "yolo9-t": 33657961,
    "yolo9-s": 118798057,
    "yolo9-m": 331443241,
    "yolo9-c": 429036861,
}


def human_bytes(size: float) -> str:
    """Decimal units, as providers bill disks: 1.2 GB, 340 MB."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1000 or unit == "GB":
            break
        value /= 1000
    else:  # pragma: no cover - the loop always breaks
        unit = "GB"
    if unit == "B":
        return f"{value:.0f} B"
    if unit == "GB" and abs(value) >= 1000:
        return f"{value / 1000:.2f} TB"
    return f"{value:.1f} {unit}"


def model_checkpoint(model: str) -> int | None:
    """A model's measured checkpoint size; `yolox_s`, `YOLOX-S` work too."""
    return CHECKPOINT_BYTES.get(model.strip().lower().replace("_", "-"))


@dataclass(frozen=True)
class DiskPlan:
    """What a disk for one training job has to hold, and the allocation to ask for."""

    data_bytes: int
    checkpoint_bytes: int
    checkpoints: int  # best + last + one per save period
    logs_bytes: int
    system_bytes: int = 0  # the image and its Python environment, where the disk holds them
    headroom: float = HEADROOM
    save_period: int | None = None  # epochs between epoch_<N>.pt (0: none; None: not said)

    @property
    def checkpoints_bytes(self) -> int:
        return self.checkpoint_bytes * self.checkpoints

    @property
    def needed_bytes(self) -> int:
        return self.data_bytes + self.checkpoints_bytes + self.logs_bytes + self.system_bytes

    @property
    def headroom_bytes(self) -> int:
        return math.ceil(self.needed_bytes * self.headroom)

    @property
    def fetch_peak_bytes(self) -> int:
        """While `fetch` unpacks, the tar and the unpacked copy are both on the disk (it
        deletes the tar once the unpacked copy is whole)."""
        return 2 * self.data_bytes + self.system_bytes

    @property
    def allocate_gb(self) -> int:
        """Whole GB: the guide's sum with headroom, or the fetch's peak if that is more."""
        peak = math.ceil(self.fetch_peak_bytes * (1 + PEAK_MARGIN))
        return max(1, math.ceil(max(self.needed_bytes + self.headroom_bytes, peak) / GB))

    def stopped_usd_per_hr(self, usd_per_gb_month: float, hours_per_month: float) -> float:
        return stopped_usd_per_hr(self.allocate_gb, usd_per_gb_month, hours_per_month)

    def _checkpoints_why(self) -> str:
        """Which checkpoints are counted; the save period is named because omitting it
        means LibreYOLO's default, an epoch file every 10 epochs, not none."""
        if self.save_period is None:
            return "best + last + one per save period"
        if self.save_period <= 0:
            return "best + last; no epoch files (save period 0)"
        default = (": LibreYOLO's default save_period"
                   if self.save_period == DEFAULT_SAVE_PERIOD else "")
        return f"best + last + one every {self.save_period} epochs{default}"

    def lines(self, usd_per_gb_month: float | None = None,
              hours_per_month: float | None = None, rate_source: str = "") -> list[str]:
        out = [f"data (staged tar)        {human_bytes(self.data_bytes):>10}",
               f"checkpoints              {human_bytes(self.checkpoints_bytes):>10}   "
               f"{self.checkpoints} x {human_bytes(self.checkpoint_bytes)} "
               f"({self._checkpoints_why()})",
               f"logs                     {human_bytes(self.logs_bytes):>10}"]
        if self.system_bytes:
            out.append(f"image and environment    {human_bytes(self.system_bytes):>10}")
        out.append(f"headroom {self.headroom:.0%}            "
                   f"{human_bytes(self.headroom_bytes):>10}")
        out.append(f"allocate                 {self.allocate_gb:>7} GB")
        if self.fetch_peak_bytes * (1 + PEAK_MARGIN) > self.needed_bytes + self.headroom_bytes:
            out.append(f"  (more than the sum: `fetch` holds the tar and its unpacked copy at "
                       f"once, {human_bytes(self.fetch_peak_bytes)} at its peak, and deletes "
                       "the tar when done)")
        if usd_per_gb_month is not None and hours_per_month is not None:
            rate = self.stopped_usd_per_hr(usd_per_gb_month, hours_per_month)
            source = f" ({rate_source})" if rate_source else ""
            out.append(f"stopped, the disk costs  ${rate:.4f}/hr   {self.allocate_gb} GB x "
                       f"${usd_per_gb_month:g}/GB-month / {hours_per_month:g} h{source}")
        else:
            out.append("stopped, the disk costs  (give --usd-per-gb-month, or --box with "
                       "[box.pricing], to price it)")
        return out


def plan_disk(data_bytes: int, checkpoint_bytes: int, epochs: int,
              save_period: int = DEFAULT_SAVE_PERIOD, *,
              system_bytes: int = 0, headroom: float = HEADROOM) -> DiskPlan:
    """The guide's sizing for one run: best.pt, last.pt and `epoch_<N>.pt` every
    `save_period` epochs (LibreYOLO's 10 unless told; 0: none), plus logs and headroom."""
    periodic = epochs // save_period if save_period > 0 else 0
    return DiskPlan(data_bytes, checkpoint_bytes, 2 + periodic,
                    1_000_000 + epochs * LOG_BYTES_PER_EPOCH, system_bytes, headroom,
                    max(save_period, 0))


def disk_rate(provider: str | None, pricing: Pricing | None = None, *, box: str | None = None,
              usd_per_gb_month: float | None = None, hours_per_month: float | None = None
              ) -> tuple[float | None, float | None, str]:
    """The stopped disk's $/GB-month, the hours its month bills, and where the rate came
    from: as given, the box's [box.pricing], or RunPod's volume rate (the meter's own);
    hours as given, from [box.pricing], the provider's convention, else 730. No rate: None
    (Vast and Lambda set theirs per offer; `size` then asks for one)."""
    rate, hours, source = usd_per_gb_month, hours_per_month, ""
    if rate is None and pricing is not None and pricing.storage_usd_per_gb_month is not None:
        rate = pricing.storage_usd_per_gb_month
        source = f"box {box}'s [box.pricing]" if box else "[box.pricing]"
    if hours is None and pricing is not None and pricing.hours_per_month:
        hours = pricing.hours_per_month
    if hours is None and provider:
        hours = PROVIDER_HOURS_PER_MONTH.get(provider)
    if rate is None and provider == "runpod":
        rate, source = RUNPOD_STOPPED_USD_PER_GB_MONTH, "RunPod's volume rate"
    if rate is not None and hours is None:
        hours = DEFAULT_HOURS_PER_MONTH
    return rate, hours, source


# -- a watched box ----------------------------------------------------------------------

def save_period_of(weights: Iterable[WeightFile]) -> int | None:
    """The save period a run's `epoch_<N>.pt` files show (their greatest common step)."""
    numbers = sorted({w.epoch for w in weights if w.epoch is not None})
    if not numbers:
        return None
    period = 0
    for n in numbers:
        period = math.gcd(period, n)
    return period or None


@dataclass(frozen=True)
class RunProjection:
    """What one running run will still write before it ends."""

    run: str
    root: str
    checkpoint_bytes: int
    save_period: int | None
    save_points_left: int
    more_bytes: int
    guess: str  # what was assumed, in words ("" when nothing was)


def project_run(run: RunState) -> RunProjection | None:
    """The bytes a running run will add: checkpoints still to come, and its logs."""
    if run.health is not Health.RUNNING:
        return None
    total, current = run.total_epochs, run.current_epoch or 0
    if total is None or total <= current:
        return None
    weights = {w.name.rsplit("/", 1)[-1]: w.size for w in run.weights}
    sizes = [size for name, size in weights.items() if name.endswith(".pt") and size > 0]
    if not sizes:
        return None  # no checkpoint yet: nothing to size from
    checkpoint = max(sizes)
    guess = ""
    period = save_period_of(run.weights)
    if period is None:
        if current >= DEFAULT_SAVE_PERIOD:
            period = 0  # past the default period without an epoch file: saving is off
        else:
            period = DEFAULT_SAVE_PERIOD
            guess = f"save period assumed {DEFAULT_SAVE_PERIOD} (LibreYOLO's default)"
    left = (total // period - current // period) if period else 0
    more = checkpoint * left + (total - current) * LOG_BYTES_PER_EPOCH
    missing = sum(1 for name in ("last.pt", "best.pt") if name not in weights)
    more += checkpoint * missing
    return RunProjection(run.name, run.root, checkpoint, period or None, left, more, guess)


@dataclass(frozen=True)
class DiskWarning:
    severity: str  # warning | info
    message: str


@dataclass(frozen=True)
class FsProjection:
    """One runs-root filesystem at the end of the running runs on it."""

    where: str  # `/workspace (/dev/sda1, ext4)`, as DiskRow.where says it
    used: int
    free: int
    need: int  # what the runs on it will still write

    @property
    def fills(self) -> bool:
        return self.need > self.free

    @property
    def end_pct(self) -> int:
        """df's Use% once the runs are done (rounded up as df does; over 100 when the
        runs want more than is free)."""
        room = self.used + self.free
        return math.ceil(100.0 * (self.used + self.need) / room) if room > 0 else 0


@dataclass(frozen=True)
class DiskProjection:
    """Per runs-root filesystem: free now, what the running runs will still write."""

    runs: tuple[RunProjection, ...]
    warnings: tuple[DiskWarning, ...]
    need_bytes: int  # what the runs will still write, all filesystems together
    used_at_end_bytes: int | None  # the box's disk use when they are done (where known)
    filesystems: tuple[FsProjection, ...] = ()  # each filesystem a running run writes to

    @property
    def fills(self) -> tuple[FsProjection, ...]:
        """The filesystems that fill before their runs finish."""
        return tuple(fs for fs in self.filesystems if fs.fills)


def _disk_for(root: str, disks: Sequence[DiskRow]) -> DiskRow | None:
    for disk in disks:
        if disk.root == root:
            return disk
    return None


def project_disk(box: BoxState, *, stopped_usd_per_hr: float | None = None,
                 billed_disk_gb: float | None = None, billed_by: str = "config"
                 ) -> DiskProjection:
    """Whether the box's disks hold its running runs to the end, and, with the box's stopped
    rate, what the part of its disk the runs will never use costs while stopped.

    Roots sharing a filesystem share its free space. The allocation is the runs
    root filesystem's size as the box reports it (a rented box's disk or volume);
    the money needs exactly one such filesystem, the one the stopped rate bills. The size
    the rate bills (`billed_disk_gb`, the config's or the provider's) may differ from it:
    the words then name both figures and whose each is.
    """
    runs = [p for r in box.runs if (p := project_run(r)) is not None]
    warnings: list[DiskWarning] = []
    by_fs: dict[str, tuple[DiskRow, list[RunProjection]]] = {}
    for projection in runs:
        disk = _disk_for(projection.root, box.disks)
        if disk is None and len(box.disks) == 1:
            disk = box.disks[0]  # two roots on one filesystem: the probe reports it once
        if disk is None:
            continue
        key = disk.mount or disk.root
        by_fs.setdefault(key, (disk, []))[1].append(projection)
    filesystems = []
    for disk, projections in by_fs.values():
        need = sum(p.more_bytes for p in projections)
        filesystems.append(FsProjection(disk.where, disk.used, disk.free, need))
        if need > disk.free:
            names = ", ".join(p.run for p in projections)
            warnings.append(DiskWarning("warning", (
                f"{disk.where} will fill before the runs finish: {names} will still write "
                f"about {human_bytes(need)}, {human_bytes(disk.free)} is free; free some "
                "space (old epoch_<N>.pt, pushed first) or lower save_period")))
    need_all = sum(p.more_bytes for p in runs)
    used_end = sum(d.used for d in box.disks) + need_all if box.disks else None
    if stopped_usd_per_hr and len(box.disks) == 1 and used_end is not None:
        allocated_gb = box.disks[0].total / GB
        wanted_gb = used_end * (1 + HEADROOM) / GB
        unused_gb = allocated_gb - wanted_gb
        if allocated_gb >= FAR_ABOVE * wanted_gb and unused_gb >= FAR_ABOVE_MIN_GB:
            rate = stopped_usd_per_hr * unused_gb / allocated_gb
            warnings.append(DiskWarning("info", (
                f"{_allocation_words(allocated_gb, billed_disk_gb, billed_by)} is far "
                f"above what the runs need (about "
                f"{math.ceil(wanted_gb)} GB with 30% headroom): the unused "
                f"{unused_gb:.0f} GB costs ${rate:.4f}/hr while stopped; a disk cannot "
                f"shrink, so size the next box with `gpurent-tui size`")))
    return DiskProjection(tuple(runs), tuple(warnings), need_all, used_end,
                          tuple(filesystems))


def _allocation_words(allocated_gb: float, billed_gb: float | None, billed_by: str) -> str:
    """`the 250 GB disk`, or, where the billed size is another figure, whose each is:
    `the filesystem's 271 GB (the config says disk_gb = 100)`."""
    if billed_gb is None or round(billed_gb) == round(allocated_gb):
        return f"the {allocated_gb:.0f} GB disk"
    said = (f"the config says disk_gb = {billed_gb:g}" if billed_by == "config"
            else f"the provider bills {billed_gb:g} GB")
    return f"the filesystem's {allocated_gb:.0f} GB ({said})"


def projection_document(projection: DiskProjection) -> dict[str, object]:
    """The projection for `status --json`."""
    return {
        "need_bytes": projection.need_bytes,
        "used_at_end_bytes": projection.used_at_end_bytes,
        "warnings": [{"severity": w.severity, "message": w.message}
                     for w in projection.warnings],
        "filesystems": [{"where": fs.where, "need_bytes": fs.need, "free_bytes": fs.free,
                         "used_at_end_pct": fs.end_pct, "fills": fs.fills}
                        for fs in projection.filesystems],
        "runs": [{"run": p.run, "checkpoint_bytes": p.checkpoint_bytes,
                  "save_period": p.save_period, "save_points_left": p.save_points_left,
                  "more_bytes": p.more_bytes, "assumed": p.guess or None}
                 for p in projection.runs],
    }
