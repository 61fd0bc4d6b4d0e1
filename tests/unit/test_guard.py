"""The unpushed-weights guard and the journal it reads."""

from __future__ import annotations

from pathlib import Path

from tui.model.guard import last_verified_pushes, push_note, unpushed_weights
from tui.model.runs import RunState, WeightFile
from tui.store.journal import Journal
from tui.store.jsonl import read_jsonl


def run_with(*weights: WeightFile, path: str = "/root/runs/r1") -> RunState:
    return RunState(path=path, name=path.rsplit("/", 1)[-1], root="/root/runs",
                    weights=tuple(weights))


BEST = WeightFile("best.pt", 1000, 500.0)
LAST = WeightFile("last.pt", 1000, 600.0)
EPOCH = WeightFile("epoch_10.pt", 1000, 400.0)


def push_files(*weights: WeightFile) -> list[dict[str, object]]:
    return [{"name": f"weights/{w.name}", "size": w.size, "mtime": w.mtime, "sha256": "ab"}
            for w in weights]


def test_never_pushed_and_then_pushed_and_then_changed(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    run = run_with(BEST, LAST, EPOCH)
    (stale,) = unpushed_weights([run], last_verified_pushes(journal.entries, "box"))
    assert stale.files == ("weights/best.pt", "weights/last.pt")
    assert stale.reason == "never pushed"
    journal.record(box="box", action="push", outcome="done", run="r1", run_path=run.path,
                   files=push_files(BEST, LAST), destination="hf://me/repo/r1/",
                   verified=True, at=700.0)
    pushes = last_verified_pushes(Journal(tmp_path / "journal.jsonl").entries, "box")
    assert unpushed_weights([run], pushes) == []
    assert push_note(run, pushes, 880.0) == "pushed 3m ago, verified"
    newer = run_with(WeightFile("best.pt", 1000, 900.0), LAST)
    (stale,) = unpushed_weights([newer], pushes)
    assert stale.files == ("weights/best.pt",)
    assert push_note(newer, pushes, 900.0) == "best.pt changed since the last verified push"


def test_only_done_and_verified_pushes_of_that_box_count(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    run = run_with(BEST)
    journal.record(box="box", action="push", outcome="failed", run_path=run.path,
                   files=push_files(BEST), verified=False)
    journal.record(box="box", action="push", outcome="done", run_path=run.path,
                   files=push_files(BEST), verified=False)
    journal.record(box="other", action="push", outcome="done", run_path=run.path,
                   files=push_files(BEST), verified=True)
    assert len(unpushed_weights([run], last_verified_pushes(journal.entries, "box"))) == 1
    assert unpushed_weights([run_with()], {}) == []  # no weights: nothing to lose


def test_journal_survives_a_torn_line_and_keeps_no_token(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.record(box="b", action="stop", outcome="done", message="stopped")
    with path.open("ab") as f:
        f.write(b'{"v":1,"time":')
    again = Journal(path)
    assert len(again.entries) == 1 and again.skipped == 1
    again.record(box="b", action="start", outcome="unknown", error="timeout")
    records, skipped = read_jsonl(path)
    assert [r["action"] for r in records] == ["stop", "start"] and skipped == 1


def test_a_journal_line_with_a_bad_time_is_not_a_push() -> None:
    entries = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
                "run_path": "/root/runs/r1", "time": "yesterday",
                "files": push_files(BEST)}]
    assert last_verified_pushes(entries, "box") == {}
