"""The `beam` stand-in (tests/support/bin/beam) arranged for one fleet test: one deployed
app with a running task, a volume as a local folder, its state file read and changed
under the lock the stand-in holds while it runs (the fleet runs several at once)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BIN = Path(__file__).resolve().parent / "bin"
DEPLOYMENT_ID = "5bd2e248-6d7c-417b-ac7b-0b92aa0a5572"
ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: a time the task has not reached


class BeamStandIn:
    """One test's Beam: a deployment named `app` (active, one running task started at
    `started`), a volume, login and version, in a JSON file the stand-in reads and writes
    on every call."""

    def __init__(self, root: Path, *, app: str = "yolo-train", volume: str = "runs-vol",
                 started: str = "2026-12-05T06:00:00Z") -> None:
        self.root = root
        self.path = root / "beam-state.json"
        self.volume_dir = root / "volume"
        self.volume_dir.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({
            "version": "0.2.207", "logged_in": True, "file_service": True,
            "deployments": [{"id": DEPLOYMENT_ID, "name": app, "active": True, "version": 1,
                             "stub_id": "stub-1", "stub_type": "function/deployment",
                             "stub_name": f"function/deployment/{app}:train",
                             "created_at": started, "updated_at": started}],
            "tasks": [{"id": "task-1", "status": "RUNNING", "stub_id": "stub-1",
                       "started_at": started, "ended_at": ZERO_TIME}],
            "volumes": {volume: str(self.volume_dir)}, "calls": []}))
        # for the subprocess only: the stand-in first on PATH, its state file named
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "GPURENT_STANDIN_STATE": str(self.path)}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(f"{self.path}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def read(self) -> dict[str, Any]:
        with self._locked():
            data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def _change(self, change: Callable[[dict[str, Any]], None]) -> None:
        with self._locked():
            state = json.loads(self.path.read_text())
            change(state)
            self.path.write_text(json.dumps(state))

    def update(self, **changes: Any) -> None:
        self._change(lambda state: state.update(changes))

    def calls(self) -> list[list[str]]:
        return [list(c) for c in self.read().get("calls", [])]

    def running_tasks(self) -> list[dict[str, Any]]:
        return [t for t in self.read()["tasks"] if t["status"] == "RUNNING"]

    def put(self, remote: str, data: bytes | str) -> Path:
        """A file on the volume."""
        target = self.volume_dir / remote
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
        return target
