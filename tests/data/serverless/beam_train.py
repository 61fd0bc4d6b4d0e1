"""Train a LibreYOLO model on Beam, following the guide's rules (written for gpurent-tui
from them; the guide prints no full script). `gpurent-tui lint` must find nothing here.

Beam's SDK (beam-cloud/beta9): `@function(gpu=..., timeout=..., volumes=[...])`, a
`Volume(name=..., mount_path=...)` (also seen at /volumes/<name>), and an `Image` whose
`commands` run at build time. Beam's Volume has no commit(): what is written under the
mount path is on the volume.

Run: python beam_train.py
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


if __name__ == "__main__":
    train.remote()
