"""One box's hostile answer never takes down the fleet: every number a box sends is
bounded where the model parses it, and what a front end derives from the folded
state (the guard, the sizing, the milestones, `status`) never raises.

The fuzz runs the probe's answer schema with a fixed seed for a bounded time."""

from __future__ import annotations

import json
import time

from support.hostile_answers import DIGITS, HUGE_NAME, base_answer, hostile_answers, huge_int

from tui.actions.push import files_to_push
from tui.model.box import BadAnswer, BoxState, fold_answer
from tui.model.config import PushTarget
from tui.model.guard import picture_gaps, unpushed_weights, verdict
from tui.model.milestones import Milestones, plan, pushed_epochs
from tui.model.preflight import parse_arch, parse_smi_base, parse_throttle, parse_version
from tui.model.runs import WeightFile, format_age
from tui.model.sizing import project_disk, project_run, save_period_of
from tui.model.status_doc import status_document, status_table
from tui.model.unpushed import at_stake
from tui.model.watchdog import fold_guard
from widgets.fleet_text import box_head_line, box_problem_line, run_main_line

NOW = 1_800_000_000.0
SEED = 22
FUZZ_SECONDS = 3.0
PUSH = PushTarget(local_dir="/tmp/out", every_epochs=10, on_best=True, on_complete=True)


def derive_everything(state: BoxState, good: BoxState) -> None:
    """What status, watch, the panel and destroy compute from a folded box."""
    doc = status_document([state, good], NOW, None, {})
    assert [b["name"] for b in doc["boxes"]] == ["hostile", "good"]
    json.dumps(doc, allow_nan=False)  # `status --json` is JSON: no NaN, no Infinity
    status_table([state, good], NOW)
    unpushed_weights(state.runs, {})
    verdict(state, {})
    picture_gaps(state)
    project_disk(state, stopped_usd_per_hr=0.1)
    plan(PUSH, state, [], Milestones(), NOW)
    box_head_line(state, "vast", NOW)
    box_problem_line(state, NOW)
    for run in state.runs:
        project_run(run)
        at_stake(run, None, 2.0)
        run_main_line(run)


def good_box() -> BoxState:
    return fold_answer(BoxState(name="good"), base_answer(NOW), NOW)


def test_a_5000_digit_checkpoint_name_is_an_odd_file_and_not_a_crash() -> None:
    """`weights/epoch_<5000 digits>.pt` is no epoch file: the guard lists it as a file
    no push takes, the sizing and milestones skip it, and a push does not pick it."""
    answer = base_answer(NOW)
    answer["runs"][0]["weights"].insert(1, [HUGE_NAME, 1000, NOW - 55, 9, 10])
    state = fold_answer(BoxState(name="hostile"), answer, NOW)
    (run,) = state.runs
    epochs = {w.name: w.epoch for w in run.weights}
    assert epochs == {"best.pt": None, "epoch_10.pt": 10, HUGE_NAME: None, "last.pt": None}
    (odd_words,) = run.problems
    assert odd_words.startswith("odd checkpoint weights/epoch_999") and len(odd_words) < 200
    (odd, stale) = unpushed_weights(state.runs, {})
    assert odd.files == (f"weights/{HUGE_NAME}",)
    assert odd.reason.startswith("no push takes these")
    assert stale.files == ("weights/best.pt", "weights/last.pt", "status.json",
                           "weights/epoch_10.pt")
    assert save_period_of(run.weights) == 10
    wish = plan(PUSH, state, [], Milestones(), NOW)
    assert wish is not None and wish.epochs == (10,)
    assert files_to_push([f"weights/{HUGE_NAME}", "weights/epoch_10.pt"], True) == \
        ["weights/epoch_10.pt"]
    derive_everything(state, good_box())


def test_epoch_numbers_are_bounded_where_the_listing_is_read() -> None:
    assert WeightFile("epoch_20.pt", 1, 0.0).epoch == 20
    assert WeightFile("epoch_000000007.pt", 1, 0.0).epoch == 7
    for name in ("epoch_" + "9" * 250 + ".pt", "epoch_1234567890.pt", "epoch_\u0665.pt",
                 "epoch_-5.pt", "epoch_.pt", "epoch_1e9.pt", "best.pt"):
        assert WeightFile(name, 1, 0.0).epoch is None, name
    journal = [{"box": "b", "action": "push", "outcome": "done", "verified": True,
                "run_path": "/r", "files": [{"name": f"weights/{HUGE_NAME}"},
                                            {"name": "weights/epoch_30.pt"}]}]
    assert pushed_epochs(journal, "b") == {"/r": {30}}


def test_fuzzed_answers_fold_or_are_that_boxs_bad_answer_and_nothing_downstream_raises(
        ) -> None:
    """Fixed seed, bounded time: each hostile answer folds into a box (its odd values
    dropped) or is that box's BadAnswer with words; then every front end's figures are
    derived from it, beside a good box, without an exception."""
    good = good_box()
    deadline = time.monotonic() + FUZZ_SECONDS
    tried = folded = 0
    for label, answer in hostile_answers(SEED, NOW):
        if time.monotonic() > deadline and tried >= 50:
            break
        tried += 1
        try:
            state = fold_answer(BoxState(name="hostile"), answer, NOW)
        except BadAnswer as exc:
            assert str(exc), label
            continue
        except Exception as exc:
            raise AssertionError(f"fold raised {type(exc).__name__} on {label}") from exc
        folded += 1
        try:
            derive_everything(state, good)
            again = fold_answer(state, base_answer(NOW), NOW + 1)  # a good answer after it
            derive_everything(again, good)
        except Exception as exc:
            raise AssertionError(f"{type(exc).__name__} on {label}: {exc!s:.200}") from exc
    assert tried >= 50 and folded >= 10, (tried, folded)


def test_terabyte_disks_and_checkpoints_keep_their_size() -> None:
    """Bytes are bounded as bytes (2**64-1), not as counts (1e12): a 4 TB disk read as
    0 B total and 0 B free."""
    answer = base_answer(NOW)
    answer["disks"][0].update(total=4 * 10 ** 12, used=10 ** 12 + 5, free=3 * 10 ** 12 - 5)
    answer["runs"][0]["weights"][0][1] = 2 * 10 ** 12
    state = fold_answer(BoxState(name="big"), answer, NOW)
    (disk,) = state.disks
    assert (disk.total, disk.used, disk.free) == (4 * 10 ** 12, 10 ** 12 + 5, 3 * 10 ** 12 - 5)
    assert state.runs[0].weights[0].size == 2 * 10 ** 12


def test_preflights_numbers_in_a_boxs_text_are_bounded() -> None:
    """`check` reads nvidia-smi's and Python's words: a superscript digit (which
    str.isdigit() passes and int() refuses) or 5000 digits is an unreadable row or no
    version, never a ValueError."""
    assert parse_version("9" * DIGITS) is None
    assert parse_version("2.5.1+cu124") == (2, 5, 1)
    assert parse_throttle("\u00b2, 0x1\n0, 0x4\n") == {0: 4}
    gpus, bad = parse_smi_base("\u00b2," + ",".join(["x"] * 11) + "\n")
    assert (gpus, bad) == ([], 1)
    assert parse_arch("sm_\u0665\u0665") is None and parse_arch("sm_90a") == ("sm", 9, 0, "a")


def test_durations_are_bounded_so_no_eta_or_json_field_is_infinite() -> None:
    """Seven epochs of 1e308 s each summed to infinity: `status --json` wrote
    `Infinity` (no JSON reader takes it) and the ETA read 'inf s'."""
    answer = base_answer(NOW)
    answer["runs"][0]["metrics"]["text"] = "".join(
        json.dumps({"epoch": n, "train/loss": 1.0, "time": 1e308}) + "\n" for n in range(1, 8))
    answer["runs"][0]["status"].update(mean_epoch_seconds=1e308, eta_seconds=1e308)
    state = fold_answer(BoxState(name="slow"), answer, NOW)
    (run,) = state.runs
    assert run.mean_epoch_seconds is None and run.eta_seconds is None
    json.dumps(status_document([state], NOW), allow_nan=False)
    assert format_age(float("inf")) == "?" and format_age(float("nan")) == "?"
    assert format_age(1e300).endswith("h") and len(format_age(1e300)) < 20


def test_a_bad_value_is_named_briefly() -> None:
    """Naming a box's bad value in words (a version, a state) must not itself raise:
    repr() of a 5000-digit number does."""
    assert "16610-bit number" in (fold_guard({"v": huge_int()}, None).error or "")
    answer = base_answer(NOW)
    answer["runs"][0]["status"]["state"] = huge_int()
    (run,) = fold_answer(BoxState(name="b"), answer, NOW).runs
    assert run.reason == "status.json has an unknown state a 16610-bit number"
    answer["runs"][0]["status"]["state"] = "x" * 100_000
    (run,) = fold_answer(BoxState(name="b"), answer, NOW).runs
    assert len(run.reason) < 100


def test_hostile_folder_listings_in_weights_fold_bounded_or_are_a_bad_answer() -> None:
    """Each hostile value as the folders in weights/ (the list, a name, the count of the
    rest) folds to at most 16 short names and a whole count, or is that box's BadAnswer;
    a folded one refuses a destroy and nothing downstream raises."""
    from support.hostile_answers import hostile_values

    good = good_box()
    for value in hostile_values():
        for key, raw in (("w_dirs", value), ("w_dirs", [value, "old"]), ("w_more", value)):
            answer = base_answer(NOW)
            answer["runs"][0].update({"w_dirs": ["old"], key: raw})
            try:
                state = fold_answer(BoxState(name="hostile"), answer, NOW)
            except BadAnswer as exc:
                assert len(str(exc)) < 300
                continue
            (run,) = state.runs
            assert len(run.weight_dirs) <= 16 and all(len(n) <= 48 for n in run.weight_dirs)
            assert 0 <= run.weight_dirs_more <= 2 ** 64
            refused = any(g.run == "hostile" for g in verdict(state, {}).gaps)
            assert refused == bool(run.weight_dirs or run.weight_dirs_more), key
            derive_everything(state, good)
