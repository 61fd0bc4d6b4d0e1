"""The disk figure is the one `df` shows, for the filesystem `df` names."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tui.model.box import BoxState, DiskRow, fold_answer
from tui.remote.framing import new_nonce, unframe
from tui.remote.session import decode_answer, probe_payload

PYTHON3 = shutil.which("python3", path="/usr/bin:/bin") or "python3"


def test_used_share_leaves_out_the_reserved_blocks() -> None:
    # This machine's root filesystem: 258 GiB, 35 GiB used, 66 GiB available
    # (the rest reserved or otherwise not writable). df says 35%, not 14%.
    disk = DiskRow("/root/runs", total=270553174016, used=37769752576, free=71174541312,
                   mount="/", device="/dev/vda", fstype="ext4")
    assert disk.percent == 35
    assert disk.where == "/ (/dev/vda, ext4)"
    assert DiskRow("/r", 10, 0, 0).percent == 0
    assert DiskRow("/r", 1000, 1, 999).percent == 1  # df rounds up: never 0% while used
    assert DiskRow("/r", 10, 5, 5, mount="/", device="overlay", fstype="overlay").where \
        == "/ (overlay)"


def test_hostile_mount_names_are_printable_and_short() -> None:
    disks = [{"root": "/root/runs", "fs": "1", "total": 100, "used": 10, "free": 30,
              "mount": "/\x1b]52;c;aGk=\x07" + "x" * 500, "device": 7, "fstype": "ext4"}]
    box = fold_answer(BoxState(name="b"), {"v": 1, "time": 0.0, "runs": [], "roots": [],
                                           "disks": disks}, 0.0)
    (disk,) = box.disks
    assert disk.percent == 25 and disk.device is None and disk.fstype == "ext4"
    assert disk.mount is not None and "\x1b" not in disk.mount and len(disk.mount) <= 120


@pytest.mark.skipif(shutil.which("df") is None, reason="no df here")
def test_probe_matches_df_on_this_machine(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    nonce = new_nonce()
    proc = subprocess.run([PYTHON3, "-"],
                          input=probe_payload({"roots": [str(root)], "runs": {}}, nonce),
                          capture_output=True, timeout=60, check=True)
    box = fold_answer(BoxState(name="b"), decode_answer(unframe(nonce, proc.stdout,
                                                                      max_frame=1 << 30)), 0.0)
    (disk,) = box.disks
    # POSIX df: Filesystem 1024-blocks Used Available Capacity Mounted-on
    line = subprocess.run(["df", "-P", str(root)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[-1].split()
    device, capacity, mounted = line[0], line[4], " ".join(line[5:])
    assert disk.mount == mounted and disk.device == device
    assert abs(disk.percent - int(capacity.rstrip("%"))) <= 1  # the disk may move between
