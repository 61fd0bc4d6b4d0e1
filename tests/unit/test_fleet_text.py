"""The fleet screen's words, from plain snapshots: columns, box text, ages, the filter."""

from __future__ import annotations

from rich.cells import cell_len

from tui.model.box import BoxState, Connection, DiskRow
from tui.model.preflight import CheckVerdict
from tui.model.runs import Health, RunState
from widgets.fleet_text import (
    Due,
    box_head_line,
    box_health,
    box_problem_line,
    coarse_age,
    fit,
    fleet_line,
    matches,
    run_main_line,
    shown_runs,
    sparkline,
)
from widgets.preflight_text import check_item

NAMES = ["plain-run", "训练-模型-一号-大规模数据集", "🚀rocket🚀-yolo",
         "\uff46\uff55\uff4c\uff4c-width", "mixed 日本語 and text that is long"]


def run(name: str, **status: object) -> RunState:
    doc = {"schema_version": 1, "state": "running", "current_epoch": 7, "total_epochs": 30,
           **status}
    return RunState(path=f"/r/{name}", name=name, root="/r", health=Health.RUNNING,
                    reason="epoch 7/30", status=doc)


def test_wide_names_keep_every_column_in_place() -> None:
    """CJK and emoji take two cells each: the name column is cut and padded by cells,
    so the health badge, the epochs and the bar start at the same cell on every row."""
    lines = [run_main_line(run(name)).plain for name in NAMES]
    badge_at = {cell_len(line[:line.index("▶")]) for line in lines}
    assert badge_at == {21}
    assert len({cell_len(line) for line in lines}) == 1
    assert "…" in lines[1] and "…" in lines[4] and "…" not in lines[2]


def test_fit_counts_cells() -> None:
    assert fit("abc", 5) == "abc  "
    assert cell_len(fit("日本語日本語", 5)) == 5
    assert fit("日本語日本語", 5).endswith("…")
    assert cell_len(fit("a日", 2)) == 2


def test_box_text_cannot_drive_the_terminal() -> None:
    line = run_main_line(run("\x1b]0;owned\x07x")).plain
    assert "\x1b" not in line and "\x07" not in line and "\ufffd" in line
    box = BoxState(name="b", connection=Connection.UNREACHABLE, error="gone\x1b[2J\nretry")
    problem = box_problem_line(box, 0.0)
    assert problem is not None and problem.plain == "gone\ufffd[2J\nretry"


def test_filter_by_health_word_or_name() -> None:
    assert matches(run("yolox-n coco"), "COCO")
    assert matches(run("x"), "runn")
    assert not matches(run("x"), "fail")
    assert matches(run("x"), "  ")


def test_sparkline_is_as_wide_as_asked_and_survives_huge_values() -> None:
    assert sparkline([]) == "▁" * 14
    assert sparkline([3.0]) == "█" * 14
    bars = sparkline([5.0, 4.0, 3.0, 2.0, 1.0])
    assert len(bars) == 14 and bars[0] == "█" and bars[-1] == "▁"
    assert len(sparkline([1e308, -1e308, 1e308])) == 14
    assert sparkline([float(i) for i in range(200)])[-1] == "█"  # the last 60 points


def test_due_says_when_a_shown_age_next_changes() -> None:
    due = Due(1000.0)
    assert due.age(12.3) == "12s"
    assert abs(due.at - (1000.0 + 0.7)) < 1e-6
    due = Due(1000.0)
    assert due.age(130.0) == "2m"
    assert due.at == 1000.0 + 50.0
    due = Due(1000.0)
    assert due.countdown(125.0) == "2m"
    assert due.at == 1000.0 + 5.0
    due = Due(1000.0)
    assert due.countdown(0.0) == "0s" and due.at == float("inf")


def test_a_down_box_says_why_and_counts_down_its_retry() -> None:
    box = BoxState(name="b", connection=Connection.TIMEOUT, error="no answer\nwithin 15 s",
                   last_ok_at=900.0, retry_at=1040.0)
    due = Due(1000.0)
    head = box_head_line(box, "vast", 1000.0, due).plain
    assert "✖ timeout" in head and "data 1m old" in head
    problem = box_problem_line(box, 1000.0, due)
    assert problem is not None and problem.plain == "no answer\nwithin 15 s (retry in 40s)"
    assert due.at == 1001.0  # the countdown moves every second under a minute


def test_a_runs_status_age_moves_by_the_minute() -> None:
    """Seconds would redraw every row at every refresh and say nothing the health does not."""
    assert coarse_age(5) == coarse_age(59) == "<1m ago"
    assert coarse_age(61) == "1m ago" and coarse_age(3700) == "1h01m ago"


def test_the_disk_figure_says_which_filesystem_it_is() -> None:
    """`df`'s Use% of the filesystem holding the runs: a box's / (overlay) may be nearly
    full while /workspace is empty, so the figure alone says nothing (issue 11)."""
    gb = 10**9
    box = BoxState(name="b", connection=Connection.OK, last_ok_at=1000.0, disks=(
        DiskRow("/root/runs", 20 * gb, 5 * gb, 13 * gb, "/", "overlay", "overlay"),
        DiskRow("/workspace/runs", 100 * gb, 95 * gb, 5 * gb, "/workspace", "/dev/sda1",
                "ext4"),
        DiskRow("/old/runs", 10 * gb, 1 * gb, 9 * gb),  # an older probe names no mount
        DiskRow("/x", gb, 0, gb, "/mnt/" + "deep/" * 20 + "end", None, "nfs4")))
    head = box_head_line(box, "vast", 1000.0)
    assert "disk 28% of / (overlay)" in head.plain  # 5 / (5 + 13), rounded up as df does
    assert "disk 95% of /workspace (ext4)" in head.plain
    assert "disk 10% at /old/runs" in head.plain
    deep = head.plain[head.plain.index("disk 0%"):]
    assert deep.endswith("(nfs4)") and "…" in deep and cell_len(deep) <= 11 + 24 + 7
    full = next(span for span in head.spans if head.plain[span.start:span.end].startswith(
        "  disk 95%"))
    assert "red" in str(full.style)


def test_a_folder_in_weights_is_named_in_the_run_row_and_status() -> None:
    """A folder in a run's weights/ (weights/old/) is what no push takes: the run's row,
    its detail (problems), `status` and `status --json` say so, short, where a push's
    note and the run's problems go."""
    from tui.model.box import fold_answer
    from tui.model.status_doc import status_document, status_table
    from widgets.fleet_text import BoxView, box_lines

    raw = {"path": "/r/r1", "name": "r1", "root": "/r", "w_sig": "s",
           "weights": [["best.pt", 10, 1.5, 1_500_000_000, 7]], "w_dirs": ["old"]}
    state = fold_answer(BoxState(name="b"), {"v": 1, "time": 1_800_000_000.0, "runs": [raw]},
                        0.0)
    words = "weights/old/: a folder in weights/ no push takes"
    row = "\n".join(line.text.plain for line in box_lines(BoxView(state), "", 0.0).lines)
    assert words in row, row
    assert words in status_table([state], 0.0)
    (doc_run,) = status_document([state], 0.0)["boxes"][0]["runs"]
    assert any(words in p for p in doc_run["problems"]), doc_run["problems"]


def test_a_failed_check_is_a_short_item_in_the_box_header() -> None:
    """`check ✗ CUDA not available: no GPU visible to this…` wrapped every box header at
    80x24; the header says what failed, the check's own lines say the rest."""
    verdict = CheckVerdict("problems", "CUDA not available: no GPU visible to this container "
                           "(and no nvidia-smi) (+1 more)", None)
    item = check_item(verdict)
    assert item is not None and item.plain == "check ✗ CUDA not available (+1 more)"
    long = CheckVerdict("problems", "torch 2.5.1+cpu is a CPU-only build: it cannot use a GPU",
                        None)
    shown = check_item(long)
    assert shown is not None and cell_len(shown.plain) <= 38


def test_the_filter_shows_a_whole_box_by_name_and_leaves_out_boxes_it_finds_nothing_on(
) -> None:
    box = BoxState(name="Vast-4090-a", connection=Connection.OK,
                   runs=(run("coco-1"), run("voc-2")))
    assert shown_runs(box, "") == (("/r/coco-1", "/r/voc-2"), True)
    assert shown_runs(box, "4090") == (("/r/coco-1", "/r/voc-2"), True)  # part of its name
    assert shown_runs(box, " VOC ") == (("/r/voc-2",), True)
    assert shown_runs(box, "stalled") == ((), False)  # nothing here: the box is left out
    assert shown_runs(BoxState(name="empty"), "") == ((), True)  # no filter: every box


def test_a_box_counts_as_its_worst_run_or_why_it_does_not_answer() -> None:
    def with_health(*healths: Health) -> BoxState:
        return BoxState(name="b", connection=Connection.OK, runs=tuple(
            RunState(path=f"/r/{i}", name=str(i), root="/r", health=h, reason="")
            for i, h in enumerate(healths)))

    assert box_health(with_health()) == "ok"
    assert box_health(with_health(Health.RUNNING, Health.COMPLETED)) == "ok"
    assert box_health(with_health(Health.RUNNING, Health.STALLED)) == "stalled"
    assert box_health(with_health(Health.STALLED, Health.DEAD, Health.FAILED)) == "dead"
    assert box_health(BoxState(name="b")) == "connecting"
    assert box_health(BoxState(name="b", connection=Connection.TIMEOUT)) == "unreachable"


def test_the_strip_says_a_box_with_troubled_runs_needs_a_look_not_that_it_is_dead() -> None:
    """Its own line reads `ok` (it answers): the strip must not call the box dead or
    failed; the runs' counts beside it say which runs are."""
    def box(name: str, *healths: Health, connection: Connection = Connection.OK) -> BoxState:
        return BoxState(name=name, connection=connection, runs=tuple(
            RunState(path=f"/r/{i}", name=str(i), root="/r", health=h, reason="")
            for i, h in enumerate(healths)))

    strip = fleet_line([box("a", Health.RUNNING), box("b", Health.DEAD),
                        box("c", Health.FAILED, Health.STALLED),
                        box("d", connection=Connection.TIMEOUT)])
    words = " ".join(strip.plain.split())
    assert "3/4 boxes up · 1 ok · 2 need a look · 1 unreachable" in words
    boxes_part = words.split("boxes up")[1].split("▶")[0]
    assert "dead" not in boxes_part and "failed" not in boxes_part
    need = next(span for span in strip.spans
                if strip.plain[span.start:span.end].startswith("2 need a look"))
    dead = next(span for span in strip.spans if strip.plain[span.start:span.end] == "☠ dead")
    assert need.style == dead.style  # in the colour of the worst run among them
