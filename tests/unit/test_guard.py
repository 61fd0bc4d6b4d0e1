"""The destroy guard (fails closed, on exact file identity) and the journal it reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tui.model.box import BoxState, Connection
from tui.model.guard import (
    PICTURE,
    last_verified_pushes,
    push_note,
    snapshot_words,
    unpushed_weights,
    verdict,
)
from tui.model.runs import Health, RunState, WeightFile
from tui.store.journal import Journal
from tui.store.jsonl import read_jsonl


def run_with(*weights: WeightFile, path: str = "/root/runs/r1", **fields: object) -> RunState:
    return RunState(path=path, name=path.rsplit("/", 1)[-1], root="/root/runs",
                    weights=tuple(weights), **fields)  # type: ignore[arg-type]


BEST = WeightFile("best.pt", 1000, 500.0, 500_000_000_123, 11)
LAST = WeightFile("last.pt", 1000, 600.0, 600_000_000_456, 12)
EPOCH = WeightFile("epoch_10.pt", 1000, 400.0, 400_000_000_000, 13)


def push_files(*weights: WeightFile) -> list[dict[str, object]]:
    return [{"name": f"weights/{w.name}", "size": w.size, "mtime": w.mtime,
             "mtime_ns": w.mtime_ns, "inode": w.inode, "sha256": "ab"} for w in weights]


def box(*runs: RunState, **fields: object) -> BoxState:
    return BoxState(name="box", connection=Connection.OK, runs=runs, **fields)  # type: ignore


def test_never_pushed_and_then_pushed_and_then_changed(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    run = run_with(BEST, LAST, EPOCH)
    (stale,) = unpushed_weights([run], last_verified_pushes(journal.entries, "box"))
    assert stale.files == ("weights/best.pt", "weights/last.pt", "weights/epoch_10.pt")
    assert stale.reason == "never pushed"
    journal.record(box="box", action="push", outcome="done", run="r1", run_path=run.path,
                   files=push_files(BEST, LAST), destination="hf://me/repo/r1/",
                   verified=True, at=600.0)
    pushes = last_verified_pushes(Journal(tmp_path / "journal.jsonl").entries, "box")
    (stale,) = unpushed_weights([run], pushes)  # a push without --epochs
    assert stale.files == ("weights/epoch_10.pt",) and stale.snapshots
    assert stale.reason == "never pushed: epoch snapshots go with push --epochs"
    assert push_note(run, pushes, 620.0) == \
        "pushed 20s ago, verified; 1 epoch snapshot never pushed"
    journal.record(box="box", action="push", outcome="done", run="r1", run_path=run.path,
                   files=push_files(BEST, LAST, EPOCH), destination="hf://me/repo/r1/",
                   verified=True, at=700.0)
    pushes = last_verified_pushes(Journal(tmp_path / "journal.jsonl").entries, "box")
    assert unpushed_weights([run], pushes) == []
    assert push_note(run, pushes, 880.0) == "pushed 3m ago, verified"
    newer = run_with(replace(BEST, mtime=900.0, mtime_ns=900_000_000_000), LAST)
    (stale,) = unpushed_weights([newer], pushes)
    assert stale.files == ("weights/best.pt",)
    assert push_note(newer, pushes, 900.0) == "best.pt changed since the last verified push"


def test_a_checkpoint_rewritten_at_the_same_size_within_a_second_is_unpushed() -> None:
    """The old guard allowed 1 s of mtime slack and ignored the inode: a torch.save
    that lands in the same second at the same size read as already pushed."""
    entries = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
                "run_path": "/root/runs/r1", "time": 700.0, "files": push_files(BEST)}]
    pushes = last_verified_pushes(entries, "box")
    same_second = replace(BEST, mtime=BEST.mtime + 0.4, mtime_ns=BEST.mtime_ns + 400_000_000)
    assert unpushed_weights([run_with(same_second)], pushes)[0].files == ("weights/best.pt",)
    one_ns = replace(BEST, mtime_ns=BEST.mtime_ns + 1)
    assert unpushed_weights([run_with(one_ns)], pushes)
    replaced = replace(BEST, inode=99)  # written elsewhere and renamed over it
    assert unpushed_weights([run_with(replaced)], pushes)
    assert unpushed_weights([run_with(BEST)], pushes) == []


def test_a_push_or_listing_without_exact_identity_vouches_for_nothing() -> None:
    old = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
            "run_path": "/root/runs/r1", "time": 700.0,
            "files": [{"name": "weights/best.pt", "size": 1000, "mtime": 500.0}]}]
    (stale,) = unpushed_weights([run_with(BEST)], last_verified_pushes(old, "box"))
    assert "exact identity" in stale.reason and "push again" in stale.reason
    exact = last_verified_pushes([{**old[0], "files": push_files(BEST)}], "box")
    vague = WeightFile("best.pt", 1000, 500.0)  # a box that sent no mtime_ns / inode
    assert unpushed_weights([run_with(vague)], exact)


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


def test_a_push_overwritten_by_another_runs_push_vouches_for_nothing() -> None:
    """Two runs pushed to one destination (runs of one name, before destinations were
    unique per run path): the second overwrote the first, both read verified, and the
    guard let a destroy lose the first run's weights."""
    def pushed(box: str, path: str, dest: str, at: float, **extra: object) -> dict[str, object]:
        return {"box": box, "action": "push", "outcome": "done", "verified": True,
                "run_path": path, "time": at, "destination": dest, "files": push_files(BEST),
                **extra}

    one, two = "/a/exp1", "/b/exp1"
    run = run_with(BEST, path=one)
    shared = [pushed("box", one, "/ckpt/box/exp1/", 700.0),
              pushed("box", two, "/ckpt/box/exp1/", 800.0)]
    (stale,) = unpushed_weights([run], last_verified_pushes(shared, "box"))
    assert stale.files == ("weights/best.pt",)
    assert "overwritten" in stale.reason and two in stale.reason
    assert push_note(run, last_verified_pushes(shared, "box"), 900.0) == stale.reason
    # Another box's run of that name pushed to the same Hub prefix: the same loss.
    hub = [pushed("box", one, "hf://me/r/exp1/", 700.0),
           pushed("other", one, "hf://me/r/exp1/", 800.0, outcome="failed", verified=False)]
    assert unpushed_weights([run], last_verified_pushes(hub, "box"))
    # Pushed again after it was overwritten: pushed. An older copy elsewhere still holds
    # it when the newer one was overwritten.
    again = [*shared, pushed("box", one, "/ckpt/box/exp1/", 900.0)]
    assert unpushed_weights([run], last_verified_pushes(again, "box")) == []
    assert unpushed_weights([run], last_verified_pushes(
        [pushed("box", one, "/elsewhere/exp1/", 650.0), *shared], "box")) == []


def test_a_runs_history_is_guarded_like_its_weights() -> None:
    """Only best.pt and last.pt counted: a run that failed before saving weights, or one
    whose train.log or train_config.yaml was never pushed, was destroyed unasked."""
    log = WeightFile("train.log", 50, 800.0, 800_000_000_000, 21)
    config = WeightFile("train_config.yaml", 10, 100.0, 100_000_000_000, 22)
    early = run_with(path="/root/runs/early", files=(log, config))
    (stale,) = unpushed_weights([early], {})
    assert stale.files == ("train.log", "train_config.yaml") and stale.reason == "never pushed"
    pushed = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
               "run_path": early.path, "time": 900.0,
               "files": [{"name": "train.log", "size": 50, "mtime": 800.0,
                          "mtime_ns": 800_000_000_000, "inode": 21}]}]
    (stale,) = unpushed_weights([early], last_verified_pushes(pushed, "box"))
    assert stale.files == ("train_config.yaml",)
    grown = replace(early, files=(replace(log, size=80), config))
    assert unpushed_weights([grown], last_verified_pushes(pushed, "box"))[0].files == (
        "train.log", "train_config.yaml")


def test_a_live_training_process_is_said() -> None:
    run = run_with(BEST, health=Health.RUNNING, pid_alive=True)
    (stale,) = unpushed_weights([run], {})
    assert "process is alive" in stale.reason and "will change" in stale.reason
    judged = verdict(box(run), {})
    assert judged.live == ("r1",) and judged.refused


def test_an_incomplete_picture_refuses_with_why() -> None:
    clean = verdict(box(run_with()), {})
    assert not clean.refused and clean.blockers == []
    cases = {
        "unmounted": box(root_problems=("runs root /workspace/runs: FileNotFoundError: x",)),
        "cut short": box(truncated=True),
        "hidden": box(hidden=("/root/runs/exp/sub: a run below another run's directory",)),
        "weights": box(run_with(weights_error="PermissionError: denied")),
        "unseen": BoxState(name="box", connection=Connection.TIMEOUT, error="no answer"),
    }
    for what, state in cases.items():
        judged = verdict(state, {})
        assert judged.refused and judged.gaps, what
        assert all(g.run == PICTURE and g.reason for g in judged.gaps), what
    assert "unmounted volume" in verdict(cases["unmounted"], {}).gaps[0].reason
    assert verdict(cases["weights"], {}).gaps[0].files == ("r1/weights",)


def test_a_stopped_box_is_refused_as_stopped_not_unreachable() -> None:
    """A box you stopped cannot be looked at, so destroy still refuses; the reason says
    it is stopped (as its header does), not "unreachable: connection refused"."""
    from tui.model.rest import Rest

    stopped = BoxState(name="box", connection=Connection.UNREACHABLE,
                       error="connection refused", rest=Rest("stopped", at=1.0))
    judged = verdict(stopped, {})
    assert judged.refused
    (gap,) = judged.gaps
    assert gap.reason.startswith("the box is stopped (by you): "), gap.reason
    assert "unreachable" not in gap.reason and "refused" not in gap.reason


def test_an_override_covers_exactly_what_was_shown() -> None:
    shown = verdict(box(run_with(BEST)), {}).blockers
    later = verdict(box(run_with(BEST), run_with(LAST, path="/root/runs/r2")), {})
    (beyond,) = later.beyond(shown)
    assert beyond.run == "r2"
    assert verdict(box(run_with(replace(BEST, size=5))), {}).beyond(shown) == []


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


def test_a_journal_sees_what_another_process_appended(tmp_path: Path) -> None:
    """A long-running panel's journal read the file once: a push made meanwhile by the
    CLI (another Journal on the same file) never reached its guard or dialog."""
    path = tmp_path / "journal.jsonl"
    panel, cli = Journal(path), Journal(path)
    assert panel.entries == []
    seen = panel.version
    cli.record(box="box", action="push", outcome="done", run_path="/root/runs/r1",
               files=push_files(BEST), verified=True, at=700.0)
    assert panel.version != seen
    assert [e["action"] for e in panel.entries] == ["push"]
    assert unpushed_weights([run_with(BEST)], last_verified_pushes(panel.entries, "box")) == []
    panel.record(box="box", action="destroy", outcome="refused")
    assert [e["action"] for e in cli.entries] == ["push", "destroy"]
    assert [e["action"] for e in panel.entries] == ["push", "destroy"]  # once each


def test_a_journal_line_with_a_bad_time_is_not_a_push() -> None:
    entries = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
                "run_path": "/root/runs/r1", "time": "yesterday",
                "files": push_files(BEST)}]
    assert last_verified_pushes(entries, "box") == {}


def test_the_guarded_history_is_what_a_push_keeps() -> None:
    """The probe lists, and the guard counts, exactly the history files a push sends: one
    it counted but never sent could never read as pushed; one sent but not counted would
    be lost unasked."""
    from tui.onbox import probe, push

    weights = {"weights/best.pt", "weights/last.pt"}
    assert set(probe.HISTORY_FILES) == set(push.FIXED_FILES) - weights


def test_a_checkpoint_no_push_takes_is_named_not_lost_unasked() -> None:
    """`weights/best_ema.pt` is neither pushed nor guarded: a destroy lost it unasked."""
    ema = WeightFile("best_ema.pt", 900, 300.0, 300_000_000_000, 31)
    run = run_with(BEST, ema)
    pushed = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
               "run_path": run.path, "time": 700.0, "files": push_files(BEST)}]
    (stale,) = unpushed_weights([run], last_verified_pushes(pushed, "box"))
    assert stale.files == ("weights/best_ema.pt",)
    assert "no push takes" in stale.reason


EPOCH_20 = WeightFile("epoch_20.pt", 2_500_000_000, 450.0, 450_000_000_000, 14)


def test_epoch_snapshots_never_pushed_are_their_own_refusal() -> None:
    """After a push without --epochs the guard read every epoch_<N>.pt as "newer than its
    last verified push", in one refusal with best.pt's: nothing told the snapshots (given
    up with --without-snapshots) from a best.pt that changed (never given up)."""
    pushed = [{"box": "box", "action": "push", "outcome": "done", "verified": True,
               "run_path": "/root/runs/r1", "time": 700.0, "files": push_files(BEST, LAST)}]
    pushes = last_verified_pushes(pushed, "box")
    judged = verdict(box(run_with(BEST, LAST, EPOCH, EPOCH_20)), pushes)
    (snaps,) = judged.unpushed
    assert snaps.snapshots and snaps.files == ("weights/epoch_10.pt", "weights/epoch_20.pt")
    assert snaps.size == 2_500_001_000
    assert judged.only_snapshots and judged.snapshots == [snaps]
    assert snapshot_words(judged.snapshots) == "2 epoch snapshots (2.5 GB) were never pushed"
    # best.pt changed too: two refusals, and the snapshots alone do not settle it.
    newer = replace(BEST, mtime_ns=BEST.mtime_ns + 1)
    judged = verdict(box(run_with(newer, LAST, EPOCH)), pushes)
    assert [(u.files, u.snapshots) for u in judged.unpushed] == [
        (("weights/best.pt",), False), (("weights/epoch_10.pt",), True)]
    assert not judged.only_snapshots
    # A run never pushed is refused whole: its snapshots are not told apart.
    (never,) = verdict(box(run_with(BEST, EPOCH)), {}).unpushed
    assert not never.snapshots and "weights/epoch_10.pt" in never.files
    # A snapshot that was pushed and differs now is not "never pushed": it is refused.
    with_epoch = last_verified_pushes([{**pushed[0], "files": push_files(BEST, LAST, EPOCH)}],
                                      "box")
    changed = replace(EPOCH, inode=77)
    (stale,) = verdict(box(run_with(BEST, LAST, changed)), with_epoch).unpushed
    assert not stale.snapshots and "changed since the last verified push" in stale.reason
    # A gap in the picture is never a snapshot.
    gap = verdict(box(run_with(BEST, LAST, EPOCH), truncated=True), pushes)
    assert gap.snapshots and not gap.only_snapshots


def test_a_runs_row_counts_epoch_snapshots_instead_of_naming_each() -> None:
    """At 80x24 a row naming every epoch_<N>.pt ran over three lines: the row counts them
    (the refusal itself still lists every file)."""
    epochs = [WeightFile(f"epoch_{n}.pt", 1000, 400.0 + n, 400_000_000_000 + n, 100 + n)
              for n in range(10, 80, 10)]
    entry = {"box": "box", "action": "push", "outcome": "done", "verified": True,
             "run_path": "/root/runs/r1", "time": 700.0,
             "files": push_files(BEST, LAST, *epochs)}
    pushes = last_verified_pushes([entry], "box")
    rewritten = [replace(w, mtime_ns=(w.mtime_ns or 0) + 1) for w in (LAST, *epochs)]
    run = run_with(BEST, *rewritten)
    note = push_note(run, pushes, 800.0) or ""
    assert note == "last.pt and 7 epoch snapshots changed since the last verified push"
    (stale,) = unpushed_weights([run], pushes)
    assert len(stale.files) == 8  # what a destroy refuses still names each file
