"""Every field of a probe answer is checked before it is folded: a malformed answer is
that box's BadAnswer (probe_failed, with where), never a traceback."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tui.model.box import BadAnswer, BoxState, fold_answer
from tui.model.guard import describe, verdict
from tui.model.text import clean, clean_block, clean_data

GOOD: dict[str, Any] = {
    "v": 1, "time": 1_800_000_000.0, "boot": 1_799_000_000.0, "python": "3.10.12",
    "roots": [{"root": "/root/runs", "path": "/root/runs"}],
    "disks": [{"root": "/root/runs", "fs": "2049", "total": 100, "used": 40, "free": 60}],
    "runs": [{"path": "/root/runs/r1", "name": "r1", "root": "/root/runs", "s_sig": "1:2:3",
              "metrics": {"off": 10, "id": "1:2", "head": "ab", "text": '{"epoch": 1}\n',
                          "size": 10},
              "log": {"off": 4, "id": "1:3", "head": "cd", "text": "hi\n", "size": 4},
              "w_sig": "abc", "weights": [["best.pt", 10, 1.5, 1_500_000_000, 7]],
              "pid_alive": False, "errors": []}],
    "gone": [], "gpus": {"rows": ["0, NVIDIA A100, 5, 1, 2, 30, 50"]},
}


def bad(path: str, value: object) -> dict[str, Any]:
    """GOOD with the field at `path` (dotted, list indexes as numbers) set to `value`."""
    answer = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node: Any = answer
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return answer


def test_a_good_answer_folds() -> None:
    state = fold_answer(BoxState(name="b"), GOOD, 0.0)
    (run,) = state.runs
    assert run.weights[0].mtime_ns == 1_500_000_000 and run.weights[0].inode == 7
    assert state.gpus[0].name == "NVIDIA A100"


@pytest.mark.parametrize(("path", "value", "where"), [
    ("time", "now", "clock"),
    ("time", 1e300, "time"),
    ("runs.0", "a run", "runs[0]"),
    ("runs.0.path", 5, "runs[0].path"),
    ("runs.0.errors", 5, "runs[0].errors"),
    ("runs.0.errors", [{"x": 1}], "runs[0].errors"),
    ("runs.0.metrics", "lots", "runs[0].metrics"),
    ("runs.0.metrics.off", -1, "runs[0].metrics.off"),
    ("runs.0.metrics.text", 12, "runs[0].metrics.text"),
    ("runs.0.log.reset", "yes", "runs[0].log.reset"),
    ("runs.0.weights", {"best.pt": 1}, "runs[0].weights"),
    ("runs.0.weights.0", ["best.pt", "big", 1.0], "runs[0].weights[0]"),
    ("runs.0.weights.0", ["best.pt", 10, float("nan")], "runs[0].weights[0]"),
    ("runs.0.weights.0", ["best.pt", 10, 1.0, -5, 7], "runs[0].weights[0]"),
    ("runs.0.pid_alive", "maybe", "runs[0].pid_alive"),
    ("runs.0.name", ["x"], "runs[0].name"),
    ("gone", 5, "gone"),
    ("gpus", ["row"], "gpus"),
    ("gpus.rows", 7, "gpus.rows"),
    ("disks.0.total", "big", "disks[0].total"),
    ("roots.0", 5, "roots[0]"),
    ("roots.0.warnings", -2, "roots[0].warnings"),
    ("truncated", "no", "truncated"),
    ("runs.0.w_dirs", "old", "runs[0].w_dirs"),
    ("runs.0.w_dirs", [["old"]], "runs[0].w_dirs"),
    ("runs.0.w_more", -3, "runs[0].w_more"),
    ("runs.0.w_more", 2**70, "runs[0].w_more"),
])
def test_a_malformed_field_is_a_bad_answer_naming_it(path: str, value: object,
                                                     where: str) -> None:
    with pytest.raises(BadAnswer) as info:
        fold_answer(BoxState(name="b"), bad(path, value), 0.0)
    assert where in str(info.value)


def test_nested_past_the_stack_is_a_bad_answer_not_a_crash() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    answer = bad("runs.0.status", {"schema_version": 1, "state": "running", "deep": deep})
    with pytest.raises(BadAnswer):
        fold_answer(BoxState(name="b"), answer, 0.0)


def test_clean_replaces_every_control_and_keeps_the_rest() -> None:
    assert clean("r\x1b]52;c;eA==\x07un\x9b2J\u202etxt.pt") == \
        "r\ufffd]52;c;eA==\ufffdun\ufffd2J\ufffdtxt.pt"
    assert clean("a\nb\tc") == "a\ufffdb c"
    assert clean_block("a\nb\x1b[2J\r\n") == "a\nb\ufffd[2J\n"
    assert clean("exp/yolo 9 ñ 中文 🚀") == "exp/yolo 9 ñ 中文 🚀"
    assert clean_data({"e\x1b": ["\x07", 1, None]}) == {"e\ufffd": ["\ufffd", 1, None]}


def test_folders_in_weights_are_bounded_cleaned_and_refuse_a_destroy() -> None:
    """A box may claim 10,000 folders in a run's weights/, or one named with 5000
    characters and escapes: the run keeps at most 16 short, cleaned names and a count
    of the rest, and the destroy guard names them in a bounded line."""
    many = [f"old{n}" for n in range(10_000)]
    for names, more in ((many, 0), (["x\x1b]52;c;eA==\x07" * 300 + "y" * 2000], 7)):
        answer = bad("runs.0.w_dirs", names)
        answer["runs"][0]["w_more"] = more
        state = fold_answer(BoxState(name="b"), answer, 0.0)
        (run,) = state.runs
        assert 1 <= len(run.weight_dirs) <= 16
        assert all(len(name) <= 64 and "\x1b" not in name and "\x07" not in name
                   for name in run.weight_dirs)
        assert run.weight_dirs_more == len(names) + more - len(run.weight_dirs)
        judged = verdict(state, {})
        (gap,) = [g for g in judged.gaps if g.run == "r1"]
        assert "a folder in weights/ no push takes" in gap.reason
        assert len(describe(judged.gaps)) < 2000
        assert any(p.startswith("weights/") and p.endswith("/") for p in gap.files)


def test_weights_sent_again_without_folders_clears_them() -> None:
    """The folders come with each weights listing: one without them means none are left."""
    answer = bad("runs.0.w_dirs", ["old"])
    state = fold_answer(BoxState(name="b"), answer, 0.0)
    assert state.runs[0].weight_dirs == ("old",)
    idle = copy.deepcopy(GOOD)
    del idle["runs"][0]["weights"]
    state = fold_answer(state, idle, 1.0)
    assert state.runs[0].weight_dirs == ("old",)  # not sent: unchanged
    state = fold_answer(state, GOOD, 2.0)
    assert state.runs[0].weight_dirs == ()
    assert not [g for g in verdict(state, {}).gaps if g.run == "r1"]
