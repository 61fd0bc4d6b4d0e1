"""Measure what one LibreYOLO checkpoint weighs, per model, for `gpurent-tui size`.

Needs the train extra (torch, libreyolo 1.6.0); CPU only, a few minutes:

    python tools/measure_checkpoints.py [yolox-s yolo9-c ...]

Each model is trained for real for one epoch on a tiny data set
(tests/support/libreyolo_train.py's), and the size of the `weights/last.pt`
LibreYOLO wrote is printed as a line for CHECKPOINT_BYTES in
tui/model/sizing.py. A checkpoint holds the EMA weights, the training weights,
the optimizer state and metadata, so its size depends on the model and its
optimizer, not on the data or the image size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.libreyolo_train import make_dataset  # noqa: E402

MODELS = ("yolox-n", "yolox-t", "yolox-s", "yolox-m", "yolox-l", "yolox-x",
          "yolo9-t", "yolo9-s", "yolo9-m", "yolo9-c")
CLASSES = {"yolox": "LibreYOLOX", "yolo9": "LibreYOLO9"}

_CHILD = r"""
import json, sys
params = json.loads(sys.argv[1])
import libreyolo
model = getattr(libreyolo, params["cls"])(None, size=params["size"], nb_classes=2, device="cpu")
model.train(data=params["data"], epochs=1, batch=8, imgsz=64, device="cpu", workers=0,
            project=params["project"], name="run", exist_ok=True, pretrained=False,
            amp=False, eval_interval=1, save_period=1)
"""


def measure(model: str, data_yaml: Path, work: Path) -> int:
    family, size = model.split("-")
    project = work / model
    params = {"cls": CLASSES[family], "size": size, "data": str(data_yaml),
              "project": str(project)}
    subprocess.run([sys.executable, "-c", _CHILD, json.dumps(params)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (project / "run" / "weights" / "last.pt").stat().st_size


def main() -> int:
    models = sys.argv[1:] or MODELS
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_yaml = make_dataset(work / "ds")
        for model in models:
            print(f'    "{model}": {measure(model, data_yaml, work)},', flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
