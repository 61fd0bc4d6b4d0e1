"""The right-size verdict: which box trains a model cheapest per image, from measurements.

Pure. A measurement is one box's measured throughput for one model at one image size
(its GPU, the rate it was billed, images a second, dollars per 1k images), kept by the
store (tui/store/throughput.py) for every box this user ran. Boxes are compared only
on what was measured on them, for the same model and image size: no table of GPUs
the user never ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tui.model.fields import finite, text, whole
from tui.model.text import clean
from tui.model.throughput import unit_usd

MAX_NAME = 60


@dataclass(frozen=True)
class Measured:
    """One box's measured cost of training one model at one image size."""

    box: str
    gpu: str                # "NVIDIA H200", "2x RTX 4090", "no GPU"
    model: str              # "yolox-n"
    imgsz: int
    batch: int | None
    usd_per_hr: float       # the box's billed running rate
    images_per_second: float
    usd_per_1k_images: float
    at: float               # when it was measured (this machine's clock)

    @property
    def key(self) -> tuple[str, str, str, int]:
        return self.box, self.gpu, self.model, self.imgsz

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "box": self.box, "gpu": self.gpu, "model": self.model,
                "imgsz": self.imgsz, "batch": self.batch,
                "usd_per_hr": round(self.usd_per_hr, 6),
                "images_per_second": round(self.images_per_second, 3),
                "usd_per_1k_images": round(self.usd_per_1k_images, 6), "at": round(self.at, 3)}


def parse_measured(record: Mapping[str, Any]) -> Measured | None:
    """A stored line as a measurement; None for anything not whole and sane."""
    if record.get("v") != 1:
        return None
    names = [text(record.get(k)) for k in ("box", "gpu", "model")]
    imgsz, batch = whole(record.get("imgsz")), whole(record.get("batch"))
    rate, speed, per_1k, at = (finite(record.get(k)) for k in
                               ("usd_per_hr", "images_per_second", "usd_per_1k_images", "at"))
    if any(not n for n in names) or imgsz is None or not 0 < imgsz < 100000 \
            or rate is None or speed is None or per_1k is None or at is None \
            or rate < 0 or speed <= 0 or per_1k < 0:
        return None
    box, gpu, model = (clean(str(n))[:MAX_NAME] for n in names)
    return Measured(box, gpu, model, imgsz, batch if batch and batch > 0 else None,
                    rate, speed, per_1k, at)


def gpu_words(names: Iterable[str]) -> str:
    """The box's GPUs in a few words: "NVIDIA H200", "2x RTX 4090", "no GPU"."""
    listed = [n.strip() for n in names if n.strip()]
    if not listed:
        return "no GPU"
    first = listed[0][:MAX_NAME]
    return first if len(listed) == 1 else f"{len(listed)}x {first}"


def newest(measured: Iterable[Measured]) -> list[Measured]:
    """The newest measurement per (box, GPU, model, image size)."""
    latest: dict[tuple[str, str, str, int], Measured] = {}
    for m in measured:
        held = latest.get(m.key)
        if held is None or m.at >= held.at:
            latest[m.key] = m
    return list(latest.values())


@dataclass(frozen=True)
class Verdict:
    """The comparison for one model and image size, cheapest first, and it in words."""

    model: str
    imgsz: int
    ranked: tuple[Measured, ...]
    words: str


def _who(m: Measured) -> str:
    return f"box {m.box} (no GPU)" if m.gpu == "no GPU" else f"the {m.gpu} box ({m.box})"


def verdict(measured: Iterable[Measured], model: str, imgsz: int) -> Verdict:
    """Compare every box measured on `model` at `imgsz` by $ per 1k images."""
    ranked = tuple(sorted((m for m in newest(measured) if m.model == model
                           and m.imgsz == imgsz), key=lambda m: m.usd_per_1k_images))
    what = f"{model} at {imgsz} px"
    if not ranked:
        return Verdict(model, imgsz, ranked, f"no box measured on {what} yet: train it on "
                       "two boxes (a few epochs each) to compare them")
    if len(ranked) == 1:
        only = ranked[0]
        return Verdict(model, imgsz, ranked, (
            f"{_who(only)} does {what} at {unit_usd(only.usd_per_1k_images)} / 1k images; "
            "only one box measured: train a few epochs of it on another box to compare"))
    best, worst = ranked[0], ranked[-1]
    if best.usd_per_1k_images <= 0 or worst.usd_per_1k_images <= best.usd_per_1k_images:
        return Verdict(model, imgsz, ranked, (
            f"{_who(best)} and {_who(worst)} do {what} at the same "
            f"{unit_usd(best.usd_per_1k_images)} / 1k images"))
    times = worst.usd_per_1k_images / best.usd_per_1k_images
    return Verdict(model, imgsz, ranked, (
        f"{_who(best)} does {what} at {unit_usd(best.usd_per_1k_images)} / 1k images, "
        f"{_who(worst)} at {unit_usd(worst.usd_per_1k_images)}: {times:.1f}x cheaper per epoch"))


def verdicts(measured: Iterable[Measured]) -> list[Verdict]:
    """One verdict per model and image size measured, those with most boxes first."""
    kept = newest(measured)
    groups = sorted({(m.model, m.imgsz) for m in kept})
    found = [verdict(kept, model, imgsz) for model, imgsz in groups]
    return sorted(found, key=lambda v: -len(v.ranked))


def verdict_document(found: list[Verdict]) -> list[dict[str, Any]]:
    """The verdicts for a JSON document (`costs --json`'s `right_size`)."""
    return [{"model": v.model, "imgsz": v.imgsz, "verdict": v.words,
             "boxes": [m.to_json() for m in v.ranked]} for v in found]


def model_name(status: Mapping[str, Any] | None) -> str | None:
    """LibreYOLO's model as its CLI spells it ("yolox-n") from status.json."""
    if status is None:
        return None
    family, size = text(status.get("model_family")), text(status.get("model_size"))
    if not family or not size:
        return None
    return clean(f"{family}-{size}")[:MAX_NAME]


def measure(box: str, gpus: Iterable[str], status: Mapping[str, Any] | None,
            imgsz: int | None, batch: int | None, images_per_second: float | None,
            usd_per_1k_images: float | None, usd_per_hr: float | None,
            now: float) -> Measured | None:
    """A run's measurement on its box, when everything it needs was measured."""
    model = model_name(status)
    if model is None or imgsz is None or images_per_second is None \
            or usd_per_1k_images is None or usd_per_hr is None or images_per_second <= 0:
        return None
    return Measured(box, gpu_words(gpus), model, imgsz, batch, usd_per_hr,
                    images_per_second, usd_per_1k_images, now)


def right_size_text(found: list[Verdict]) -> str:
    """The verdicts for `costs`: a heading, one paragraph per model and image size, and
    each box measured on it (cheapest first)."""
    lines = ["Right-size (measured $ per 1k training images, same model and image size):"]
    if not found:
        lines.append("  nothing measured yet: a run needs a finished epoch, a counted data "
                     "set and a billed rate; train on two boxes to compare them")
    for v in found:
        lines.append(f"  {v.words}")
        lines.extend(f"    {m.box:<16} {m.gpu[:24]:<24} ${m.usd_per_hr:.3f}/hr "
                     f"{m.images_per_second:>8.1f} img/s  {unit_usd(m.usd_per_1k_images)}/1k"
                     + (f"  batch {m.batch}" if m.batch else "") for m in v.ranked)
    return "\n".join(lines)
