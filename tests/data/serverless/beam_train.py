"""Train a LibreYOLO model on Beam, following the guide's rules (written for gpurent-tui
from them; the guide prints no full script). `gpurent-tui lint` must find nothing here.

Beam's SDK (beam-cloud/beta9): `@function(gpu=..., timeout=..., volumes=[...])`, a
`Volume(name=..., mount_path=...)` (also seen at /volumes/<name>), and an `Image` whose
`commands` run at build time. Beam's Volume has no commit(): what is written under the
mount path is on the volume.

Run it as a deployment, which is what the panel reads (`beam deployment list`; see
docs/serverless-beam.md, "Deployed apps only"):

    beam deploy beam_train.py:train --name libreyolo-train

then invoke the deployed function, and name it `app = "libreyolo-train"` in a
`[[serverless]]` entry of the config. A `beam run` (or a local call of
`train.remote()`) starts tasks of no deployment: the panel reads such an app as
missing.
"""

from beam import Image, Volume, function

MOUNT = "./libreyolo-runs"

image = Image(
    python_version="python3.11",
    python_packages=["torch", "torchvision", "libreyolo"],
    commands=["apt-get update && apt-get install -y libgl1 libglib2.0-0"],
    env_vars=[f"HF_HOME={MOUNT}/hf"],
)


@function(gpu="A100-40", image=image, timeout=6 * 3600,
          volumes=[Volume(name="libreyolo-runs", mount_path=MOUNT)])
def train(epochs: int = 100):
    from libreyolo import LibreYOLO

    model = LibreYOLO("yolox-s.pt")
    model.train(data=f"{MOUNT}/data/data.yaml", epochs=epochs, batch=32, imgsz=640,
                device="0", project=f"{MOUNT}/runs", name="run1", exist_ok=True)
