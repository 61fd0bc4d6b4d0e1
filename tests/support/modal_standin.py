"""The `modal` stand-in (tests/support/bin/modal) arranged for one test: its state file,
a volume as a local folder, and the environment that puts it first on PATH (for the
subprocess only: this process's PATH is left alone)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN = Path(__file__).resolve().parent / "bin"
STAMP = "2026-12-05 06:00:00+00:00"


class ModalStandIn:
    """One test's Modal: apps, volumes, login and version, in a JSON file the stand-in
    reads and writes on every call."""

    def __init__(self, root: Path, *, app: str = "yolo-train", volume: str = "runs-vol",
                 started: str = STAMP) -> None:
        self.root = root
        self.path = root / "modal-state.json"
        self.volume_dir = root / "volume"
        self.volume_dir.mkdir(parents=True, exist_ok=True)
        self.write({
            "version": "1.5.4", "logged_in": True,
            "apps": [{"app_id": "ap-0123456789abcdefghijkl", "description": app,
                      "state": "deployed", "tasks": "1", "created_at": started,
                      "stopped_at": None}],
            "volumes": {volume: str(self.volume_dir)}, "calls": []})
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "GPURENT_STANDIN_STATE": str(self.path)}

    def read(self) -> dict[str, Any]:
        """The state, read under the lock the stand-in writes it under."""
        with open(self.path) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            data: dict[str, Any] = json.load(handle)
        return data

    def write(self, state: dict[str, Any]) -> None:
        with open(self.path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            handle.truncate()
            json.dump(state, handle)

    def _change(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Read, change and write the state under one lock (the stand-in may be running)."""
        with open(self.path, "r+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            state = json.load(handle)
            change(state)
            handle.seek(0)
            handle.truncate()
            json.dump(state, handle)

    def update(self, **changes: Any) -> None:
        self._change(lambda state: state.update(changes))

    def app(self, **changes: Any) -> None:
        """Change the (first) app's fields."""
        self._change(lambda state: state["apps"][0].update(changes))

    def calls(self) -> list[list[str]]:
        return [list(c) for c in self.read().get("calls", [])]

    def put(self, remote: str, data: bytes | str) -> Path:
        """A file on the volume."""
        target = self.volume_dir / remote
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        return target


def status_json(*, epoch: int = 3, total: int = 10, state: str = "running",
                updated_at: str = "2026-12-05T06:30:00+00:00", eta: float | None = 3600.0,
                started_at: str = "2026-12-05T06:00:00+00:00") -> str:
    """A LibreYOLO status.json as a run on the volume writes it."""
    doc: dict[str, Any] = {"schema_version": 1, "state": state, "current_epoch": epoch,
                           "total_epochs": total, "updated_at": updated_at,
                           "started_at": started_at, "train_loss": 1.25,
                           "mean_epoch_seconds": 600.0}
    if eta is not None:
        doc["eta_seconds"] = eta
    return json.dumps(doc)
