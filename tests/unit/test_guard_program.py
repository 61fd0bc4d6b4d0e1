"""The on-box watchdog's own decisions, on plain values (its I/O is tested over sshd)."""

from __future__ import annotations

import pytest

from tui.onbox import guard


def watch(**config: object) -> guard.Watch:
    w = guard.Watch({"max_hours": 2.0, **config}, now=1000.0)
    return w


def seen(w: guard.Watch, path: str, state: str, at: float) -> None:
    w.progress[path] = {"key": [state, 1, 10], "at": at, "state": state, "epoch": 1,
                        "name": path.rsplit("/", 1)[-1]}


def test_triggers_fire_in_their_order() -> None:
    w = watch(no_progress_minutes=10)
    assert w.trigger(1000.0) is None  # nothing seen yet: no run finished, none stalled
    seen(w, "/r/a", "completed", 1000.0)
    assert w.trigger(1001.0) is None  # only old finished runs: a new one may be starting
    seen(w, "/r/a", "running", 1000.0)
    seen(w, "/r/b", "running", 1500.0)
    w.active_seen = True  # what look() notes when it reads a run that is not finished
    assert w.trigger(1000.0 + 1000) is None  # b progressed 500 s ago
    trigger, why = w.trigger(1500.0 + 600)
    assert trigger == "stalled" and "no epoch progress for 10 min while running: a, b" in why
    seen(w, "/r/a", "completed", 1000.0)
    seen(w, "/r/b", "failed", 1500.0)
    assert w.trigger(2100.0) == ("done", "every run finished (completed, failed)")
    assert w.trigger(1000.0 + 7200)[0] == "timeout"  # the limit first, whatever else holds
    w.progress.clear()
    w.idle_since = 1200.0
    assert w.trigger(1200.0 + 599) is None
    assert w.trigger(1200.0 + 600)[0] == "idle"
    assert watch().trigger(1e9)[0] == "timeout"
    quiet = watch()  # no --no-progress-minutes: stalled and idle are off
    seen(quiet, "/r/a", "running", 0.0)
    quiet.idle_since = 0.0
    assert quiet.trigger(5000.0) is None


def test_what_it_writes_holds_no_secret_and_no_control() -> None:
    guard._SECRETS.append("hf_sEcReT")
    try:
        assert guard.scrub("token hf_sEcReT in \x1b[2J\nerror" + "x" * 500, 40) == \
            "token *** in [2J error" + "x" * 17 + "~"
    finally:
        guard._SECRETS.remove("hf_sEcReT")


def test_without_its_own_key_it_says_it_cannot_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTAINER_API_KEY", raising=False)
    monkeypatch.setattr(guard, "box_env", lambda name: None)  # no container environment
    words = guard.credentials_words({"provider": "vast", "instance_id": "7"}, {})
    assert words.startswith("no CONTAINER_API_KEY in this box's environment")
    assert "cannot call the vast API" in words
    account = guard.credentials_words({"provider": "vast", "instance_id": "7"},
                                      {"account_key": "acct"})
    assert account == "the account-wide key sent with --use-account-key for instance 7"
    assert guard.credentials_words({"provider": "manual"}, {}).startswith(
        "no stop_command or destroy_command: it cannot stop")
    done, why, _ = guard.provider_act({"provider": "lambda"}, {"account_key": "k"}, "stop",
                                      dry_run=False)
    assert not done and why == "a Lambda instance cannot be stopped (only destroyed)"


def test_plain_http_goes_to_loopback_only() -> None:
    status, words, _ = guard.http("GET", "http://api.example.com/x", "key")
    assert status is None and words.startswith("refused: plain http to api.example.com")


def test_weights_no_push_takes_are_named_within_what_the_probe_reads(tmp_path) -> None:
    """30 runs, each with 50 long-named weights/ files no push takes: a destroy would lose
    them, so it is refused; the state names what fits in a bounded `kept` (the probe reads
    64 KiB of state at most) and counts the rest, never reading as "nothing else"."""
    import json

    from tui.model.watchdog import fold_guard, guard_summary

    folder = tmp_path / "guard"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"id": "x", "provider": "manual"}))
    runs = []
    for r in range(30):
        run = tmp_path / "runs" / f"run{r:02d}"
        (run / "weights").mkdir(parents=True)
        (run / "weights" / "best.pt").write_bytes(b"b")
        (run / "weights" / "epoch_10.pt").write_bytes(b"e")  # taken when a destroy follows
        for n in range(50):
            (run / "weights" / f"{'é' * 100}{n:02d}.pt").write_bytes(b"x")
        runs.append((str(run), str(run.parent), run.name))
    watchdog = guard.Guard(str(folder))
    watchdog.watch.runs = runs
    assert watchdog.left_out()
    state = watchdog.state(1000.0)
    assert len(json.dumps(state["kept"])) <= guard.KEPT_BYTES
    assert len(json.dumps(state)) < 1 << 16
    assert 1 <= len(state["kept"]) <= guard.MAX_KEPT
    assert len(state["kept"]) + state["kept_more"] == 30
    first = state["kept"][0]
    assert first["run"] == "run00" and len(first["files"]) + first["more"] == 50
    assert not any("epoch_10" in f or "best.pt" in f for k in state["kept"] for f in k["files"])
    view = fold_guard({**state, "fired": {"trigger": "timeout", "at": 999.0, "why": "limit"}},
                      1000.0)
    assert f"+{30 - 2} more run(s)" in guard_summary(view, 1000.0)[0]


def test_a_folder_in_weights_is_left_out_of_every_push_so_it_blocks_a_destroy(
        tmp_path) -> None:
    """weights/old/epoch_5.pt is in no push (a push takes files of weights/ only): a destroy
    would lose it. A run holding only what a destroying push takes blocks nothing."""
    import json

    folder = tmp_path / "guard"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"id": "x", "provider": "manual"}))
    runs = []
    for name in ("clean", "nested"):
        run = tmp_path / "runs" / name
        (run / "weights").mkdir(parents=True)
        for w in ("best.pt", "last.pt", "epoch_10.pt"):
            (run / "weights" / w).write_bytes(b"w")
        runs.append((str(run), str(run.parent), name))
    watchdog = guard.Guard(str(folder))
    watchdog.watch.runs = runs[:1]
    assert not watchdog.left_out() and watchdog.kept == []
    (tmp_path / "runs" / "nested" / "weights" / "old").mkdir()
    (tmp_path / "runs" / "nested" / "weights" / "old" / "epoch_5.pt").write_bytes(b"w")
    watchdog.watch.runs = runs
    assert watchdog.left_out()
    assert [(k["run"], k["files"]) for k in watchdog.kept] == [("nested", ["weights/old/"])]
