"""Train real, tiny LibreYOLO runs on the CPU for tests.

``make_dataset`` writes a small YOLO-format data set with Pillow and
``start_training`` trains a real LibreYOLO model on it in a child process, so
tests read run directories written by LibreYOLO itself (status.json,
metrics.jsonl, train.log, weights/). Nothing is downloaded: models are built
from scratch (no pretrained weights).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

CLASS_NAMES = ("red_box", "blue_box")
CLASS_COLOURS = ((220, 40, 40), (40, 60, 220))

FAMILIES = {
    "yolox": ("LibreYOLOX", "n"),
    "yolo9": ("LibreYOLO9", "t"),
}

# Runs in the child process; the parameters come in as one JSON argument.
_CHILD_SCRIPT = r"""
import json
import sys

params = json.loads(sys.argv[1])
fail_at = params["fail_at_epoch"]
if fail_at is not None:
    from libreyolo.training.trainer import BaseTrainer

    original_train_epoch = BaseTrainer._train_epoch

    def _train_epoch(self, epoch, *args, **kwargs):
        # ``epoch`` counts from 0; status.json and metrics.jsonl from 1.
        if epoch + 1 == fail_at:
            raise RuntimeError(f"injected failure at epoch {fail_at}")
        return original_train_epoch(self, epoch, *args, **kwargs)

    BaseTrainer._train_epoch = _train_epoch

import libreyolo

model_class = getattr(libreyolo, params["model_class"])
model = model_class(None, size=params["size"], nb_classes=2, device="cpu")
model.train(
    data=params["data"],
    epochs=params["epochs"],
    batch=8,
    imgsz=64,
    device="cpu",
    workers=0,
    project=params["project"],
    name=params["name"],
    exist_ok=True,
    pretrained=False,
    amp=False,
    eval_interval=params["eval_interval"],
    save_period=params["save_period"],
)
"""


def _draw_image(rng: random.Random, size: int) -> tuple[Any, list[str]]:
    """Draw one image of 1-3 coloured rectangles and return it with its label lines."""
    from PIL import Image, ImageDraw

    background = tuple(rng.randint(150, 255) for _ in range(3))
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    lines = []
    for _ in range(rng.randint(1, 3)):
        cls = rng.randrange(len(CLASS_NAMES))
        w = rng.randint(size // 6, size // 2)
        h = rng.randint(size // 6, size // 2)
        x0 = rng.randint(0, size - w)
        y0 = rng.randint(0, size - h)
        draw.rectangle((x0, y0, x0 + w - 1, y0 + h - 1), fill=CLASS_COLOURS[cls])
        cx, cy = (x0 + w / 2) / size, (y0 + h / 2) / size
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {w / size:.6f} {h / size:.6f}")
    return image, lines


def make_dataset(directory: Path, n_train: int = 16, n_val: int = 8, size: int = 64) -> Path:
    """Write a tiny seeded YOLO-format data set (2 classes) and return its data.yaml."""
    directory = Path(directory)
    rng = random.Random(20261202)
    for split, count in (("train", n_train), ("val", n_val)):
        images = directory / "images" / split
        labels = directory / "labels" / split
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image, lines = _draw_image(rng, size)
            image.save(images / f"{split}_{i:03d}.jpg", quality=95)
            (labels / f"{split}_{i:03d}.txt").write_text("\n".join(lines) + "\n")
    data_yaml = directory / "data.yaml"
    names = "\n".join(f"  {i}: {name}" for i, name in enumerate(CLASS_NAMES))
    data_yaml.write_text(
        f"path: {directory.resolve()}\n"
        "train: images/train\n"
        "val: images/val\n"
        f"nc: {len(CLASS_NAMES)}\n"
        f"names:\n{names}\n"
    )
    return data_yaml


def start_training(
    runs_root: Path,
    name: str,
    data_yaml: Path,
    *,
    epochs: int,
    family: str = "yolox",
    fail_at_epoch: int | None = None,
    log_path: Path | None = None,
    eval_interval: int = 1,
    save_period: int = 2,
) -> subprocess.Popen:
    """Start a real CPU LibreYOLO training process writing into ``runs_root/name``.

    The returned process is the training process itself (its pid is the one
    status.json records). ``fail_at_epoch=N`` makes LibreYOLO's trainer raise
    ``RuntimeError("injected failure at epoch N")`` when epoch N starts, after
    N-1 finished epochs, so LibreYOLO writes ``state: failed`` itself. The
    child's output goes to ``log_path`` (or is discarded).
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {sorted(FAMILIES)}")
    model_class, size = FAMILIES[family]
    params = {
        "model_class": model_class,
        "size": size,
        "data": str(Path(data_yaml).resolve()),
        "epochs": epochs,
        "project": str(Path(runs_root).resolve()),
        "name": name,
        "fail_at_epoch": fail_at_epoch,
        "eval_interval": eval_interval,
        "save_period": save_period,
    }
    command = [sys.executable, "-c", _CHILD_SCRIPT, json.dumps(params)]
    if log_path is None:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )


def wait_for(predicate: Callable[[], T], timeout: float = 120.0, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it is truthy and return its value; TimeoutError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(interval)


def read_status(run_dir: Path) -> dict[str, Any] | None:
    """Return a run's parsed status.json, or None while it is missing or unreadable."""
    try:
        return json.loads((Path(run_dir) / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def wait_for_state(
    run_dir: Path, states: tuple[str, ...] = ("completed", "failed"), timeout: float = 180.0
) -> dict[str, Any]:
    """Wait until the run's status.json reports one of ``states``; return that status."""

    def check() -> dict[str, Any] | None:
        status = read_status(run_dir)
        return status if status and status.get("state") in states else None

    return wait_for(check, timeout=timeout, interval=0.1)
