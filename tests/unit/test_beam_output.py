"""What the `beam` CLI prints, read into plain values (tui/model/beam_output.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tui.model import beam_output as bo

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC).timestamp()


def test_the_version_line_is_read_and_compared() -> None:
    assert bo.version_of("beam, version 0.2.207\n") == (0, 2, 207)
    assert bo.version_of("Beam CLI update required") is None
    assert bo.version_of("beam, version 0.2.128") < bo.MIN_VERSION  # type: ignore[operator]


@pytest.mark.parametrize(("text", "epoch"), [
    ("2024-06-13T22:45:01.547676Z", datetime(2024, 6, 13, 22, 45, 1, 547676, UTC).timestamp()),
    ("2024-06-13T22:45:01Z", datetime(2024, 6, 13, 22, 45, 1, tzinfo=UTC).timestamp()),
    ("2024-06-13T23:45:01.123456789+01:00",
     datetime(2024, 6, 13, 22, 45, 1, tzinfo=UTC).timestamp() + 0.123456789),
    ("0001-01-01T00:00:00Z", None), ("2024-13-40T00:00:00Z", None), ("yesterday", None),
    (None, None), (17, None)])
def test_times_are_rfc3339_and_go_zero_time_is_none(text: object, epoch: float | None) -> None:
    got = bo.iso_epoch(text)
    assert got == pytest.approx(epoch) if epoch is not None else got is None


def test_a_json_listing_may_follow_a_warning_but_must_be_whole() -> None:
    assert bo.json_list('! Some warning\n[\n  {"id": "a"}\n]\n') == [{"id": "a"}]
    assert bo.json_list("[]") == []
    for broken in ('[\n  {"id": "a"', "", "✗ Unable to connect to gateway.", '{"id": 1}',
                   "[1, 2]", "[" * 100_000):
        with pytest.raises(ValueError):
            bo.json_list(broken)


def test_forced_colour_does_not_hide_the_answer() -> None:
    coloured = ('\x1b[1m[\x1b[0m\n  {\x1b[1;34m"id"\x1b[0m: \x1b[32m"a\\u001b"\x1b[0m}\n'
                '\x1b[1m]\x1b[0m')
    assert bo.json_list(coloured) == [{"id": "a\x1b"}]
    table = TABLE.replace("Yes", "\x1b[1;32mYes\x1b[0m").replace("IsDir", "\x1b[1mIsDir\x1b[0m")
    assert bo.ls_entries(table, "r", NOW) == bo.ls_entries(TABLE, "r", NOW)


def test_failures_are_told_apart_by_the_clis_own_words() -> None:
    assert bo.failure_kind("=> Welcome to Beam! Let's get started 📡\nToken: ") == \
        "not_logged_in"
    assert bo.failure_kind("=> Context 'prod' does not exist. Let's try setting it up.") == \
        "not_logged_in"
    assert bo.failure_kind("✗ Unauthorized: Invalid auth token provided.") == "not_logged_in"
    assert bo.failure_kind("Beam CLI update required\n\nInstalled: 0.2.1") == "cli_too_old"
    assert bo.failure_kind("Error: No such option: --format") == "cli_too_old"
    assert bo.failure_kind("✗ Deployment not found") == "app_not_found"
    assert bo.failure_kind("✗ Unauthorized Access") == "failed"
    assert bo.failure_kind("✗ v/x (unable to find volume)", volume=True) == "path_missing"
    assert bo.failure_kind("✗ v/x (unable to find volume)") == "failed"
    assert bo.failure_kind("✗ Unable to connect to gateway.", volume=True) == "failed"


def test_the_last_line_is_cleaned_and_bounded() -> None:
    assert bo.last_line("ok\n✗ \rFailed: \x1b[31mbad\x1b[0m\n\n") == "Failed: bad"
    assert len(bo.last_line("x" * 10_000)) <= 200


def deployment(**fields: object) -> dict[str, object]:
    return {"id": "d1", "name": "app", "stub_id": "s1", "version": 1, **fields}


def test_state_follows_active_versions_and_running_tasks() -> None:
    running = {"status": "RUNNING", "stub_id": "s1", "started_at": "2026-12-05T07:00:00Z"}
    state = bo.app_state("app", [deployment(active=True)], [running])
    assert (state.state, state.tasks) == ("running", 1)
    assert state.started_at == datetime(2026, 12, 5, 7, tzinfo=UTC).timestamp()
    assert bo.app_state("app", [deployment(active=True)], []).state == "running"
    assert bo.app_state("app", [deployment()], [running]).state == "running"
    stopped = bo.app_state("app", [deployment()], [dict(running, status="CANCELLED")])
    assert (stopped.state, stopped.tasks, stopped.started_at) == ("stopped", 0, None)
    assert bo.app_state("app", [deployment(name="other", active=True)], []).state == "missing"
    odd = bo.app_state("app", [deployment(active="yes", stub_type="\x1b]0;x\x07" + "t" * 500)],
                       [])
    assert odd.state == "stopped" and len(odd.detail) <= 200 and "\x1b" not in odd.detail


def test_only_ids_fit_for_argv_are_passed_back() -> None:
    deps = [deployment(active=True), deployment(id="-rf", active=True),
            deployment(id="a,b", active=True), deployment(id="ok-2"), deployment(id=5)]
    assert bo.active_ids(deps) == ["d1"]


@pytest.mark.parametrize(("text", "size"), [
    ("12.00 B", 12), ("1.21 KiB", 1239), ("3.00 MiB", 3 << 20), ("", None), ("Yes", None)])
def test_sizes_come_back_from_the_clis_rounding(text: str, size: int | None) -> None:
    assert bo.size_bytes(text) == size


@pytest.mark.parametrize(("text", "ago"), [
    ("just now", 0), ("5 seconds ago", 5), ("1 minute ago", 60), ("3 minutes ago", 180),
    ("1 hour ago", 3600), ("4 hours ago", 14400), ("1 day ago", 86400),
    ("6 days ago", 6 * 86400)])
def test_ages_in_words_become_times(text: str, ago: int) -> None:
    assert bo.age_epoch(text, NOW) == NOW - ago


def test_an_old_date_or_nothing() -> None:
    assert bo.age_epoch("Nov 01 2026", NOW) == datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    assert bo.age_epoch("", NOW) is None and bo.age_epoch("soon", NOW) is None


# Each line ends at the `|` (dropped): the table's trailing spaces are part of its shape.
_MARKED = """\
                                                          |
  Name                      Size   Modified Time   IsDir  |
 ──────────────────────────────────────────────────────── |
  weights/                         2 hours ago     Yes    |
  status.json           1.21 KiB   just now        No     |
  重み.pt              12.00 MiB   Dec 01 2026     No     |
                                                          |
  3 items | 13.21 MiB used                                |
                                                          |
"""
TABLE = "\n".join(line[:-1] for line in _MARKED.splitlines()) + "\n"


def test_a_listing_table_is_read_row_by_row() -> None:
    entries = bo.ls_entries(TABLE, "runs/exp1/", NOW)
    assert [(e.path, e.is_dir, e.size) for e in entries] == [
        ("runs/exp1/weights", True, None), ("runs/exp1/status.json", False, 1239),
        ("runs/exp1/重み.pt", False, 12 << 20)]
    assert entries[0].mtime == NOW - 7200 and entries[1].mtime == NOW


def test_rows_stripped_of_their_trailing_spaces_read_the_same() -> None:
    stripped = "\n".join(line.rstrip() for line in TABLE.splitlines())
    assert bo.ls_entries(stripped, "runs/exp1", NOW) == bo.ls_entries(TABLE, "runs/exp1", NOW)


@pytest.mark.parametrize("broken", [
    "",
    "x" * 1000,
    TABLE.replace("  3 items", "  4 items"),
    TABLE.replace("  3 items | 13.21 MiB used", ""),
    TABLE.replace("Yes    \n", "Maybe  \n"),
    TABLE.replace("1.21 KiB", "1.21 XYZ"),
])
def test_a_listing_that_does_not_add_up_is_refused(broken: str) -> None:
    with pytest.raises(ValueError):
        bo.ls_entries(broken, "runs", NOW)


def test_an_empty_listing_is_empty() -> None:
    empty = ("                         \n  Name   Size   Modified Time   IsDir  \n"
             " ───────────────────────────────────── \n\n  0 items | 0.00 B used \n")
    assert bo.ls_entries(empty, "runs", NOW) == []
