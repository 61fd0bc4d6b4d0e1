"""A runs root whose one running run has a checkpoint of a chosen size (a sparse file: the
size the box reports, no disk used), for the disk projection's tests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from support.fleets import runs_root_with

HUGE = 9 * 10**11  # one checkpoint of 900 GB (under the probe's 1e12 sanity bound): four more
#                    of them, 3.6 TB, fill any test machine's disk


def running_root(tmp_path: Path, checkpoint: int) -> Path:
    """yolox_running (epoch 7 of 30, no epoch file yet) training under this test's pid, its
    last.pt `checkpoint` bytes long (sparse)."""
    root = runs_root_with(tmp_path, "yolox_running")
    run = root / "yolox_running"
    status = json.loads((run / "status.json").read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    status.update(pid=os.getpid(), started_at=now, updated_at=now)
    (run / "status.json").write_text(json.dumps(status))
    (run / "weights").mkdir()
    with open(run / "weights" / "last.pt", "wb") as f:
        f.truncate(checkpoint)
    return root
