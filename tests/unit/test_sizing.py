"""Disk sizing: the guide's data + checkpoints + 30%, the fetch's peak, a watched box's
projection (will the runs root fill before the runs end?) and an oversized disk's cost."""

from __future__ import annotations

import pytest

from tui.model.box import BoxState, DiskRow
from tui.model.runs import Health, RunState, WeightFile
from tui.model.sizing import (
    CHECKPOINT_BYTES,
    GB,
    human_bytes,
    model_checkpoint,
    plan_disk,
    project_disk,
    project_run,
    projection_document,
    save_period_of,
)
from tui.model.staging import repo_problem, tar_name


def test_the_guides_sum_with_headroom() -> None:
    plan = plan_disk(100 * GB, model_checkpoint("yolox-s") or 0, epochs=100, save_period=10)
    assert plan.checkpoints == 12  # best + last + 10 epoch files
    assert plan.needed_bytes == 100 * GB + 12 * 107853517 + plan.logs_bytes
    assert plan.headroom_bytes == pytest.approx(0.3 * plan.needed_bytes, abs=1)
    assert plan.allocate_gb == 210  # the fetch's peak (tar + unpacked copy) + 5% wins
    small = plan_disk(5 * GB, CHECKPOINT_BYTES["yolox-x"], epochs=300, save_period=10)
    assert small.checkpoints == 32
    assert small.allocate_gb == int(-(-(small.needed_bytes * 1.3) // GB))  # the sum wins
    assert plan_disk(1 * GB, 10**6, epochs=50, save_period=0).checkpoints == 2


def test_stopped_cost_of_the_allocation() -> None:
    plan = plan_disk(100 * GB, CHECKPOINT_BYTES["yolox-s"], epochs=100, save_period=10)
    assert plan.stopped_usd_per_hr(0.20, 720) == pytest.approx(210 * 0.20 / 720)
    lines = plan.lines(0.20, 720, "box vast-4090's [box.pricing]")
    assert lines[-1].startswith("stopped, the disk costs  $0.0583/hr   210 GB x $0.2/GB-month")
    assert "give --usd-per-gb-month" in plan.lines()[-1]


def test_names_and_units() -> None:
    assert model_checkpoint("YOLOX_S") == CHECKPOINT_BYTES["yolox-s"]
    assert model_checkpoint("yolov8-s") is None
    assert human_bytes(11463109) == "11.5 MB" and human_bytes(43 * GB) == "43.0 GB"
    assert human_bytes(1500 * GB) == "1.50 TB" and human_bytes(12) == "12 B"
    assert repo_problem("me/shapes") is None
    for bad in ("me", "../x", "me/../x", "me/x/y", "me/x.git", "me/x$(id)"):
        assert repo_problem(bad) is not None, bad
    assert tar_name("my data $(x)") == "my-data-x.tar" and tar_name("...") == "dataset.tar"


def weights(*names_sizes: tuple[str, int]) -> tuple[WeightFile, ...]:
    return tuple(WeightFile(name, size, 0.0) for name, size in names_sizes)


def running(name: str, epoch: int, total: int, files: tuple[WeightFile, ...],
            root: str = "/root/runs") -> RunState:
    status = {"schema_version": 1, "state": "running", "current_epoch": epoch,
              "total_epochs": total}
    return RunState(path=f"{root}/{name}", name=name, root=root, health=Health.RUNNING,
                    status=status, weights=files)


def test_a_runs_future_checkpoints() -> None:
    assert save_period_of(weights(("epoch_10.pt", 1), ("epoch_20.pt", 1), ("last.pt", 1))) == 10
    assert save_period_of(weights(("epoch_15.pt", 1), ("epoch_5.pt", 1))) == 5
    assert save_period_of(weights(("best.pt", 1))) is None
    run = running("r", 37, 100, weights(("last.pt", 300 * 10**6), ("best.pt", 300 * 10**6),
                                        ("epoch_10.pt", 300 * 10**6),
                                        ("epoch_20.pt", 300 * 10**6),
                                        ("epoch_30.pt", 300 * 10**6)))
    projection = project_run(run)
    assert projection is not None and projection.save_period == 10
    assert projection.save_points_left == 7  # 40, 50, ..., 100
    assert projection.more_bytes == 7 * 300 * 10**6 + 63 * 16 * 1024
    early = project_run(running("e", 3, 50, weights(("last.pt", 10**8))))
    assert early is not None and early.save_period == 10 and "assumed 10" in early.guess
    assert early.more_bytes == 5 * 10**8 + 10**8 + 47 * 16 * 1024  # best.pt not written yet
    off = project_run(running("o", 12, 50, weights(("last.pt", 10**8), ("best.pt", 10**8))))
    assert off is not None and off.save_period is None and off.save_points_left == 0
    assert project_run(running("n", 3, 50, ())) is None


def test_a_box_whose_disk_will_fill() -> None:
    big = weights(("last.pt", 10**9), ("best.pt", 10**9), ("epoch_5.pt", 10**9))
    box = BoxState(name="b", runs=(running("a", 6, 100, big), running("c", 6, 100, big)),
                   disks=(DiskRow("/root/runs", 100 * GB, 70 * GB, 25 * GB, mount="/",
                                  fstype="overlay"),))
    projection = project_disk(box)
    (warning,) = projection.warnings
    assert warning.severity == "warning"
    assert warning.message.startswith("/ (overlay) will fill before the runs finish: a, c will "
                                      "still write about 38.0 GB, 25.0 GB is free")
    (fs,) = projection.filesystems
    assert fs.where == "/ (overlay)" and fs.fills
    assert fs.need == 2 * (19 * 10**9 + 94 * 16 * 1024)  # epochs 10, 15, ..., 100 each
    assert fs.end_pct == 114  # (70 + 38) GB of the 95 GB df counts (used + free): past full
    doc = projection_document(projection)
    assert doc["filesystems"] == [{"where": "/ (overlay)", "need_bytes": fs.need,
                                   "free_bytes": 25 * GB, "used_at_end_pct": 114,
                                   "fills": True}]


def test_a_disk_that_holds_its_runs_says_where_it_ends() -> None:
    small = weights(("last.pt", 10**9), ("best.pt", 10**9), ("epoch_5.pt", 10**9))
    box = BoxState(name="b", runs=(running("a", 6, 20, small),),
                   disks=(DiskRow("/root/runs", 100 * GB, 40 * GB, 60 * GB, mount="/"),))
    projection = project_disk(box)
    assert projection.warnings == ()
    (fs,) = projection.filesystems
    assert not fs.fills and fs.need == 3 * 10**9 + 14 * 16 * 1024
    assert fs.end_pct == 44  # (40 + 3) of 100 GB, rounded up as df does
    assert project_disk(BoxState(name="idle", disks=box.disks)).filesystems == ()


def test_an_oversized_disk_says_what_its_unused_part_costs() -> None:
    small = weights(("last.pt", 10**7), ("best.pt", 10**7), ("epoch_10.pt", 10**7))
    box = BoxState(name="b", runs=(running("a", 10, 20, small),),
                   disks=(DiskRow("/root/runs", 250 * GB, 10 * GB, 240 * GB),))
    projection = project_disk(box, stopped_usd_per_hr=250 * 0.20 / 720)
    (info,) = projection.warnings
    assert info.severity == "info"
    assert "the 250 GB disk is far above what the runs need (about 14 GB" in info.message
    assert "the unused 237 GB costs $0.0658/hr while stopped" in info.message
    assert project_disk(box).warnings == ()  # unpriced: nothing to say about money
