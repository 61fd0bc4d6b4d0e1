"""Train a LibreYOLO model on Modal, following every rule of the guide.

Written for gpurent-tui from the guide's rules (item 8 "Serverless", with items 3, 4 and
6); the guide itself prints no full script. `gpurent-tui lint` must find no error here:

- the GPU function sets timeout= (a hung job without one bills until it is killed);
- a Volume is mounted and the run's project is on it (the container's disk is ephemeral);
- the volume is committed every epoch by an on_train_epoch_end callback, so a crash or
  the timeout keeps every finished epoch;
- HF_HOME points at the volume, so downloads survive the container;
- the image installs libgl1 and libglib2.0-0, which OpenCV needs;
- the multi-GPU entry point sits under `if __name__ == "__main__":`.

Run: modal run modal_train.py
"""

import os

import modal

VOLUME_PATH = "/runs-volume"
RUNS = f"{VOLUME_PATH}/runs"

app = modal.App("libreyolo-train")
runs_volume = modal.Volume.from_name("libreyolo-runs", create_if_missing=True)
image = (
    modal.Image.debian_slim(python_version="3.11")
    .apt_install("libgl1", "libglib2.0-0")
    .pip_install("torch", "torchvision", "libreyolo")
    .env({"HF_HOME": f"{VOLUME_PATH}/hf"})
)


class CommitEveryEpoch:
    """LibreYOLO calls this after every epoch: the epoch's weights reach the volume."""

    def on_train_epoch_end(self, event):
        runs_volume.commit()


@app.function(gpu="H100:4", image=image, volumes={VOLUME_PATH: runs_volume},
              timeout=6 * 60 * 60)
def train(epochs: int = 100):
    from libreyolo import LibreYOLO

    os.makedirs(RUNS, exist_ok=True)
    model = LibreYOLO("yolox-s.pt")
    model.train(data=f"{VOLUME_PATH}/data/data.yaml", epochs=epochs, batch=64, imgsz=640,
                device="0,1,2,3", project=RUNS, name="run1", exist_ok=True,
                callbacks=[CommitEveryEpoch()])
    runs_volume.commit()


@app.local_entrypoint()
def main():
    train.remote()


if __name__ == "__main__":
    with modal.enable_output(), app.run():
        train.remote()
