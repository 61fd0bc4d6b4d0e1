"""Serverless runs folded from the volume and judged with a fake clock: the timeout
countdown, an ETA past the timeout as a problem before it happens, GPU-seconds x price."""

from __future__ import annotations

import json

import pytest

from tui.model.beam_output import age_slack
from tui.model.config import ServerlessConfig
from tui.model.modal_output import app_from_list, classify, parse_size, version_problem
from tui.model.runs import Health
from tui.model.serverless import AppState, VolumeEntry, same_listing
from tui.model.serverless_prices import gpu_spec, price_problem, prices_dated, usd_per_second
from tui.model.serverless_runs import VolumeRead, app_problem, at_rest, fold_runs, run_folders
from tui.model.serverless_view import app_words, judge_run, timeout_words

T0 = 1796450400.0  # 2026-12-05 06:00:00 UTC: the run started
ENTRY = ServerlessConfig(name="m", provider="modal", app="yolo", volume="v", runs_path="/runs",
                         gpu="H100:2", timeout=6 * 3600)
APP = AppState(provider="modal", app="yolo", state="running", tasks=1, started_at=T0 - 60)


def status(**fields: object) -> bytes:
    doc = {"schema_version": 1, "state": "running", "current_epoch": 3, "total_epochs": 10,
           "started_at": "2026-12-05T06:00:00+00:00", "mean_epoch_seconds": 600.0,
           "updated_at": "2026-12-05T09:45:00+00:00", "train_loss": 1.5}
    doc.update(fields)
    return json.dumps(doc).encode()


def one_run(now: float, **fields: object):  # type: ignore[no-untyped-def]
    (run,) = fold_runs((), [VolumeRead("runs/exp1", status(**fields))], "/runs", now)
    return run


def test_countdown_from_started_at_and_timeout_with_a_fake_clock() -> None:
    now = T0 + 3 * 3600 + 50 * 60  # 3h50m in: 2h10m left of 6 h
    run = one_run(now, eta_seconds=3600.0, updated_at="2026-12-05T09:48:00+00:00")
    assert run.health is Health.RUNNING
    verdict = judge_run(ENTRY, APP, run, now)
    assert verdict.countdown == "killed by its 6 h timeout in 2h10m"
    assert verdict.deadline == T0 + 6 * 3600 and verdict.problem is None
    later = judge_run(ENTRY, APP, run, now + 3600)
    assert later.countdown == "killed by its 6 h timeout in 1h10m"


def test_an_eta_past_the_timeout_is_a_problem_before_it_happens() -> None:
    now = T0 + 3 * 3600 + 50 * 60
    run = one_run(now, eta_seconds=3 * 3600.0 + 20 * 60, updated_at="2026-12-05T09:48:00+00:00")
    verdict = judge_run(ENTRY, APP, run, now)
    assert verdict.problem is not None
    assert verdict.problem.startswith("ETA 3h20m is past its 6 h timeout (killed in 2h10m, "
                                      "1h10m short)")
    assert verdict.countdown == "killed by its 6 h timeout in 2h10m"  # not yet killed


def test_a_run_past_its_deadline_is_a_problem_and_finished_runs_have_none() -> None:
    now = T0 + 6 * 3600 + 300
    run = one_run(now, updated_at="2026-12-05T12:04:00+00:00")
    verdict = judge_run(ENTRY, APP, run, now)
    assert verdict.countdown == "past its 6 h timeout by 5m" and verdict.problem
    done = one_run(now, state="completed", updated_at="2026-12-05T08:00:00+00:00")
    verdict = judge_run(ENTRY, APP, done, now)
    assert verdict.countdown is None and verdict.problem is None
    assert verdict.gpu_seconds == 2 * 2 * 3600  # 2 h wall on 2 GPUs, until its last update


def test_cost_is_gpu_seconds_times_the_per_second_price() -> None:
    now = T0 + 3600
    run = one_run(now, updated_at="2026-12-05T06:59:00+00:00")
    verdict = judge_run(ENTRY, APP, run, now)
    assert verdict.gpu_seconds == 7200.0
    assert verdict.cost_usd == pytest.approx(7200 * 0.001097)
    priced = judge_run(ServerlessConfig(**{**ENTRY.__dict__, "usd_per_gpu_second": 0.002}),
                       APP, run, now)
    assert priced.cost_usd == pytest.approx(7200 * 0.002)


def test_without_a_timeout_the_countdown_asks_for_one() -> None:
    run = one_run(T0 + 600, updated_at="2026-12-05T06:09:00+00:00")
    entry = ServerlessConfig(**{**ENTRY.__dict__, "timeout": None})
    verdict = judge_run(entry, APP, run, T0 + 600)
    assert verdict.countdown is not None and "no timeout" in verdict.countdown
    assert verdict.problem is None


def test_the_app_start_stands_in_without_a_run_start() -> None:
    now = T0 + 600
    (run,) = fold_runs((), [VolumeRead("runs/x", status(started_at=None,
                                                           updated_at="2026-12-05T06:09:00Z"))],
                       "/runs", now)
    assert judge_run(ENTRY, APP, run, now).started_at == T0 - 60


def test_hostile_status_json_is_unreadable_not_a_crash() -> None:
    now = T0
    reads = [VolumeRead("runs/a", b"{" * 100000), VolumeRead("runs/b", b"[1, 2]"),
             VolumeRead("runs/c", None), VolumeRead("runs/d", status_error="modal: No such file"),
             VolumeRead("runs/\x1b[31me", status(state="\x1b]0;x\x07"))]
    runs = fold_runs((), reads, "/runs", now)
    assert [r.health for r in runs] == [Health.UNREADABLE] * 5
    assert "\x1b" not in runs[4].name and "\x1b" not in runs[4].reason
    # a status.json that stops parsing keeps the last good one, marked unreadable
    good = fold_runs((), [VolumeRead("runs/a", status())], "/runs", now)
    again = fold_runs(good, [VolumeRead("runs/a", b"garbage")], "/runs", now)
    assert again[0].status == good[0].status and again[0].health is Health.UNREADABLE


def test_a_stale_status_reads_stalled() -> None:
    now = T0 + 3 * 3600
    run = one_run(now, updated_at="2026-12-05T07:00:00+00:00")  # 2 h without an update
    assert run.health is Health.STALLED


def test_run_folders_latest_first_and_bounded() -> None:
    entries = [VolumeEntry(f"runs/r{i}", True, None, float(i)) for i in range(30)]
    entries.append(VolumeEntry("runs/file.txt", False, 3, 99.0))
    folders = run_folders(entries, limit=4)
    assert [f.path for f in folders] == ["runs/r29", "runs/r28", "runs/r27", "runs/r26"]


def test_gpu_specs_and_prices() -> None:
    assert gpu_spec("H100:2") == ("H100", 2) and gpu_spec("a100-80gb") == ("A100-80GB", 1)
    assert gpu_spec("H100!:8") == ("H100", 8) and gpu_spec("H100:0") is None
    assert gpu_spec("rm -rf /") is None
    assert usd_per_second("modal", "H100:2", None) == pytest.approx(2 * 0.001097)
    assert price_problem("modal", "B200", None) is not None
    assert price_problem("modal", "B200", 0.002) is None
    # Beam's published per-second prices, read 2026-12-05 (docs/serverless-beam.md)
    assert usd_per_second("beam", "H100", None) == pytest.approx(0.000972)
    assert usd_per_second("beam", "rtx4090:2", None) == pytest.approx(2 * 0.000192)
    assert usd_per_second("beam", "A10G", None) == pytest.approx(0.000292)
    assert usd_per_second("beam", "A10G", 0.001) == pytest.approx(0.001)  # config wins
    # the other stored copy of the same page, read the same day
    assert usd_per_second("beam", "A100-40", None) == pytest.approx(0.000764)
    assert usd_per_second("beam", "a100-80:2", None) == pytest.approx(2 * 0.000955)
    assert usd_per_second("beam", "T4", None) == pytest.approx(0.000150)
    problem = price_problem("beam", "L40S", None)  # in no copy of Beam's page
    assert problem is not None and \
        "known: RTX4090, A10G, H100, T4, A100-40, A100-80" in problem
    assert prices_dated("modal") == "2026-05-07" and prices_dated("beam") == "2026-12-05"
    assert prices_dated("nobody") is None


def test_modal_output_reading() -> None:
    assert version_problem("modal client version: 1.5.4") is None
    problem = version_problem("modal client version: 1.4.9")
    assert problem is not None and problem.kind == "cli_too_old"
    problem = version_problem("\x1b[2Jhello")
    assert problem is not None and problem.kind == "cli_too_old"
    assert parse_size("1.5 GiB") == int(1.5 * 1024 ** 3) and parse_size("12 B") == 12
    assert parse_size("9" * 40 + " B") is None and parse_size(None) is None
    boxed = "\u256d\u2500 Error \u2500\u256e\n\u2502 Token missing. Could not authenticate " \
            "client. \u2502\n\u2570\u2500\u2500\u256f\n"
    assert classify(boxed, what="app").kind == "not_logged_in"
    assert classify("No App with name 'x' found", what="app").kind == "app_not_found"
    assert classify("No such file: a/b", what="volume").kind == "path_missing"
    failed = classify("boom\nsomething broke\n", what="app")
    assert failed.kind == "failed" and "something broke" in str(failed)
    old = b'[{"App ID": "ap-1", "Description": "yolo", "State": "deployed"}]'
    with pytest.raises(Exception) as caught:
        app_from_list(old, "yolo")
    assert getattr(caught.value, "kind", None) == "cli_too_old"
    with pytest.raises(Exception) as caught:
        app_from_list(b"[" * 100000, "yolo")
    assert getattr(caught.value, "kind", None) == "failed"


def test_words() -> None:
    assert timeout_words(21600) == "6 h" and timeout_words(5400) == "90 min"
    assert timeout_words(100) == "1m"
    assert app_words(APP) == "running, 1 task"
    assert app_words(None, "modal is not logged in") == "not read yet: modal is not logged in"
    stopping = AppState("modal", "yolo", "running", 0, None, "stopping...")
    assert app_words(stopping) == "running (stopping...), 0 tasks"


def test_watch_logs_an_app_when_its_state_or_trouble_changes() -> None:
    from tui.model.serverless_runs import ServerlessState
    from tui.runtime.events import ServerlessChanged
    from tui.runtime.watch_sink import LogSink

    said: list[str] = []
    sink = LogSink(said.append)
    state = ServerlessState(name="m", provider="modal", app=APP)
    sink(ServerlessChanged(state))
    sink(ServerlessChanged(state))  # the same: no line
    sink(ServerlessChanged(ServerlessState(name="m", provider="modal", app=APP,
                                           error="modal is not logged in here")))
    sink(ServerlessChanged(ServerlessState(name="m", provider="modal", app=APP,
                                           problem="volume v is missing")))
    assert said == ["serverless m: running, 1 task",
                    "serverless m: modal is not logged in here",
                    "serverless m: running, 1 task; ! volume v is missing"]


def test_two_listings_agree_within_the_coarser_ones_slack() -> None:
    """A Beam age in words re-read a moment later moves a little; a rewrite moves more."""
    first = VolumeEntry("w/best.pt", False, 4096, 1000.0, 2.0)
    assert same_listing(first, VolumeEntry("w/best.pt", False, 4096, 1001.5, 1.0))
    assert not same_listing(first, VolumeEntry("w/best.pt", False, 4096, 1003.0, 1.0))
    assert not same_listing(first, VolumeEntry("w/best.pt", False, 4097, 1000.0, 2.0))
    assert not same_listing(first, None) and same_listing(None, None)
    minute = VolumeEntry("w/last.pt", False, 10, 600.0)  # Modal's: to the minute, exact
    assert same_listing(minute, VolumeEntry("w/last.pt", False, 10, 600.0))
    assert not same_listing(minute, VolumeEntry("w/last.pt", False, 10, 660.0))
    assert age_slack("just now") == 2 and age_slack("5 seconds ago") == 1
    assert age_slack("1 minute ago") == 60 and age_slack("3 hours ago") == 3600
    assert age_slack("Dec 01 2026") == 86400


STOPPED = AppState("modal", "yolo", "stopped", 0, T0 - 60, "stopped",
                   stopped_at=T0 + 3600)


def test_runs_of_a_stopped_app_read_killed_and_their_cost_freezes_at_the_stop() -> None:
    from tui.model.serverless_view import judge_runs, settle_runs

    now = T0 + 3600 + 300  # five minutes after the stop; the status.json still says running
    (run,) = settle_runs((one_run(now, eta_seconds=8 * 3600.0,
                                  updated_at="2026-12-05T06:58:00+00:00"),), STOPPED)
    assert run.health is Health.DEAD and "stopped" in run.reason
    verdict = judge_run(ENTRY, STOPPED, run, now)
    assert verdict.countdown is None and verdict.problem is None  # no ETA past the timeout
    assert verdict.gpu_seconds == 2 * 3600.0  # until the stop, on 2 GPUs
    later = judge_runs(ENTRY, STOPPED, (run,), now + 6 * 3600)
    assert later[0].cost_usd == verdict.cost_usd  # frozen, refresh after refresh
    # without the CLI's stop time, the run's last update ends it
    unknown = AppState("modal", "yolo", "missing", None, None, "gone")
    (gone,) = settle_runs((one_run(now, updated_at="2026-12-05T06:30:00+00:00"),), unknown)
    assert gone.health is Health.DEAD
    assert judge_run(ENTRY, unknown, gone, now + 9999).gpu_seconds == 2 * 1800.0
    # a running app leaves its runs alone
    live = one_run(now, updated_at="2026-12-05T07:04:00+00:00")
    assert settle_runs((live,), APP) == (live,)


def test_an_unreadable_run_is_charged_nothing_and_the_app_is_charged_once() -> None:
    from tui.model.serverless_view import judge_runs

    now = T0 + 3600
    reads = [VolumeRead("runs/torn", b'{"state": "runn'),
             VolumeRead("runs/gone", status_error="modal: boom"),
             VolumeRead("runs/a", status(started_at=None, updated_at="2026-12-05T06:59:00Z")),
             VolumeRead("runs/b", status(started_at=None, updated_at="2026-12-05T06:59:00Z"))]
    runs = fold_runs((), reads, "/runs", now)
    verdicts = judge_runs(ENTRY, APP, runs, now)
    assert [v.cost_usd for v in verdicts[:2]] == [None, None]
    assert verdicts[2].started_at == T0 - 60  # the app's start stands in once
    assert verdicts[3].started_at is None and verdicts[3].cost_usd is None


def test_a_folder_named_with_escape_sequences_is_read_by_its_raw_name() -> None:
    from tui.model.modal_output import volume_entries

    listing = json.dumps([{"filename": "runs/\x1b[31mred", "type": "dir", "size": "0 B"},
                          {"filename": "runs/plain", "type": "dir"},
                          {"filename": "runs/" + "\x1b" * 2000, "type": "dir"}]).encode()
    red, plain_dir, *_ = volume_entries(listing)
    assert "\x1b" not in red.path and red.raw_path == "runs/\x1b[31mred"
    assert plain_dir.raw_path is None  # nothing cleaned: its path is its name
    assert all(e.raw_path is None or len(e.raw_path) <= 1000 for e in volume_entries(listing))


def test_a_stop_without_the_clis_stop_time_never_shrinks_the_cost() -> None:
    """Beam's lists give no stop time: the moment a poll first saw the app stopped ends
    its runs, kept poll after poll, so the cost shown before the stop never shrinks."""
    from tui.model.serverless_view import carry_stop, settle_runs

    entry = ServerlessConfig(name="b", provider="beam", app="yolo", volume="v",
                             runs_path="/runs", gpu="H100:2", timeout=6 * 3600)
    running = AppState("beam", "yolo", "running", 1, T0)
    seen_at = T0 + 3600  # the last update was at 06:58, 2 min before
    run = one_run(seen_at, updated_at="2026-12-05T06:58:00+00:00")
    shown = judge_run(entry, running, run, seen_at).cost_usd
    assert shown is not None
    stopped = carry_stop(running, AppState("beam", "yolo", "stopped", 0), seen_at + 30)
    assert stopped.stopped_at == seen_at + 30
    again = carry_stop(stopped, AppState("beam", "yolo", "stopped", 0), seen_at + 600)
    assert again.stopped_at == seen_at + 30  # the first sighting stays
    (dead,) = settle_runs((run,), again)
    after = judge_run(entry, again, dead, seen_at + 9999).cost_usd
    assert after is not None and after >= shown
    # a stop time the CLI gives (Modal's) wins; an app never seen running has none
    told = AppState("modal", "yolo", "stopped", 0, stopped_at=T0 + 60)
    assert carry_stop(running, told, seen_at) is told
    assert carry_stop(None, AppState("beam", "yolo", "stopped", 0), seen_at).stopped_at is None


def test_app_cost_lines_are_to_the_cent_without_brackets_in_brackets() -> None:
    from tui.model.cost import estimate_usd
    from tui.model.serverless_doc import app_cost_lines
    from tui.model.serverless_runs import ServerlessState
    from tui.model.serverless_view import settle_runs

    entry = ServerlessConfig(name="b1", provider="beam", app="trainer", volume="v",
                             runs_path="/runs", gpu="A10G", timeout=6 * 3600)
    app = AppState("beam", "trainer", "stopped", 0, T0,
                   "v3 inactive, function/deployment", stopped_at=T0 + 1740)
    now = T0 + 7200
    runs = settle_runs((one_run(now, updated_at="2026-12-05T06:20:00+00:00"),), app)
    state = ServerlessState(name="b1", provider="beam", app=app, runs=runs)
    (line,) = app_cost_lines([(entry, state)], now)
    assert line.startswith("b1  [beam app trainer: stopped (v3 inactive, "
                           "function/deployment), 0 tasks]  A10G: ~$0.51 spent (est., ")
    assert (estimate_usd(37.9612), estimate_usd(0.5081), estimate_usd(0.001)) == \
        ("$37.96", "$0.51", "<$0.01")
    assert estimate_usd(0) == "$0" and estimate_usd(1234.5) == "$1,234.50"


def test_a_beam_run_is_told_of_its_losses_without_modals_commit() -> None:
    """Beam volumes have no commit(): its ETA problem and its stop say what a Beam volume
    keeps (what was saved to it), Modal's keep saying commit."""
    from tui.model.serverless_view import stop_loss

    now = T0 + 3 * 3600 + 50 * 60
    run = one_run(now, eta_seconds=3 * 3600.0 + 20 * 60, updated_at="2026-12-05T09:48:00+00:00")
    entry = ServerlessConfig(name="b", provider="beam", app="yolo", volume="v",
                             runs_path="/runs", gpu="H100:2", timeout=6 * 3600)
    beam_app = AppState("beam", "yolo", "running", 1, T0 - 60)
    problem = judge_run(entry, beam_app, run, now).problem
    assert problem is not None and problem.startswith("ETA 3h20m is past its 6 h timeout")
    assert "commit" not in problem and "the last epochs are never run" in problem
    assert "commit" not in stop_loss(entry) and "saved" in stop_loss(entry)
    modal_problem = judge_run(ENTRY, APP, run, now).problem
    assert modal_problem is not None and "committed each epoch" in modal_problem
    assert "commit" in stop_loss(ENTRY)


def test_a_missing_app_is_judged_by_what_its_runs_say() -> None:
    """At rest only with an ended run and none claiming to train; a run whose status.json
    cannot be read claims nothing, so it never makes a misnamed app look at rest."""
    gone = AppState("modal", "yolo", "missing", detail="not in modal app list")
    at = T0 + 3600
    done = fold_runs((), [VolumeRead("runs/a", status(
        state="completed", current_epoch=10, updated_at="2026-12-05T06:30:00+00:00"))],
        "/runs", at)
    torn = fold_runs((), [VolumeRead("runs/b", b"{not json")], "/runs", at)
    live = fold_runs((), [VolumeRead("runs/c", status(
        updated_at="2026-12-05T06:59:00+00:00"))], "/runs", at)
    assert [r.health for r in done + torn + live] == \
        [Health.COMPLETED, Health.UNREADABLE, Health.RUNNING]
    assert app_problem(gone, done) is None and app_problem(gone, done + torn) is None
    assert at_rest(gone, done).detail == "not listed any more (its runs ended)"
    assert app_words(at_rest(gone, done)) == "not listed any more (its runs ended)"
    assert app_problem(gone, ()) == "modal app yolo is missing: not in modal app list"
    assert app_problem(gone, torn) == app_problem(gone, ())
    said = app_problem(gone, done + live)
    assert said is not None and "but run c still says it trains" in said
    assert at_rest(gone, done + live) == gone
    running = AppState("modal", "yolo", "running")
    assert app_problem(running, live) is None and at_rest(running, done) == running
