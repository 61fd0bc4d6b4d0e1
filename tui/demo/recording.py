"""Recorded LibreYOLO runs, shipped as text in tui/demo_data, that the demo replays.

A recording is what one real run wrote (metrics.jsonl, train.log, the
configs, results.csv) plus every status.json LibreYOLO wrote, each with the
train.log and results.csv offsets and the weights listing at that moment, so
a replay can rebuild the run directory as a reader saw it at every step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any, Literal

# The recordings shipped in tui/demo_data (see its README.md).
YOLOX_40 = "yolox-n-40e"
YOLO9_25 = "yolo9-t-25e"
YOLOX_FAILED = "yolox-n-12e-failed"
RECORDINGS = (YOLOX_40, YOLO9_25, YOLOX_FAILED)
# Files copied verbatim (paths substituted) when a phase first lists them.
TEXT_FILES = ("train_config.yaml", "val/config.yaml")


@dataclass(frozen=True)
class Phase:
    """One status.json write of the recorded run, and what the directory held then."""

    kind: Literal["start", "epoch", "completed", "failed"]
    epoch: int | None
    t: float  # seconds after the start phase, as recorded
    log: int  # train.log bytes
    results: int | None  # results.csv bytes (families that write it)
    weights: tuple[str, ...]
    files: tuple[str, ...]  # other files present: train_config.yaml, val/config.yaml, ...
    status: Mapping[str, Any]


@dataclass(frozen=True)
class Recording:
    """One recorded run; the paths are those it was recorded under (replaced on replay)."""

    key: str
    name: str
    save_dir: str
    project: str
    data_dir: str
    phases: tuple[Phase, ...]
    metrics_lines: tuple[str, ...]
    log: bytes
    results_csv: bytes | None
    texts: Mapping[str, str]
    summary_template: Mapping[str, Any] | None

    @cached_property
    def rows(self) -> tuple[dict[str, Any], ...]:
        return tuple(json.loads(line) for line in self.metrics_lines)

    @property
    def epoch_times(self) -> tuple[float, ...]:
        return tuple(float(r["time"]) for r in self.rows)

    @property
    def total_epochs(self) -> int:
        return int(self.phases[0].status["total_epochs"])

    @property
    def outcome(self) -> str:
        return self.phases[-1].kind

    def phase_of_epoch(self, epoch: int) -> int:
        """Index of the phase written right after `epoch` finished."""
        for index, phase in enumerate(self.phases):
            if phase.kind == "epoch" and phase.epoch == epoch:
                return index
        raise ValueError(f"recording {self.key} has no epoch {epoch}")


def recording_from_files(key: str, read: Any) -> Recording:
    """Build a Recording from `read(relative_path) -> bytes | None` (package data or a dir)."""
    capture = json.loads(read("capture.json"))
    statuses = [json.loads(line) for line in read("status.jsonl").decode().splitlines()]
    phases = tuple(
        Phase(kind=p["kind"], epoch=p.get("epoch"), t=float(p["t"]), log=int(p["log"]),
              results=p.get("results"), weights=tuple(p["weights"]), files=tuple(p["files"]),
              status=status)
        for p, status in zip(capture["phases"], statuses, strict=True))
    texts = {}
    for name in TEXT_FILES:
        data = read(name)
        if data is not None:
            texts[name] = data.decode()
    return Recording(
        key=key, name=capture["name"], save_dir=capture["save_dir"],
        project=capture["project"], data_dir=capture["data_dir"], phases=phases,
        metrics_lines=tuple(read("metrics.jsonl").decode().splitlines()),
        log=read("train.log"), results_csv=read("results.csv"), texts=texts,
        summary_template=capture.get("summary_template"))


@cache
def load_recording(key: str) -> Recording:
    """A recording shipped in the package (read once per process)."""
    base = resources.files("tui").joinpath("demo_data", key)

    def read(name: str) -> bytes | None:
        path = base.joinpath(*name.split("/"))
        return path.read_bytes() if path.is_file() else None

    return recording_from_files(key, read)
