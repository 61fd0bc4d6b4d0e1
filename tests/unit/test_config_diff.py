"""A reloaded config's changes in words: what the journal's "config reloaded" line says."""

from __future__ import annotations

from tui.model.config import parse_config
from tui.model.config_diff import config_changes, needs_restart, rewatch

BASE = """
budget_usd = 100
idle_minutes = 10
[alerts]
webhook = "https://hooks.example.org/T000/secret-part"
unreachable_minutes = 5
[[box]]
name = "box-c"
host = "c.example.org"
budget_usd = 10
[box.pricing]
running_usd_per_hr = 1.2
[box.push]
hf_repo = "me/weights"
every_epochs = 5
"""


def test_rates_budgets_thresholds_and_milestones_are_named() -> None:
    new = (BASE.replace("budget_usd = 100", "budget_usd = 150")
           .replace("idle_minutes = 10", "idle_minutes = 20")
           .replace("unreachable_minutes = 5", "unreachable_minutes = 15")
           .replace("running_usd_per_hr = 1.2", "running_usd_per_hr = 1.5")
           .replace("every_epochs = 5", "every_epochs = 10")
           .replace("secret-part", "other-secret"))
    words = config_changes(parse_config(BASE, "f.toml"), parse_config(new, "f.toml"))
    assert words == ["box-c rate 1.20 → 1.50", "box-c push every_epochs 5 → 10",
                     "fleet budget 100.00 → 150.00", "fleet idle alarm minutes 10 → 20",
                     "alerts webhook changed", "alerts unreachable_minutes 5 → 15"]
    assert not any("secret" in w for w in words)  # a webhook URL may hold a secret


def test_only_a_changed_way_in_restarts_a_watcher() -> None:
    old = parse_config(BASE, "f.toml")
    same_way = parse_config(BASE.replace("budget_usd = 10\n", "budget_usd = 20\n"), "f.toml")
    assert rewatch(old, same_way) == (set(), set(), set())
    moved = parse_config(BASE.replace("c.example.org", "c2.example.org"), "f.toml")
    assert config_changes(old, moved) == ["box-c host c.example.org → c2.example.org"]
    assert rewatch(old, moved) == (set(), set(), {"box-c"})
    added = parse_config(BASE + '[[box]]\nname = "box-d"\nhost = "d.example.org"\n', "f.toml")
    assert rewatch(old, added) == ({"box-d"}, set(), set())
    assert rewatch(added, old) == (set(), {"box-d"}, set())
    assert config_changes(old, parse_config(BASE, "f.toml")) == []


def test_what_waits_for_a_restart_is_named() -> None:
    old = parse_config(BASE, "f.toml")
    rebound = parse_config(BASE.replace("[alerts]", "[keys]\nrefresh = 'R'\n[alerts]"),
                           "f.toml")
    assert needs_restart(old, rebound) == ["keys"]
    assert needs_restart(old, parse_config(BASE, "f.toml")) == []


def test_serverless_entries_added_removed_and_changed_are_said() -> None:
    parse = parse_config
    base = '[[box]]\nname = "a"\nhost = "h"\n'
    entry = ('[[serverless]]\nname = "m"\nprovider = "modal"\napp = "yolo"\nvolume = "v"\n'
             'runs_path = "/runs"\ngpu = "H100"\ntimeout = 3600\n')
    old, new = parse(base, "f"), parse(base + entry, "f")
    assert config_changes(old, new) == ["serverless m added (modal app yolo)"]
    assert config_changes(new, old) == ["serverless m removed"]
    longer = parse(base + entry.replace("3600", "7200"), "f")
    assert config_changes(new, longer) == ["serverless m timeout 3600 → 7200"]
