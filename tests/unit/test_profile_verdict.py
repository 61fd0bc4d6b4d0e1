"""`profile`'s verdict from LibreYOLO's real H200 recordings (tests/data/libreyolo-profile-h200:
yolox-n, 640 px, at $3.49/hr): what a box's figures are worth, and what a hostile box's
figures are not."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tui.model.profile import (
    ProfileError,
    ProfileReport,
    best_cell,
    model_size,
    parse_cell,
    parse_grid,
    run_settings,
    suggested_workers,
    table_rows,
    usd_per_1k_images,
    verdict,
)
from tui.model.profile_doc import profile_document
from tui.onbox.profile import picked

H200 = Path(__file__).resolve().parents[1] / "data" / "libreyolo-profile-h200"
RATE = 3.49


def recorded(n: int) -> dict[str, Any]:
    """What the on-box program sends for recording n: rc, the --json answer, profile.json's
    scalars (picked on the box as the program picks them)."""
    return {"rc": 0, "cli": json.loads((H200 / f"cli-json-{n}.json").read_text()),
            "profile": picked(json.loads((H200 / f"profile-{n}.json").read_text())),
            "err": ""}


def test_one_worker_on_16_cores_reads_dataloader_bound_with_the_measured_gain() -> None:
    cells = [parse_cell(recorded(1), 16, 1), parse_cell(recorded(2), 16, 12),
             parse_cell(recorded(3), 128, 12)]
    assert [round(c.img_per_s or 0, 1) for c in cells] == [35.4, 72.7, 61.8]
    assert cells[0].bound == "memory-pressure"  # LibreYOLO's own word, kept as its
    assert best_cell(cells) is cells[1]
    said = verdict(cells, (16, 1), 16, RATE)
    assert said == ("dataloader-bound: 1 of 16 cores feeding, 54% of each step waits on "
                    "data; try --workers 12 (measured: 35 → 73 img/s, $0.027 → $0.013 per "
                    "1k images); a faster GPU buys nothing")
    rows = table_rows(cells, RATE)
    assert rows[1] == ["16", "12", "72.7", "0%", "12%", "$0.013", "memory-pressure"]
    assert rows[2][:6] == ["128", "12", "61.8", "52%", "11%", "$0.016"]


def test_twelve_workers_reads_host_launch_bound_not_libreyolos_memory_pressure() -> None:
    cell = parse_cell(recorded(2), 16, 12)
    said = verdict([cell], (16, 12), 16, RATE)
    assert said.startswith("host / launch-bound: the GPU is busy 12% of each step; try a "
                           "bigger --batch")
    assert "cheaper, slower GPU" in said


def test_on_the_cpu_the_gpu_share_is_not_read() -> None:
    cells = [parse_cell(recorded(2), 16, 12), parse_cell(recorded(1), 16, 1)]
    assert verdict(cells, (16, 12), 2, None, on_cpu=True) == \
        "profiled on the CPU, so no GPU was measured"
    assert verdict(cells, (16, 1), 2, None, on_cpu=True).startswith("dataloader-bound: 1 of 2")


def test_unit_cost() -> None:
    assert usd_per_1k_images(3.49, 35.37) == pytest.approx(0.02741, abs=1e-5)
    assert usd_per_1k_images(None, 35.0) is None and usd_per_1k_images(3.0, 0.0) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 1e12, "35", True, [1], {"a": 1}])
def test_a_hostile_figure_is_dropped_never_believed(bad: Any) -> None:
    raw = recorded(1)
    raw["profile"] = dict(raw["profile"], img_per_s=bad, dataload_frac=bad, gpu_util=bad)
    raw["cli"] = dict(raw["cli"], img_per_s=bad)
    cell = parse_cell(raw, 16, 1)
    assert cell.img_per_s is None and cell.dataload_frac is None and cell.gpu_util is None
    assert not cell.measured
    assert verdict([cell], (16, 1), 16, RATE) == "no setting was measured: nothing to advise"
    doc = json.dumps(profile_document(ProfileReport(box="b", outcome="failed", cells=[cell])),
                     allow_nan=False)  # the document is strict JSON whatever the box sent
    assert "NaN" not in doc


def test_a_fraction_over_one_and_control_text_are_not_shown() -> None:
    raw = recorded(1)
    raw["profile"] = dict(raw["profile"], dataload_frac=5.4,
                          bound="\x1b]52;c;cGF5bG9hZA==\x07gpu" + "x" * 500)
    cell = parse_cell(raw, 16, 1)
    assert cell.dataload_frac is None and cell.dropped == ("dataload_frac",)
    assert cell.bound is not None and "\x1b" not in cell.bound and len(cell.bound) <= 40


def test_a_failed_cell_says_libreyolos_last_line() -> None:
    cell = parse_cell({"rc": 3, "cli": None, "profile": None,
                       "err": "loading\nno profile produced: the window never filled\x1b[2J\n"},
                      16, 1)
    assert not cell.measured
    assert cell.problem == ("libreyolo profile run exited 3 without a profile.json: no profile "
                            "produced: the window never filled\ufffd[2J")
    assert parse_cell("garbage", 16, 1).problem == "the box sent no result for this setting"


def test_grid() -> None:
    assert parse_grid(["workers=1,8,12", "batch=16,64"], 16, 1) == [
        (16, 1), (16, 8), (16, 12), (64, 1), (64, 8), (64, 12)]
    assert parse_grid([], 8, 0) == [(8, 0)]
    for bad in (["gpus=1"], ["workers=a"], ["batch=0"], ["workers=" + ",".join(
            str(n) for n in range(13))]):
        with pytest.raises(ProfileError):
            parse_grid(bad, 16, 1)


def test_model_size_and_run_settings() -> None:
    assert model_size("yolox-n") == "n" and model_size("t") == "t"
    with pytest.raises(ProfileError):
        model_size("n; rm -rf /")
    assert run_settings({"batch": "8", "workers": "0", "imgsz": "64", "device": "cpu",
                         "size": "n", "data": "/d/data.yaml"}) == {
        "batch": 8, "workers": 0, "imgsz": 64, "device": "cpu", "size": "n",
        "data": "/d/data.yaml"}
    assert run_settings({"batch": "-1", "workers": "99999", "imgsz": "x",
                         "device": "0\x1b[2J"}) == {}


LESS_WORK = ("less loader work per image (images stored near the training size, lighter "
             "augmentation)")


def test_twelve_workers_on_16_cores_are_never_told_to_try_12() -> None:
    """The recorded starved step, had it run with 12 workers: the advice is more (up to a
    core short of 16), never the setting just measured."""
    cell = parse_cell(recorded(1), 16, 12)
    said = verdict([cell], (16, 12), 16, RATE)
    assert said == ("dataloader-bound: 12 of 16 cores feeding, 54% of each step waits on "
                    "data; try --workers 15 (--try workers=... measures it); a faster GPU "
                    "buys nothing")


def test_eight_workers_on_two_cores_are_told_the_cores_are_covered_not_to_shrink() -> None:
    cell = parse_cell(recorded(1), 16, 8)
    said = verdict([cell], (16, 8), 2, RATE)
    assert said == ("dataloader-bound: 8 loader workers on 2 cores feeding, 54% of each step "
                    "waits on data; the workers already cover the box's 2 cores, so more "
                    f"buy nothing; {LESS_WORK} or a box with more cores per GPU would help; "
                    "a faster GPU buys nothing")
    one_core = verdict([parse_cell(recorded(1), 16, 0)], (16, 0), 1, RATE)
    assert "the workers already cover the box's 1 core, so more buy nothing" in one_core


def test_more_workers_measured_without_gain_are_not_suggested_again() -> None:
    """A grid tried 1 and 12 workers and 12 fed no faster (under the 5% a change must
    win by): 12 is not offered as news; what else would help is."""
    slow = parse_cell(recorded(1), 16, 1)
    same = dataclasses.replace(parse_cell(recorded(1), 16, 12), img_per_s=36.0)
    said = verdict([slow, same], (16, 1), 16, RATE)
    assert said == ("dataloader-bound: 1 of 16 cores feeding, 54% of each step waits on "
                    "data; more workers measured little or no gain (--workers 12: 36 img/s "
                    f"against 35); {LESS_WORK} would help; a faster GPU buys nothing")


@pytest.mark.parametrize("cpus", [None, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128])
def test_an_unmeasured_suggestion_only_ever_adds_workers_the_cores_can_run(
        cpus: int | None) -> None:
    for workers in range(0, 40):
        more = suggested_workers(cpus, workers)
        if cpus is not None and workers >= cpus - 1:
            assert more is None
            continue
        assert more is not None and more > workers
        assert cpus is None or more <= cpus - 1
        said = verdict([parse_cell(recorded(1), 16, workers)], (16, workers), cpus, RATE)
        offered = [int(n) for n in re.findall(r"--workers (\d+)", said)]
        assert offered == [more], said


async def test_P_on_a_demo_box_says_the_demo_line_not_install_libreyolo() -> None:
    """A demo box replays recorded runs: `P` there says so, as g, G and w do, before the
    refusal for a training run (whose `--force` then asked to pip install libreyolo on
    a box that is no box)."""
    from typing import cast

    from tui.actions.profile import profile_on
    from tui.model.config import BoxConfig
    from tui.model.profile import ProfileRequest
    from tui.model.runs import Health, RunState
    from tui.remote.session import BoxSession

    box = BoxConfig(name="lab-3090", host="127.0.0.1",
                    stand_in="a demo box replays recorded runs (`demo --real` trains one)")
    training = RunState(name="smoke", path="/r/smoke", root="/r", health=Health.RUNNING)
    for force in (False, True):
        report = await profile_on(cast(BoxSession, None), box,
                                  ProfileRequest(run="smoke", force=force), [training])
        assert report.outcome == "refused"
        assert report.message == f"box lab-3090: {box.stand_in}"
