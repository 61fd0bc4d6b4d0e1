"""`status`'s readable output says what its JSON says about money."""

from __future__ import annotations

import json

import pytest
from support.panel_states import NOW, fleet_config, fleet_states, instance

from tui.model.bill import Book, Event
from tui.model.config import parse_config
from tui.model.meter import meter
from tui.model.status_doc import status_document, status_table


def test_the_fleet_budget_alarm_reaches_the_text() -> None:
    fleet = parse_config('budget_usd = 5\n[[box]]\nname = "lab-3090"\nhost = "h"\n'
                         '[box.pricing]\nrunning_usd_per_hr = 0.45\n', "f.toml")
    book = Book([Event(NOW - 20 * 3600, "lab-3090", "running", 0.45, "config")])
    cost = meter(fleet, fleet_states(), {}, book, {}, NOW, NOW - 3600)
    doc = status_document(fleet_states(), NOW, cost)
    assert doc["fleet"]["budget_level"] == "alarm"
    text = status_table(fleet_states(), NOW, cost)
    assert "! fleet budget alarm: spent $9.00 of $5.00 (180%)" in text


def test_idle_without_nvidia_smi_does_not_claim_a_gpu_reading() -> None:
    fleet = parse_config('idle_minutes = 1\n[[box]]\nname = "lab-3090"\nhost = "h"\n'
                         '[box.pricing]\nrunning_usd_per_hr = 0.45\n', "f.toml")
    states = fleet_states()
    lab = next(s for s in states if s.name == "lab-3090")  # no nvidia-smi on it
    assert lab.gpu_note == "no nvidia-smi on this box"
    book = Book([Event(NOW - 3600, "lab-3090", "running", 0.45, "config")])
    cost = meter(fleet, states, {}, book, {"lab-3090": NOW - 600}, NOW, NOW - 3600)
    box = cost.boxes["lab-3090"]
    assert box.idle_alarm and "GPU" not in box.idle_reason.replace("GPU reading", "")
    assert box.idle_reason == "no run progressing, and no GPU reading (no nvidia-smi on this box)"
    text = status_table(states, NOW, cost)
    assert "GPU < 5%" not in text and "no GPU reading" in text


def test_a_99_5_percent_saving_reads_99_5() -> None:
    fleet = fleet_config()
    facts = {"vast-4090": instance(running_usd_per_hr=13.88, disk_usd_per_hr=0.0694)}
    book = Book([Event(NOW - 60, "vast-4090", "running", 13.88, "api")])
    cost = meter(fleet, fleet_states(), facts, book, {}, NOW, NOW - 3600)
    text = status_table(fleet_states(), NOW, cost)
    assert "stopped $0.0694/hr (99.5% less)" in text and "100% less" not in text
    doc = json.loads(json.dumps(status_document(fleet_states(), NOW, cost)))
    vast = next(b for b in doc["boxes"] if b["name"] == "vast-4090")["cost"]
    assert vast["saving_pct"] == pytest.approx(99.5, abs=0.01)


def test_the_disk_figure_names_its_filesystem_in_text_and_json() -> None:
    """`df`'s Use% (used / (used + available), rounded up) of the filesystem it names."""
    text = status_table(fleet_states(), NOW, None)
    assert "disk /root/runs 41% of / (overlay)" in text  # 102 / (102 + 148) GB
    doc = status_document(fleet_states(), NOW, None)
    (disk,) = next(b for b in doc["boxes"] if b["name"] == "vast-4090")["disks"]
    assert (disk["mount"], disk["device"], disk["fstype"], disk["used_pct"]) == (
        "/", "overlay", "overlay", 41)
