"""Hostile probe answers, drawn from the probe's answer schema with a fixed seed, and a
real sshd box that sends them.

`hostile_answers(seed)` yields (label, answer): a well-formed answer with one or a few
fields replaced by what a stranger's box could send instead (a 5000-digit checkpoint
name or number, 1e308, NaN, infinity, a negative size, a list where a number belongs,
a megabyte of text, terminal control sequences). The unit fuzz test folds them; the
I/O tests have a real sshd box send them (`crafted_probe_env`): its python3 loads a
sitecustomize that replaces fields of every probe answer with those of a JSON file
the test rewrites between commands.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "libreyolo"
DIGITS = 5000
HUGE_NAME = "epoch_" + "9" * DIGITS + ".pt"
CONTROLS = "\x1b]52;c;aGk=\x07\x1b[2J\x9b31m\x00\r"


def huge_int() -> int:
    """A 5000-digit integer (past Python's 4300-digit conversion limit)."""
    return int("9" * 4000) * 10 ** (DIGITS - 4000)


def hostile_values() -> list[Any]:
    """What a box can put where any field belongs."""
    return [huge_int(), -huge_int(), 10 ** 300, 1e308, -1e308, float("inf"), float("-inf"),
            float("nan"), -1, -(2 ** 63), 2 ** 64, 0.5, True, None, [], [1, 2], {}, {"a": 1},
            "", "9" * DIGITS, "x" * 200_000, CONTROLS, "1e999", "NaN", HUGE_NAME]


def hostile_names() -> list[str]:
    """Checkpoint names that look like epoch files and are not sane ones."""
    return [HUGE_NAME, "epoch_" + "0" * DIGITS + "1.pt", "epoch_" + "9" * 250 + ".pt",
            "epoch_99999999999999999999.pt", "epoch_-5.pt", "epoch_\u0665.pt",
            "epoch_1" + CONTROLS + ".pt", "epoch_1e9.pt", "best" + CONTROLS + ".pt"]


def base_answer(now: float) -> dict[str, Any]:
    """A well-formed answer: one running run with checkpoints, one GPU, one disk."""
    status = json.loads((DATA / "yolox_running" / "status.json").read_text())
    stamp = datetime.fromtimestamp(now - 30, UTC).isoformat()  # running, not stalled
    status.update(updated_at=stamp, started_at=stamp)
    record = {"epoch": 3, "train/loss": 1.5, "current_metric": 0.2, "time": 40.0}
    run = {"path": "/runs/hostile", "name": "hostile", "root": "/runs", "s_sig": "1:2",
           "status": status, "pid_alive": True, "errors": [],
           "metrics": {"off": 10, "id": "1", "head": "ab", "text": json.dumps(record) + "\n"},
           "log": {"off": 5, "id": "2", "head": "cd", "text": "epoch 3\n"},
           "w_sig": "3:4",
           "weights": [["best.pt", 1000, now - 50, 1, 2], ["epoch_10.pt", 1000, now - 60, 3, 4],
                       ["last.pt", 1000, now - 40, 5, 6]],
           "h_sig": "5:6", "hist": [["status.json", 100, now - 30, 7, 8]]}
    return {"v": 1, "time": now, "boot": now - 3600, "python": "3.11.9", "truncated": False,
            "runs": [run], "gone": [], "roots": [{"root": "/runs", "path": "/runs"}],
            "disks": [{"root": "/runs", "total": 10 ** 11, "used": 10 ** 10, "free": 9 * 10 ** 10,
                       "fs": 1, "mount": "/", "device": "/dev/sda1", "fstype": "ext4"}],
            "hidden": [], "gpus": {"rows": ["0, NVIDIA H100, 88, 7000, 80000, 55, 400.5"]},
            "guard": {"at": now - 5, "sig": "7:8", "state": {
                "v": 1, "armed": True, "armed_at": now - 3600, "max_hours": 12,
                "no_progress_minutes": 20, "beat_seconds": 30, "last_progress_at": now - 60,
                "actions": {"max_hours": ["push", "stop"]},
                "did": [{"action": "push", "outcome": "done", "at": now - 30, "detail": "ok"}],
                "fired": {"trigger": "max_hours", "at": now - 40, "why": "12 h"}}}}


# Where a hostile value may go: a path of keys and list indexes into base_answer().
PLACES: list[tuple[Any, ...]] = [
    ("time",), ("boot",), ("python",), ("truncated",), ("gone",),
    ("disks", 0, "total"), ("disks", 0, "used"), ("disks", 0, "free"), ("disks", 0, "mount"),
    ("roots", 0, "warnings"), ("roots", 0, "error"), ("hidden",), ("gpus", "rows"),
    ("runs", 0, "name"), ("runs", 0, "errors"), ("runs", 0, "pid_alive"),
    ("runs", 0, "status", "current_epoch"), ("runs", 0, "status", "total_epochs"),
    ("runs", 0, "status", "completed_epochs"), ("runs", 0, "status", "pid"),
    ("runs", 0, "status", "mean_epoch_seconds"), ("runs", 0, "status", "epoch_seconds"),
    ("runs", 0, "status", "eta_seconds"), ("runs", 0, "status", "best_metric"),
    ("runs", 0, "status", "best_epoch"), ("runs", 0, "status", "train_loss"),
    ("runs", 0, "status", "start_epoch"), ("runs", 0, "status", "updated_at"),
    ("runs", 0, "status", "state"), ("runs", 0, "status", "error"),
    ("runs", 0, "status", "batch_size"), ("runs", 0, "status", "save_period"),
    ("runs", 0, "metrics", "off"), ("runs", 0, "metrics", "skipped"),
    ("runs", 0, "log", "skipped"), ("runs", 0, "log", "text"),
    ("runs", 0, "weights", 0, 0), ("runs", 0, "weights", 1, 0), ("runs", 0, "weights", 1, 1),
    ("runs", 0, "weights", 1, 2), ("runs", 0, "weights", 1, 3), ("runs", 0, "weights", 2, 1),
    ("runs", 0, "hist", 0, 1),
    ("guard", "at"), ("guard", "state", "v"), ("guard", "state", "armed_at"),
    ("guard", "state", "max_hours"), ("guard", "state", "beat_seconds"),
    ("guard", "state", "actions"), ("guard", "state", "did"), ("guard", "state", "fired"),
    ("guard", "state", "did", 0, "at"), ("guard", "state", "fired", "at"),
]


def _short(value: Any) -> str:
    """A hostile value named in a failure (a 5000-digit number by its size)."""
    if isinstance(value, int) and abs(value) > 10 ** 100:
        return f"<{'-' if value < 0 else ''}{value.bit_length()}-bit int>"
    return repr(value)[:24]


def _put(answer: dict[str, Any], place: tuple[Any, ...], value: Any) -> None:
    """Put `value` at `place`, unless an earlier pick replaced a container on the way."""
    target: Any = answer
    for key in place[:-1]:
        if not isinstance(target, dict | list) or (isinstance(target, list) and key >= len(
                target)) or (isinstance(target, dict) and key not in target):
            return
        target = target[key]
    if isinstance(target, dict) or (isinstance(target, list) and place[-1] < len(target)):
        target[place[-1]] = value


def hostile_answers(seed: int, now: float = 1_800_000_000.0) -> Iterator[tuple[str, Any]]:
    """Endless (label, answer): first the 5000-digit checkpoint name, then each hostile
    name, then answers with one to three fields made hostile at random (a fixed seed)."""
    rng = random.Random(seed)
    values, names = hostile_values(), hostile_names()
    for name in names:
        answer = base_answer(now)
        answer["runs"][0]["weights"].insert(1, [name, 1000, now - 55, 9, 10])
        yield f"weights name {name[:24]!r}", answer
    while True:
        answer = base_answer(now)
        labels = []
        for _ in range(rng.randint(1, 3)):
            place, value = rng.choice(PLACES), rng.choice(values + names)
            _put(answer, place, value)
            labels.append(f"{'.'.join(map(str, place))}={_short(value)}")
        if rng.random() < 0.3:  # metrics.jsonl lines the box wrote (or claims it did)
            value = rng.choice(values)  # one hostile value through a whole history
            key = rng.choice(["epoch", "train/loss", "time", "current_metric"])
            records = [{"epoch": n, "train/loss": 1.0, "time": 40.0, key: value}
                       for n in range(1, rng.randint(2, 12))]
            with unlimited_ints():
                lines = "".join(json.dumps(r) + "\n" for r in records)
            answer["runs"][0]["metrics"]["text"] = lines
            labels.append(f"{len(records)} metrics lines with {key}={_short(value)}")
        yield "; ".join(labels), answer


@contextlib.contextmanager
def unlimited_ints() -> Iterator[None]:
    """Let this process write a 5000-digit integer (as a box's own Python may)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(limit)


def crafted_probe_env(tmp_path: Path, script: Path) -> dict[str, str]:
    """Session variables for a box whose python3 runs `script` (when it exists, read
    afresh each time) on every probe answer it sends, as `answer`, and writes any number."""
    site = tmp_path / "crafted-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(f"""
import json, os, sys
sys.set_int_max_str_digits(0)
_dumps = json.dumps
def dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and "runs" in obj and "v" in obj and os.path.exists({str(script)!r}):
        with open({str(script)!r}) as f:
            exec(f.read(), {{"answer": obj, "json": json}})
    return _dumps(obj, *args, **kwargs)
json.dumps = dumps
""")
    return {"PYTHONPATH": str(site)}


def send_answer(script: Path, answer: dict[str, Any]) -> None:
    """The box answers every probe with `answer` (its clock kept), a 5000-digit number
    written in full, NaN and infinity as Python writes them."""
    data = script.with_suffix(".json")
    with unlimited_ints():
        data.write_text(json.dumps(answer))
    script.write_text(f"t = answer['time']\nanswer.clear()\n"
                      f"answer.update(json.load(open({str(data)!r})))\n"
                      "answer.setdefault('time', t)\n")


def send_huge_checkpoint(script: Path) -> None:
    """The box adds `weights/epoch_<5000 digits>.pt` to every weights listing it sends."""
    script.write_text("for run in answer['runs']:\n"
                      "    if 'weights' in run:\n"
                      f"        run['weights'].append([{HUGE_NAME!r}, 4096, answer['time'],"
                      " 1, 2])\n")
