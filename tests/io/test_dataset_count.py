"""The probe counts a run's training images once, bounded: the data set LibreYOLO's
train_config.yaml names, walked without following a link; a hostile one reads unknown."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from support.fleets import DATA
from support.libreyolo_train import make_dataset

from tui.model.box import BoxState, fold_answer, probe_request
from tui.onbox import probe as probe_script
from tui.remote.framing import new_nonce, unframe
from tui.remote.session import decode_answer, probe_payload

PYTHON3 = shutil.which("python3", path="/usr/bin:/bin") or "python3"


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """The probe as a box runs it (`python3 -` fed our payload)."""
    nonce = new_nonce()
    proc = subprocess.run([PYTHON3, "-"], input=probe_payload(request, nonce),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return decode_answer(unframe(nonce, proc.stdout, max_frame=1 << 30))

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "tui" / "demo_data" / "yolox-n-40e" \
    / "train_config.yaml"


def run_with_data(tmp_path: Path, data_yaml: str) -> Path:
    """A real finished LibreYOLO run whose train_config.yaml (LibreYOLO's own, from the
    demo recording) names `data_yaml` as its data set."""
    root = tmp_path / "runs"
    shutil.copytree(DATA / "yolox_completed", root / "run1")
    text = DEMO_CONFIG.read_text()
    old = next(line for line in text.splitlines() if line.startswith("data: "))
    (root / "run1" / "train_config.yaml").write_text(text.replace(old, f"data: {data_yaml}"))
    return root


def dataset_of(root: Path, runs: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    ans = probe({"roots": [str(root)], "runs": runs or {}})
    (run,) = ans["runs"]
    return dict(run)


def folded(raw: dict[str, Any]) -> BoxState:
    answer = {"v": probe_script.PROBE_VERSION, "time": time.time(), "runs": [raw]}
    return fold_answer(BoxState(name="b"), answer, time.time())


def test_a_real_data_set_is_counted_once_per_config(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "ds", n_train=16, n_val=8)
    root = run_with_data(tmp_path, str(data))
    raw = dataset_of(root)
    assert raw["dataset"] == {"imgsz": 64, "batch": 8, "data": "data.yaml", "images": 16}
    # The cursor holds it: the next refresh sends no count again.
    again = dataset_of(root, {str(root / "run1"): {"d_sig": raw["d_sig"]}})
    assert "dataset" not in again and again["d_sig"] == raw["d_sig"]
    # Folded, the run knows its images per epoch and sends the cursor back.
    state = folded(raw)
    run = state.runs[0]
    assert run.dataset is not None and run.dataset.images == 16 and run.dataset.imgsz == 64
    assert probe_request(state, [str(root)])["runs"][run.path]["d_sig"] == raw["d_sig"]


def test_a_list_of_images_in_a_text_file_and_a_list_of_folders(tmp_path: Path) -> None:
    make_dataset(tmp_path / "ds", n_train=5, n_val=2)
    (tmp_path / "ds" / "more.txt").write_text("a.jpg\nb.jpg\n\nc.jpg\n")
    (tmp_path / "ds" / "two.yaml").write_text(
        f"path: {tmp_path / 'ds'}\ntrain:\n  - images/train\n  - more.txt\nval: images/val\n")
    raw = dataset_of(run_with_data(tmp_path, str(tmp_path / "ds" / "two.yaml")))
    assert raw["dataset"]["images"] == 8


def test_a_data_yaml_pointing_at_the_whole_disk_is_not_walked(tmp_path: Path) -> None:
    (tmp_path / "root.yaml").write_text("path: /\ntrain: .\nval: .\n")
    started = time.monotonic()
    raw = dataset_of(run_with_data(tmp_path, str(tmp_path / "root.yaml")))
    assert "whole disk" in raw["dataset"]["unknown"] and "images" not in raw["dataset"]
    assert time.monotonic() - started < 30


def test_a_symlink_loop_and_links_out_are_not_followed(tmp_path: Path) -> None:
    make_dataset(tmp_path / "ds", n_train=4, n_val=1)
    train = tmp_path / "ds" / "images" / "train"
    os.symlink(train, train / "loop")              # a loop back into itself
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(50):
        (outside / f"x{i}.jpg").write_bytes(b"")
    os.symlink(outside, train / "elsewhere")       # a folder out of the data set
    raw = dataset_of(run_with_data(tmp_path, str(tmp_path / "ds" / "data.yaml")))
    assert raw["dataset"]["images"] == 4


def test_a_million_entries_read_unknown_within_the_bound(tmp_path: Path) -> None:
    """The entry bound stops the walk: counted in-process with the bound lowered, since a
    real million files would cost the test machine's disk what it costs a box's."""
    train = tmp_path / "ds" / "train"
    train.mkdir(parents=True)
    for i in range(3000):
        (train / f"{i}.jpg").write_bytes(b"")
    (tmp_path / "ds" / "data.yaml").write_text("path: .\ntrain: train\n")
    root = run_with_data(tmp_path, str(tmp_path / "ds" / "data.yaml"))
    config = str(root / "run1" / "train_config.yaml")
    assert probe_script.dataset_count(config)["images"] == 3000
    old = probe_script.DATASET_MAX_ENTRIES
    probe_script.DATASET_MAX_ENTRIES = 1000
    probe_script._COUNTED.clear()  # counted just now: a kept probe would not count again
    try:
        told = probe_script.dataset_count(config)
    finally:
        probe_script.DATASET_MAX_ENTRIES = old
    assert "images" not in told and "not counted" in told["unknown"]
    assert probe_script.DATASET_MAX_ENTRIES * 5 == 10**6  # a million entries is past it


def test_a_yaml_with_control_characters_and_junk_reads_clean(tmp_path: Path) -> None:
    (tmp_path / "evil.yaml").write_bytes(b"path: /nonexistent\x1b]0;pwned\x07\ntrain: \x1b[2Jx\n"
                                         + b"\xff" * 100)
    raw = dataset_of(run_with_data(tmp_path, str(tmp_path / "evil.yaml")))
    state = folded(raw)
    data = state.runs[0].dataset
    assert data is not None and data.images is None and data.unknown
    assert "\x1b" not in data.unknown and "\x07" not in data.unknown
    # A train_config.yaml too big to be a config is refused by size, not read.
    (tmp_path / "runs" / "run1" / "train_config.yaml").write_bytes(b"a: b\n" * 20000)
    raw = dataset_of(tmp_path / "runs")
    assert "over" in raw["dataset"]["unknown"]


def test_runs_sharing_a_data_set_are_all_counted_in_one_answer(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "ds", n_train=16, n_val=8)
    root = run_with_data(tmp_path, str(data))
    for i in range(30):
        shutil.copytree(root / "run1", root / f"copy{i}")
    ans = probe({"roots": [str(root)], "runs": {}})
    assert len(ans["runs"]) == 31
    assert {r["dataset"]["images"] for r in ans["runs"]} == {16}


def test_an_answer_out_of_counting_time_leaves_the_count_for_the_next(tmp_path: Path) -> None:
    """No d_sig is sent for a run not counted, so the next refresh counts it."""
    data = make_dataset(tmp_path / "ds", n_train=3, n_val=1)
    root = run_with_data(tmp_path, str(data))
    old = probe_script.DATASET_ANSWER_SECONDS
    probe_script.DATASET_ANSWER_SECONDS = 0.0
    try:
        first = probe_script.build_answer({"roots": [str(root)], "runs": {}, "gpu": False})
    finally:
        probe_script.DATASET_ANSWER_SECONDS = old
    assert "d_sig" not in first["runs"][0] and "dataset" not in first["runs"][0]
    second = probe_script.build_answer({"roots": [str(root)], "runs": {}, "gpu": False})
    assert second["runs"][0]["dataset"]["images"] == 3


def test_a_data_set_not_on_the_box_says_so(tmp_path: Path) -> None:
    raw = dataset_of(run_with_data(tmp_path, "/nowhere/rects/data.yaml"))
    assert raw["dataset"]["unknown"] == "data.yaml cannot be read on the box (No such file " \
        "or directory)"
