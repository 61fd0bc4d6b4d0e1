"""The demo stills show every health, and the committed screenshots are what the code draws.

The second test regenerates every SVG into a temp dir (a few seconds) and
compares bytes: a change to a screen without `python scripts/screenshots.py`
fails here, not in a reader's eyes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tui.demo.scenario import BOXES, LANES
from tui.demo.stills import DEAD_PID, HUNG_PID, NOW, still_ledger, still_states
from tui.model.box import Connection
from tui.model.runs import Health

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"
SHOTS = ROOT / "screenshots"
SHOWN = {Health.RUNNING, Health.COMPLETED, Health.FAILED, Health.STALLED, Health.DEAD}


def test_stills_hold_the_demo_fleet_with_every_health() -> None:
    boxes = still_states()
    assert [b.name for b in boxes] == [spec.name for spec in BOXES]
    assert all(b.connection is Connection.OK and b.box_time == NOW for b in boxes)
    assert [len(b.gpus) for b in boxes] == [len(spec.gpus) for spec in BOXES]
    # Each box's driver average over the 14 s before NOW: its GPUs trained, mostly.
    assert all(b.gpu_busy is not None and b.gpu_busy.span == 14.0 and b.busy.covered_s == 14.0
               and 0 < b.gpu_busy.pct < 100 for b in boxes)
    runs = {run.name: run for box in boxes for run in box.runs}
    assert set(runs) == {lane.name for lane in LANES}
    assert {run.health for run in runs.values()} == SHOWN
    stalled = next(r for r in runs.values() if r.health is Health.STALLED)
    assert stalled.pid == HUNG_PID and stalled.pid_alive and "no update for 14m" in stalled.reason
    dead = next(r for r in runs.values() if r.health is Health.DEAD)
    assert dead.pid == DEAD_PID and dead.pid_alive is False
    failed = next(r for r in runs.values() if r.health is Health.FAILED)
    assert failed.error == {"type": "RuntimeError", "message": "injected failure at epoch 5"}
    live = [lane for lane in LANES if lane.at_epoch]
    assert all(runs[lane.name].current_epoch == lane.at_epoch for lane in live)
    assert all(runs[lane.name].history and runs[lane.name].log_tail for lane in live)
    assert still_states() == boxes  # pure: the same picture every time
    assert [e.box for e in still_ledger()] == ["lab-3090"]


def test_committed_screenshots_are_current(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--no-png"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert fresh == sorted(p.name for p in SHOTS.glob("*.svg"))
    stale = [name for name in fresh
             if (tmp_path / name).read_bytes() != (SHOTS / name).read_bytes()]
    assert not stale, f"screens changed: run `python scripts/screenshots.py` ({stale})"
    fleet = (SHOTS / "fleet-120x36.svg").read_text()
    assert all(f"&#160;{health}" in fleet for health in SHOWN)
