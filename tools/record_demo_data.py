"""Record the LibreYOLO runs that `gpurent-tui demo` replays (writes tui/demo_data/).

Needs the train extra (torch, libreyolo 1.6.0); CPU only, about 2 minutes:

    python tools/record_demo_data.py

Each run is trained for real with tests/support/libreyolo_train.py. A sitecustomize
hook in the training process wraps LibreYOLO's atomic JSON writer, so every
status.json it writes is captured at the moment it is written, together with
the train.log, metrics.jsonl and results.csv sizes and the weights listing.
Then the capture is checked (every epoch present, metrics.jsonl and
results.csv only ever appended, summary.json rebuilt exactly from the rows)
and written as text; weights are not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.libreyolo_train import make_dataset, start_training  # noqa: E402

from tui.demo.recording import (  # noqa: E402
    RECORDINGS,
    TEXT_FILES,
    YOLO9_25,
    YOLOX_40,
    YOLOX_FAILED,
    recording_from_files,
)
from tui.demo.timeline import results_csv, summary_document  # noqa: E402

BASE = Path("/tmp/libreyolo-demo-rec")  # neutral paths: the replay replaces them
OUT = ROOT / "tui" / "demo_data"
SPECS: dict[str, dict[str, Any]] = {
    YOLOX_40: {"family": "yolox", "epochs": 40, "save_period": 10},
    YOLO9_25: {"family": "yolo9", "epochs": 25, "save_period": 5},
    YOLOX_FAILED: {"family": "yolox", "epochs": 12, "save_period": 10, "fail_at_epoch": 5},
}

HOOK = r'''
import hashlib, json, os, time
from pathlib import Path
import libreyolo.training.artifacts as _artifacts

_write = _artifacts._atomic_write_json


def _size(path):
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _captured(path, value):
    _write(path, value)
    path = Path(path)
    if path.name != "status.json":
        return
    run = path.parent
    weights = run / "weights"
    results = run / "results.csv"
    record = {
        "t": time.time(),
        "status": json.loads(path.read_text()),
        "log": _size(run / "train.log") or 0,
        "metrics": _size(run / "metrics.jsonl") or 0,
        "results": _size(results),
        "results_sha": hashlib.sha1(results.read_bytes()).hexdigest() if results.exists() else None,
        "weights": sorted(p.name for p in weights.iterdir()) if weights.is_dir() else [],
        "files": sorted(p.relative_to(run).as_posix() for p in run.rglob("*")
                        if p.is_file() and not p.name.startswith(".")
                        and p.parent != weights and p.name != "status.json"),
    }
    with open(os.environ["DEMO_CAPTURE"], "a") as f:
        f.write(json.dumps(record) + "\n")


_artifacts._atomic_write_json = _captured
'''


def record(key: str, data_yaml: Path) -> list[dict[str, Any]]:
    capture = BASE / f"{key}.capture.jsonl"
    os.environ["DEMO_CAPTURE"] = str(capture)
    spec = dict(SPECS[key])
    proc = start_training(BASE / "runs", key, data_yaml, eval_interval=1,
                          log_path=BASE / f"{key}.out", **spec)
    code = proc.wait()
    print(f"{key}: training process exited {code}")
    return [json.loads(line) for line in capture.read_text().splitlines()]


def kind_of(status: dict[str, Any]) -> str:
    if status["state"] != "running":
        return str(status["state"])
    return "start" if status.get("current_epoch") is None else "epoch"


def check(key: str, snaps: list[dict[str, Any]], run: Path) -> None:
    kinds = [kind_of(s["status"]) for s in snaps]
    epochs = [s["status"]["current_epoch"] for s in snaps if kind_of(s["status"]) == "epoch"]
    assert kinds[0] == "start" and kinds[-1] in ("completed", "failed"), kinds
    assert epochs == list(range(1, len(epochs) + 1)), epochs
    lines = (run / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    for snap in snaps:
        done = snap["status"].get("completed_epochs") or 0
        if kind_of(snap["status"]) == "epoch":
            assert snap["metrics"] == sum(len(x) for x in lines[:done]), key
    results = run / "results.csv"
    if results.exists():
        final = results.read_bytes()
        for snap in snaps:
            if snap["results"] is not None:
                sha = hashlib.sha1(final[:snap["results"]]).hexdigest()
                assert sha == snap["results_sha"], f"{key}: results.csv was rewritten"


def write_out(key: str, snaps: list[dict[str, Any]], run: Path, data_dir: Path) -> None:
    out = OUT / key
    shutil.rmtree(out, ignore_errors=True)
    (out / "val").mkdir(parents=True)
    t0 = snaps[0]["t"]
    phases = [{"kind": kind_of(s["status"]), "epoch": s["status"].get("current_epoch"),
               "t": round(s["t"] - t0, 4), "log": s["log"], "results": s["results"],
               "weights": s["weights"], "files": s["files"]} for s in snaps]
    summary = None
    if (run / "summary.json").exists():
        summary = json.loads((run / "summary.json").read_text())
        summary.pop("logged_epochs")
        for name in ("epoch_losses", "epoch_lrs", "epoch_loss_items", "val_metrics",
                     "epoch_metrics"):
            summary["results"].pop(name)
    capture = {
        "recorded": {
            "with": "tests/support/libreyolo_train.py start_training(eval_interval=1, "
                    + ", ".join(f"{k}={v!r}" for k, v in SPECS[key].items()) + ")",
            "date": datetime.now(UTC).date().isoformat(),
            "libreyolo": _version("libreyolo"), "torch": _version("torch"),
            "python": sys.version.split()[0],
        },
        "name": key, "save_dir": str(run), "project": str(run.parent),
        "data_dir": str(data_dir), "phases": phases, "summary_template": summary,
    }
    (out / "capture.json").write_text(dump_capture(capture))
    (out / "status.jsonl").write_text(
        "".join(json.dumps(s["status"], sort_keys=True) + "\n" for s in snaps))
    for name in ("metrics.jsonl", "train.log", "results.csv", *TEXT_FILES):
        if (run / name).exists():
            shutil.copyfile(run / name, out / name)
    if not (out / "val" / "config.yaml").exists():
        (out / "val").rmdir()
    # The replay must rebuild results.csv and summary.json exactly as LibreYOLO wrote them.
    rec = recording_from_files(key, lambda n: _read(out / n))
    for phase in rec.phases:
        if phase.kind == "epoch" and phase.results is not None and phase.epoch is not None:
            assert results_csv(rec, phase.epoch, rec.epoch_times) == \
                (run / "results.csv").read_bytes()[:phase.results], f"{key}: results.csv"
    if summary is not None:
        rebuilt = summary_document(rec, rec.epoch_times,
                                   json.loads((run / "summary.json").read_text())["total_seconds"],
                                   [])
        assert rebuilt == json.loads((run / "summary.json").read_text()), f"{key}: summary"


def dump_capture(capture: dict[str, Any]) -> str:
    """capture.json with one phase a line: small, and a diff shows which phase changed."""
    head = {k: v for k, v in capture.items() if k not in ("phases", "summary_template")}
    lines = json.dumps(head, indent=1)[:-2].splitlines()
    lines[-1] += ","
    lines.append(' "phases": [')
    lines.append(",\n".join("  " + json.dumps(p) for p in capture["phases"]))
    lines.append(" ],")
    lines.append(' "summary_template": ' + json.dumps(capture["summary_template"]))
    return "\n".join(lines) + "\n}\n"


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _version(module: str) -> str:
    from importlib.metadata import version
    return version(module)


def main() -> int:
    shutil.rmtree(BASE, ignore_errors=True)
    hook_dir = BASE / "hook"
    hook_dir.mkdir(parents=True)
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(hook_dir), *filter(None, [os.environ.get("PYTHONPATH")])])
    data_dir = BASE / "data" / "rects"
    data_yaml = make_dataset(data_dir)
    for key in RECORDINGS:
        snaps = record(key, data_yaml)
        run = BASE / "runs" / key
        check(key, snaps, run)
        write_out(key, snaps, run, data_dir)
        print(f"{key}: {len(snaps)} status.json writes captured")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"tui/demo_data: {total / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
