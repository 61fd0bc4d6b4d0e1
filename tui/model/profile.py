"""`profile`: LibreYOLO's measured figures for a few steps, checked, and what they are worth.

Pure: what a box sent for each profiled cell (batch x workers) is type- and
range-checked here (a box may send anything), and turned into our own advice
from the measured figures (dataload share, GPU busy, img/s) and the box's
rate. LibreYOLO's `bound` is shown as LibreYOLO's: on an H200 it said
`memory-pressure` for a step the GPU was busy 27 ms of 220, so the advice never
rests on it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.model.text import clean

MAX_CELLS = 12
GRID_KEYS = ("workers", "batch")
DATALOAD_BOUND = 0.3  # waiting on the loader for this share of a step: the loader limits
GPU_UNDERUSED = 0.3  # the GPU busy under this share of a step, the loader not at fault
LIMITS: dict[str, tuple[float, float]] = {  # what a real profile can hold, per field
    "img_per_s": (0.0, 1e6), "step_ms": (0.0, 1e7), "dataload_ms": (0.0, 1e7),
    "dataload_frac": (0.0, 1.0), "gpu_util": (0.0, 1.0),
    "gpu_busy_ms_per_step": (0.0, 1e7), "mean_kernel_us": (0.0, 1e9),
    "kernels_per_step": (0.0, 1e9), "peak_vram_mb": (0.0, 1e8),
    "cuda_mallocs_per_step": (0.0, 1e9), "host_overhead_ms_per_step": (0.0, 1e7),
}


class ProfileError(ValueError):
    """A bad `--try` grid or setting: a usage error, nothing was run."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One measured setting. Figures a box sent out of range are None, never guessed."""

    batch: int
    workers: int
    img_per_s: float | None = None
    dataload_frac: float | None = None
    gpu_util: float | None = None
    step_ms: float | None = None
    gpu_busy_ms_per_step: float | None = None
    bound: str | None = None  # LibreYOLO's own verdict, cleaned
    bound_why: str | None = None
    problem: str | None = None  # why this cell has no figures (its run failed)
    dropped: tuple[str, ...] = ()  # fields the box sent that were not believed

    @property
    def measured(self) -> bool:
        return self.problem is None and self.img_per_s is not None and self.img_per_s > 0


@dataclass
class ProfileReport:
    """What one `profile` did on a box: refused, failed, or each cell and the verdict."""

    box: str
    outcome: str  # done | failed | refused
    message: str = ""
    run: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    cells: list[Cell] = field(default_factory=list)
    cpus: int | None = None
    usd_per_hr: float | None = None
    verdict: str = ""
    beside: str = ""  # the training runs it was measured beside, on other GPUs


@dataclass
class ProfileRequest:
    """What the user asked; None means: the run's setting, else LibreYOLO's default."""

    data: str | None = None
    weights: str | None = None
    size: str | None = None
    batch: int | None = None
    imgsz: int | None = None
    workers: int | None = None
    device: str | None = None
    steps: int = 10
    warmup: int = 3
    grid: Sequence[str] = ()
    run: str | None = None
    force: bool = False


def check_steps(steps: int, warmup: int) -> None:
    """A few steps: enough to measure, never a training run in disguise."""
    if not 1 <= steps <= 500 or not 0 <= warmup <= 100:
        raise ProfileError(f"--steps {steps} --warmup {warmup}: steps 1..500, warmup 0..100")


def parse_grid(items: Sequence[str], batch: int, workers: int) -> list[tuple[int, int]]:
    """`--try workers=1,8,12 batch=16,64` as (batch, workers) cells, in order; the
    settings not named stay as given."""
    values: dict[str, list[int]] = {"batch": [batch], "workers": [workers]}
    for item in items:
        key, sep, rest = item.partition("=")
        if not sep or key not in GRID_KEYS:
            raise ProfileError(f"--try {item!r}: write KEY=V,V,... with KEY one of "
                               f"{', '.join(GRID_KEYS)}")
        try:
            numbers = [int(v) for v in rest.split(",") if v.strip()]
        except ValueError:
            raise ProfileError(f"--try {item!r}: the values must be whole numbers") from None
        low = 1 if key == "batch" else 0
        if not numbers or any(n < low or n > 4096 for n in numbers):
            raise ProfileError(f"--try {item!r}: each {key} must be {low}..4096")
        values[key] = list(dict.fromkeys(numbers))
    cells = list(itertools.product(values["batch"], values["workers"]))
    if len(cells) > MAX_CELLS:
        raise ProfileError(f"--try makes {len(cells)} settings; at most {MAX_CELLS} "
                           "(each is a short training run)")
    return cells


def _number(value: Any, key: str, dropped: list[str]) -> float | None:
    if value is None:
        return None
    low, high = LIMITS[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or not low <= value <= high:
        dropped.append(key)
        return None
    return float(value)


def _text(value: Any, cap: int) -> str | None:
    return clean(value)[:cap] if isinstance(value, str) and value.strip() else None


def parse_cell(raw: Any, batch: int, workers: int) -> Cell:
    """One `cell-N` part from the box: its rc, LibreYOLO's --json answer and the scalar
    fields of profile.json. Anything malformed is dropped and said."""
    if not isinstance(raw, Mapping):
        return Cell(batch, workers, problem="the box sent no result for this setting")
    profile = raw.get("profile") if isinstance(raw.get("profile"), Mapping) else None
    cli = raw.get("cli") if isinstance(raw.get("cli"), Mapping) else None
    if profile is None:
        err = raw.get("err")
        err = err if isinstance(err, str) else ""
        last = next((clean(line)[:300] for line in reversed(err.splitlines())
                     if line.strip()), "")
        why = ("it ran past its time" if raw.get("timeout") else
               f"libreyolo profile run exited {raw.get('rc')!s:.10} without a profile.json")
        return Cell(batch, workers, problem=why + (f": {last}" if last else ""))
    dropped: list[str] = []
    figures = {key: _number(profile.get(key), key, dropped)
               for key in ("img_per_s", "dataload_frac", "gpu_util", "step_ms",
                           "gpu_busy_ms_per_step")}
    if figures["img_per_s"] is None and cli is not None:  # the --json answer has it too
        figures["img_per_s"] = _number(cli.get("img_per_s"), "img_per_s", dropped)
    return Cell(batch, workers, img_per_s=figures["img_per_s"],
                dataload_frac=figures["dataload_frac"], gpu_util=figures["gpu_util"],
                step_ms=figures["step_ms"],
                gpu_busy_ms_per_step=figures["gpu_busy_ms_per_step"],
                bound=_text(profile.get("bound"), 40),
                bound_why=_text(profile.get("bound_why"), 300), dropped=tuple(dropped))


def usd_per_1k_images(usd_per_hr: float | None, img_per_s: float | None) -> float | None:
    """What 1,000 images of training cost at this rate and throughput."""
    if usd_per_hr is None or img_per_s is None or img_per_s <= 0:
        return None
    return usd_per_hr / (img_per_s * 3.6)


def best_cell(cells: Sequence[Cell]) -> Cell | None:
    """The measured cell with the most images per second (per dollar, at one rate)."""
    measured = [c for c in cells if c.measured]
    return max(measured, key=lambda c: c.img_per_s or 0.0) if measured else None


def _money(value: float | None) -> str:
    return "$?" if value is None else f"${value:.3f}"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value * 100:.0f}%"


def reading(cell: Cell) -> str:
    """Our own name for what limits the step, from the measured figures."""
    if cell.dataload_frac is not None and cell.dataload_frac >= DATALOAD_BOUND:
        return "dataloader-bound"
    if cell.gpu_util is not None and cell.gpu_util < GPU_UNDERUSED:
        return "host / launch-bound"
    if cell.gpu_util is not None:
        return "GPU-bound"
    return "unknown"


def workers_cover_cores(cpus: int | None, workers: int) -> bool:
    """The loader workers already have every core but the training loop's own: more
    workers would only queue for the same cores."""
    return cpus is not None and cpus >= 1 and workers >= cpus - 1


def suggested_workers(cpus: int | None, workers: int) -> int | None:
    """More loader workers to try for a dataloader-bound step, always more than the
    `workers` measured; None when the workers already cover the cores.

    Three quarters of the cores, at most 16 (enough loaders, cores left for the
    training loop); where that is not more than now, twice the workers; never past
    one less than the cores. Cores unknown: twice the workers, at least 8."""
    if cpus is None or cpus < 1:
        return max(8, workers * 2)
    if workers_cover_cores(cpus, workers):
        return None
    return max(min(16, cpus * 3 // 4), min(cpus - 1, max(1, workers * 2)))


# What helps a step starved of data once more workers do not: each image costs the
# loader less, or the box has more cores for it. (Faster storage is not said: the
# figures do not tell reading from decoding; nor a bigger batch: a step's images
# cost the loader the same, and on the H200 batch 128 fed slower than 16.)
LESS_PER_IMAGE = "less loader work per image (images stored near the training size, " \
    "lighter augmentation)"


def _feeding(workers: int, cpus: int | None) -> str:
    if cpus is None:
        return f"{workers} loader workers feeding"
    if workers <= cpus:
        return f"{workers} of {cpus} cores feeding"
    return f"{workers} loader workers on {cpus} cores feeding"


def _loader_advice(cells: Sequence[Cell], start: Cell, cpus: int | None) -> str:
    """For a dataloader-bound step no measured setting beat: more workers where the
    cores allow and no setting with more was measured; else what else would help."""
    if workers_cover_cores(cpus, start.workers):
        return (f"the workers already cover the box's {cpus} core{'s' * (cpus != 1)}, so "
                f"more buy nothing; {LESS_PER_IMAGE} or a box with more cores per GPU "
                "would help")
    tried = [c for c in cells if c.measured and c.batch == start.batch
             and c.workers > start.workers]
    if tried:
        most = max(tried, key=lambda c: c.workers)
        return (f"more workers measured little or no gain (--workers {most.workers}: "
                f"{most.img_per_s:.0f} img/s against {start.img_per_s:.0f}); "
                f"{LESS_PER_IMAGE} would help")
    return (f"try --workers {suggested_workers(cpus, start.workers)} "
            "(--try workers=... measures it)")


def verdict(cells: Sequence[Cell], first: tuple[int, int], cpus: int | None,
            usd_per_hr: float | None, *, on_cpu: bool = False) -> str:
    """What to do and what it is worth, from the cell of the given setting (`first`,
    the run's or the flags') and, when a grid was tried, the best measured cell."""
    start = next((c for c in cells if (c.batch, c.workers) == first and c.measured), None)
    start = start or best_cell(cells)
    if start is None:
        return "no setting was measured: nothing to advise"
    best = best_cell(cells)
    kind = reading(start)
    cost = usd_per_1k_images(usd_per_hr, start.img_per_s)

    def gain(to: Cell) -> str:
        return (f"measured: {start.img_per_s:.0f} → {to.img_per_s:.0f} img/s, "
                f"{_money(cost)} → {_money(usd_per_1k_images(usd_per_hr, to.img_per_s))} "
                "per 1k images")

    better = best if best is not None and best is not start and \
        (best.img_per_s or 0) > (start.img_per_s or 0) * 1.05 else None
    change = ""
    if better is not None:
        flags = [f"--workers {better.workers}"] if better.workers != start.workers else []
        flags += [f"--batch {better.batch}"] if better.batch != start.batch else []
        change = f"try {' '.join(flags)} ({gain(better)})"
    if kind == "dataloader-bound":
        advice = change or _loader_advice(cells, start, cpus)
        return (f"dataloader-bound: {_feeding(start.workers, cpus)}, "
                f"{_pct(start.dataload_frac)} of each step waits on data; {advice}; "
                "a faster GPU buys nothing")
    if on_cpu:  # no GPU in the step: its busy share says nothing
        return "profiled on the CPU, so no GPU was measured" + (f"; {change}" if change else "")
    if kind == "host / launch-bound":
        advice = change or "try a bigger --batch (--try batch=... measures it)"
        return (f"host / launch-bound: the GPU is busy {_pct(start.gpu_util)} of each step; "
                f"{advice}; a cheaper, slower GPU may cost less per epoch")
    if kind == "GPU-bound":
        return (f"GPU-bound: the GPU is busy {_pct(start.gpu_util)} of each step; "
                + (change or "a faster GPU would help") + "")
    return "the figures do not say what limits the step" + (f"; {change}" if change else "")


def table_rows(cells: Sequence[Cell], usd_per_hr: float | None) -> list[list[str]]:
    """batch, workers, img/s, dataload %, GPU busy, $/1k images, LibreYOLO's bound."""
    rows = []
    for c in cells:
        if not c.measured:
            rows.append([str(c.batch), str(c.workers), "-", "-", "-", "-",
                         (c.problem or "no figures")[:60]])
            continue
        rows.append([str(c.batch), str(c.workers), f"{c.img_per_s:.1f}",
                     _pct(c.dataload_frac), _pct(c.gpu_util),
                     _money(usd_per_1k_images(usd_per_hr, c.img_per_s)), c.bound or "?"])
    return rows


def model_size(model: str) -> str:
    """`--model yolox-n` or `n`: the size variant LibreYOLO's `--size` takes."""
    size = model.rsplit("-", 1)[-1].strip()
    if not size or not size.isalnum() or len(size) > 8:
        raise ProfileError(f"--model {model!r}: give a size variant such as n, s, t "
                           "(or yolox-n)")
    return size


def run_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """A run's train_config.yaml scalars (as text from the box), checked: the ones that
    read as a sane setting, by profile's own names."""
    out: dict[str, Any] = {}
    for key, low, high in (("batch", 1, 4096), ("workers", 0, 4096), ("imgsz", 8, 8192)):
        raw = values.get(key)
        if isinstance(raw, str) and raw.isdigit() and low <= int(raw) <= high:
            out[key] = int(raw)
    for key in ("device", "size", "data"):
        raw = values.get(key)
        if isinstance(raw, str) and raw and clean(raw) == raw and len(raw) <= 1000:
            out[key] = raw
    return out


_TEXT_OPTIONS = {"--data": "data", "--weights": "weights", "--device": "device"}
_INT_OPTIONS = {"--batch": "batch", "--imgsz": "imgsz", "--workers": "workers",
                "--steps": "steps", "--warmup": "warmup"}


def parse_options(text: str, run: str | None) -> ProfileRequest:
    """The panel's profile field, written as the command's options (`--try workers=1,8
    --force`, `--data D --weights W`): the request, or ProfileError saying what is wrong."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ProfileError(f"cannot read the options: {exc}") from None
    request = ProfileRequest(run=run)
    grid: list[str] = []
    at = 0
    while at < len(words):
        word = words[at]
        if word == "--force":
            request.force = True
        elif word == "--try":
            while at + 1 < len(words) and not words[at + 1].startswith("--"):
                at += 1
                grid.append(words[at])
        elif word in _TEXT_OPTIONS or word in _INT_OPTIONS or word == "--model":
            if at + 1 >= len(words):
                raise ProfileError(f"{word} needs a value")
            at += 1
            value = words[at]
            if word == "--model":
                request.size = model_size(value)
            elif word in _TEXT_OPTIONS:
                setattr(request, _TEXT_OPTIONS[word], value)
            else:
                if not value.isdigit():
                    raise ProfileError(f"{word} {value!r}: a whole number")
                setattr(request, _INT_OPTIONS[word], int(value))
        else:
            raise ProfileError(f"{word!r} is not a profile option (--data --weights --model "
                               "--batch --imgsz --workers --device --steps --try --force)")
        at += 1
    request.grid = tuple(grid)
    check_steps(request.steps, request.warmup)
    parse_grid(request.grid, request.batch or 16, request.workers or 8)
    if run is None and (request.data is None or request.weights is None):
        raise ProfileError("give --data YAML and --weights PT (paths on the box), or open "
                           "it from a run to use the run's settings")
    return request
