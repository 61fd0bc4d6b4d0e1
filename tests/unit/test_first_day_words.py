"""Words a new user misread on a first day: each says whose figure it is and what to do."""

from __future__ import annotations

from dataclasses import replace

from support.panel_states import NOW, fleet_config, fleet_states

from tui.model.bill import Book, Event
from tui.model.box import BoxState, Connection, DiskRow
from tui.model.config import parse_config
from tui.model.meter import meter
from tui.model.sizing import project_disk
from tui.model.status_doc import status_table
from widgets.money_text import box_money_line

GB = 10**9


def test_a_stopped_box_with_no_disk_rate_says_so_not_zero_dollars() -> None:
    """`$0/hr stopped (unknown)` read as "free"; the rate is not known, and the line says how
    to make it known."""
    fleet = parse_config('[[box]]\nname = "lab-3090"\nhost = "h"\n'
                         '[box.pricing]\nrunning_usd_per_hr = 0.45\n', "f.toml")
    book = Book([Event(NOW - 3600, "lab-3090", "stopped", 0.0, "unknown")])
    cost = meter(fleet, fleet_states(), {}, book, {}, NOW, NOW - 3600)
    text = box_money_line(cost.boxes["lab-3090"], NOW)
    assert text is not None
    plain = text.plain
    assert "$0/hr" not in plain and "(unknown)" not in plain
    assert "stopped: what its disk bills is unknown" in plain
    assert "storage_usd_per_gb_month" in plain


def test_status_reads_cost_not_a_doubled_dollar() -> None:
    fleet = parse_config('[[box]]\nname = "lab-3090"\nhost = "h"\n'
                         '[box.pricing]\nrunning_usd_per_hr = 0.5\n', "f.toml")
    book = Book([Event(NOW - 3600, "lab-3090", "running", 0.5, "config")])
    cost = meter(fleet, fleet_states(), {}, book, {}, NOW, NOW - 3600)
    text = status_table(fleet_states(), NOW, cost)
    assert "$ $" not in text
    assert "  cost: $0.5000/hr running (config)" in text


def test_an_oversized_disk_says_whose_figure_it_is() -> None:
    """The filesystem's size is the box's figure; the config's disk_gb is what is billed."""
    box = BoxState(name="b", disks=(DiskRow("/root/runs", 271 * GB, 5 * GB, 266 * GB),))
    projection = project_disk(box, stopped_usd_per_hr=0.01, billed_disk_gb=100.0)
    (info,) = projection.warnings
    assert "the filesystem's 271 GB (the config says disk_gb = 100)" in info.message
    assert "the 271 GB disk" not in info.message


def test_an_unknown_host_key_is_not_read_as_silence() -> None:
    """A box that answers with a host key not yet trusted is not "not answering": the words
    say the key is unknown and how to accept it."""
    fleet = parse_config('[[box]]\nname = "lab-3090"\nhost = "h"\n'
                         '[box.pricing]\nrunning_usd_per_hr = 0.45\n', "f.toml")
    state = BoxState(name="lab-3090", connection=Connection.HOST_KEY_UNKNOWN,
                     error="host key of lab-3090 is not in known_hosts", failed_since=NOW)
    book = Book([Event(NOW - 3600, "lab-3090", "running", 0.45, "config")])
    cost = meter(fleet, [state], {}, book, {}, NOW, NOW - 3600)
    doubt = cost.boxes["lab-3090"].doubt or ""
    assert "not answering" not in doubt
    assert "host key is unknown" in doubt and "accept-new" in doubt
    assert "may still be billing $0.4500/hr" in doubt
    for connection, words in ((Connection.HOST_KEY_CHANGED, "with a changed host key"),
                              (Connection.AUTH_FAILED, "refuses the login")):
        other = meter(fleet, [replace(state, connection=connection)], {}, book, {}, NOW,
                      NOW - 3600)
        said = other.boxes["lab-3090"].doubt or ""
        assert words in said and "not answering" not in said


def test_a_box_gone_quiet_still_reads_not_answering() -> None:
    fleet = fleet_config()
    state = BoxState(name="lab-3090", connection=Connection.UNREACHABLE, error="refused",
                     failed_since=NOW - 120)
    book = Book([Event(NOW - 3600, "lab-3090", "running", 0.45, "config")])
    cost = meter(fleet, [state], {}, book, {}, NOW, NOW - 3600)
    assert (cost.boxes["lab-3090"].doubt or "").startswith("not answering for 2m")
