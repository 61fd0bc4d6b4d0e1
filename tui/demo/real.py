"""`demo --real`: one demo box also trains a real, tiny LibreYOLO model on the CPU.

The run is LibreYOLO's own, in a child process, on a small data set of
coloured rectangles drawn here with Pillow; nothing is downloaded (the model
starts from scratch). Needs the train extra: pip install -e '.[train]'.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

NEEDS = ("libreyolo", "torch", "PIL")
RUN_NAME = "real-yolox-n-cpu"
CLASS_NAMES = ("red_box", "blue_box")
CLASS_COLOURS = ((220, 40, 40), (40, 60, 220))

# The training process: parameters come in as one JSON argument.
_CHILD = r"""
import json, sys
params = json.loads(sys.argv[1])
from libreyolo import LibreYOLOX
model = LibreYOLOX(None, size="n", nb_classes=2, device="cpu")
model.train(data=params["data"], epochs=params["epochs"], batch=8, imgsz=64, device="cpu",
            workers=0, project=params["project"], name=params["name"], exist_ok=True,
            pretrained=False, amp=False, eval_interval=params["eval_interval"],
            save_period=params["save_period"])
"""


def real_training_problem() -> str | None:
    """Why `--real` cannot run here, or None when it can."""
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return ("gpurent-tui demo --real trains a real LibreYOLO model on the CPU and needs "
            f"LibreYOLO and torch (missing: {', '.join(missing)}). "
            "Install them with: pip install -e '.[train]'")


def _draw(rng: random.Random, size: int) -> tuple[Any, list[str]]:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), tuple(rng.randint(150, 255) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    labels = []
    for _ in range(rng.randint(1, 3)):
        cls = rng.randrange(len(CLASS_NAMES))
        w, h = rng.randint(size // 6, size // 2), rng.randint(size // 6, size // 2)
        x0, y0 = rng.randint(0, size - w), rng.randint(0, size - h)
        draw.rectangle((x0, y0, x0 + w - 1, y0 + h - 1), fill=CLASS_COLOURS[cls])
        labels.append(f"{cls} {(x0 + w / 2) / size:.6f} {(y0 + h / 2) / size:.6f} "
                      f"{w / size:.6f} {h / size:.6f}")
    return image, labels


def make_dataset(directory: Path, n_train: int = 32, n_val: int = 8, size: int = 64) -> Path:
    """A tiny seeded YOLO-format data set (2 classes); returns its data.yaml."""
    rng = random.Random(20261202)
    for split, count in (("train", n_train), ("val", n_val)):
        (directory / "images" / split).mkdir(parents=True, exist_ok=True)
        (directory / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image, labels = _draw(rng, size)
            image.save(directory / "images" / split / f"{split}_{i:03d}.jpg", quality=95)
            (directory / "labels" / split / f"{split}_{i:03d}.txt").write_text(
                "\n".join(labels) + "\n")
    names = "\n".join(f"  {i}: {name}" for i, name in enumerate(CLASS_NAMES))
    data_yaml = directory / "data.yaml"
    data_yaml.write_text(f"path: {directory.resolve()}\ntrain: images/train\nval: images/val\n"
                         f"nc: {len(CLASS_NAMES)}\nnames:\n{names}\n")
    return data_yaml


def _die_with_parent() -> None:
    """Linux: the trainer gets SIGTERM if the demo dies without cleaning up (kill -9)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RealTraining:
    """The training process of `demo --real`; stop() kills it and waits for it."""

    def __init__(self, runs_root: Path, data_dir: Path, log_path: Path, *, epochs: int = 60,
                 eval_interval: int = 5, save_period: int = 20) -> None:
        self.runs_root = runs_root
        self.data_dir = data_dir
        self.log_path = log_path
        self.params = {"epochs": epochs, "eval_interval": eval_interval,
                       "save_period": save_period, "project": str(runs_root), "name": RUN_NAME}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def run_dir(self) -> Path:
        return self.runs_root / RUN_NAME

    def prepare(self) -> None:
        """Draw the data set (a second or so; fine in a worker thread)."""
        make_dataset(self.data_dir)

    def start(self) -> None:
        """Start training; call from the main thread (the child dies with its starting thread)."""
        params = {**self.params, "data": str(self.data_dir / "data.yaml")}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, json.dumps(params)], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.wait()
