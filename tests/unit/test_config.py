"""The fleet config: good configs parse, bad ones name the file, box, key and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.__main__ import main
from tui.model.config import ConfigError, parse_config

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "fleet.toml")
    return [str(p) for p in info.value.problems]


def test_minimal_box_gets_defaults() -> None:
    fleet = parse_config('[[box]]\nname = "a"\nhost = "h"\n', "f.toml")
    box = fleet.box("a")
    assert box.runs_roots == ("/root/runs",)
    assert box.provider == "manual"
    assert box.port is None and box.jump is None and box.pricing is None
    assert fleet.refresh_seconds == 5.0
    assert fleet.host_keys == "strict"
    assert fleet.timeout_for(box) == fleet.timeout_seconds


def test_full_box_with_subtables() -> None:
    fleet = parse_config(
        """
refresh_seconds = 2.5
host_keys = "accept-new"
known_hosts = "/tmp/kh"
ssh_config = ""
[[box]]
name = "v"
host = "ssh4.vast.ai"
port = 41022
user = "root"
identity_file = "~/.ssh/id"
jump = "me@bastion:2222,other"
runs_roots = ["/root/runs", "~/more"]
provider = "vast"
instance_id = 12345
timeout_seconds = 3
[box.pricing]
disk_gb = 250
storage_usd_per_gb_month = 0.2
rebuild_usd = 1
[box.push]
hf_repo = "me/repo"
""", "f.toml")
    box = fleet.boxes[0]
    assert box.instance_id == "12345"
    assert box.pricing is not None and box.pricing.disk_gb == 250.0
    assert box.push is not None and box.push.hf_repo == "me/repo"
    assert fleet.timeout_for(box) == 3.0
    assert fleet.ssh_config == "" and fleet.refresh_seconds == 2.5


def test_unknown_key_names_file_box_key_line_and_suggests() -> None:
    text = '[[box]]\nname = "a"\nhost = "h"\n\n[[box]]\nname = "gpu-b"\nhost = "h2"\nprot = 22\n'
    (msg,) = problems(text)
    assert msg.startswith("fleet.toml:8: box 'gpu-b': key 'prot': unknown key")
    assert "did you mean 'port'" in msg


def test_wrong_types_and_ranges_are_each_reported() -> None:
    text = """refresh_seconds = 0
host_keys = "trust-all"
[[box]]
name = "a"
host = "h"
port = "22"
runs_roots = "/root/runs"
provider = "aws"
[box.pricing]
disk_gb = -1
"""
    found = problems(text)
    assert len(found) == 6
    joined = "\n".join(found)
    assert "fleet.toml:1: key 'refresh_seconds': must be > 0" in joined
    assert "key 'host_keys': must be one of strict, accept-new" in joined
    assert "fleet.toml:6: box 'a': key 'port': expected an integer, got a string ('22')" in joined
    assert "key 'runs_roots': expected an array" in joined
    assert "key 'provider': must be one of manual, vast, runpod, lambda" in joined
    assert "fleet.toml:10: box 'a': key 'pricing.disk_gb': must be >= 0" in joined


def test_missing_required_and_duplicate_names() -> None:
    text = '[[box]]\nname = "a"\n\n[[box]]\nname = "a"\nhost = "x"\n[[box]]\nhost = "y"\n'
    found = problems(text)
    assert "fleet.toml:1: box 'a': key 'host': missing (required)" in found
    assert any("box 'a': key 'name': duplicate box name" in p and "fleet.toml:5" in p
               for p in found)
    assert "fleet.toml:7: box '#3': key 'name': missing (required)" in found


def test_toml_syntax_error_gives_the_line() -> None:
    (msg,) = problems('[[box]]\nname = "a"\nhost = h\n')
    assert re.match(r"fleet.toml:3: not valid TOML", msg)


def test_no_boxes_and_bad_box_names() -> None:
    assert problems("refresh_seconds = 5\n") == [
        "fleet.toml: no boxes: add a [[box]] table with name and host"]
    (msg,) = problems('[[box]]\nname = "a/b"\nhost = "h"\n')
    assert "cannot be used as a box name" in msg


def test_shipped_example_and_documented_examples_are_valid() -> None:
    """Every config block a reader may copy parses: the README's first fleet, the full
    example in docs/config.md, and those on the other docs pages (alerts, milestones)."""
    parse_config((ROOT / "tui" / "fleet.example.toml").read_text(), "example")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = {page.name: re.findall(r"```toml\n(.*?)```", page.read_text(), re.S)
              for page in pages}
    assert blocks["README.md"], "README.md shows a first fleet's config"
    assert blocks["config.md"], "docs/config.md shows the full config"
    for name, found in blocks.items():
        for block in found:
            parse_config(block, name)


def test_check_config_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[[box]]\nname = "a"\nhost = "h"\n')
    assert main(["check-config", "--config", str(good)]) == 0
    assert "1 box(es): a" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('[[box]]\nname = "a"\nhost = "h"\ncolour = 1\n')
    assert main(["--config", str(bad), "check-config"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: box 'a': key 'colour': unknown key" in err
    assert main(["check-config", "--config", str(tmp_path / "none.toml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_config_location_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.store.paths import locate_config

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("GPURENT_CONFIG", raising=False)
    assert locate_config(None) == tmp_path / "xdg" / "gpurent-tui" / "fleet.toml"
    monkeypatch.setenv("GPURENT_CONFIG", str(tmp_path / "env.toml"))
    assert locate_config(None) == tmp_path / "env.toml"
    assert locate_config(str(tmp_path / "x.toml")) == tmp_path / "x.toml"


def test_init_writes_a_valid_example_and_keeps_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "cfg" / "fleet.toml"
    assert main(["init", "--config", str(target)]) == 0
    parse_config(target.read_text(), str(target))
    target.write_text("# mine\n")
    assert main(["init", "--config", str(target)]) == 2
    assert target.read_text() == "# mine\n"


def test_init_names_the_config_it_wrote_in_the_next_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`init --config PATH` says to run `check-config --config PATH`: a bare
    `check-config` reads the default path, where nothing was written."""
    target = tmp_path / "my fleet.toml"
    assert main(["init", "--config", str(target)]) == 0
    assert f"`gpurent-tui check-config --config '{target}'`" in capsys.readouterr().out


def test_key_remaps_must_name_known_actions() -> None:
    fleet = parse_config('[keys]\nnext = "n"\n[[box]]\nname = "a"\nhost = "h"\n', "f.toml")
    assert fleet.keys == {"next": "n"}
    (msg,) = problems('[keys]\nnxt = "n"\n[[box]]\nname = "a"\nhost = "h"\n')
    assert msg.startswith("fleet.toml:2: key 'keys.nxt': unknown binding id (did you mean "
                          "'next'?)")


def test_key_errors_carry_their_own_line() -> None:
    text = 'refresh_seconds = 2\n\n[keys]\nnext = "n"\nopen = 3\n[[box]]\nname = "a"\nhost = "h"\n'
    (msg,) = problems(text)
    assert msg.startswith("fleet.toml:5: key 'keys.open': expected a key name")


@pytest.mark.parametrize(("remap", "silenced"), [
    ('previous = "q"', "quit"),             # q would no longer quit
    ('push = "P"', "push_box"),
    ('series = "r"', "refresh"),            # the run detail's own m -> r: r stops refreshing there
    ('confirm_yes = "n"', "confirm_no"),
    ('next = "j,c"', "cost"),
    ('focus_next = "j"', "next"),           # read before any screen's keys: j would only tab
])
def test_a_remap_that_steals_another_bindings_key_is_an_error(remap: str,
                                                                silenced: str) -> None:
    (msg,) = problems(f'[keys]\n{remap}\n[[box]]\nname = "a"\nhost = "h"\n')
    binding = remap.split(" ")[0]
    assert msg.startswith(f"fleet.toml:2: key 'keys.{binding}': ")
    assert f"already the key of {silenced}" in msg and "would stop working" in msg


@pytest.mark.parametrize("remap", [
    'next = "n"',                       # only the confirmation's own n shadows it there
    'quit = "x"\nprevious = "q"',       # q moves from quit to previous: nothing is lost
    'destroy_push_first = "p"',         # the default, spelt out
    'filter = "/"',
])
def test_remaps_that_silence_nothing_are_accepted(remap: str) -> None:
    fleet = parse_config(f'[keys]\n{remap}\n[[box]]\nname = "a"\nhost = "h"\n', "f.toml")
    assert fleet.keys


def test_a_misspelt_box_table_is_reported_at_its_own_line_with_a_suggestion() -> None:
    text = ('[[box]]\nname = "a"\nhost = "h"\n\n[box.pricng]\nrunning_usd_per_hr = 3.0\n'
            '[box.push]\nlocal_dir = "/tmp/x"\n')
    (msg,) = problems(text)
    assert msg.startswith("fleet.toml:5: box 'a': key 'pricng': unknown key (did you mean "
                          "'pricing'?)")
    known = msg.split("known keys: ")[1].split(", ")
    assert "pricing" in known and "push" in known


def test_keys_in_subtables_are_found_in_their_own_table() -> None:
    text = ('[[box]]\nname = "a"\nhost = "h"\n[box.pricing]\ndisk_gb = 1\n'
            '[[box]]\nname = "b"\nhost = "h"\n[box.push]\nlocal_dir = "/x"\n'
            '[box.pricing]\ndisk_gb = -1\n')
    (msg,) = problems(text)
    assert msg.startswith("fleet.toml:12: box 'b': key 'pricing.disk_gb': must be >= 0")


def test_a_misspelt_top_level_table_is_found_at_its_header() -> None:
    (msg,) = problems('[kyes]\nnext = "n"\n[[box]]\nname = "a"\nhost = "h"\n')
    assert msg.startswith("fleet.toml:1: key 'kyes': unknown key (did you mean 'keys'?)")


def test_provider_urls_budgets_and_alarm_settings() -> None:
    fleet = parse_config(
        'budget_usd = 100\nidle_minutes = 5\non_budget = "push-and-stop"\n'
        '[providers.vast]\nbase_url = "http://127.0.0.1:8080/"\n'
        '[[box]]\nname = "a"\nhost = "h"\nbudget_usd = 20\n', "f.toml")
    assert fleet.providers == {"vast": "http://127.0.0.1:8080"}
    assert (fleet.budget_usd, fleet.idle_minutes, fleet.on_budget) == (100.0, 5.0, "push-and-stop")
    assert fleet.boxes[0].budget_usd == 20.0
    (msg,) = problems('[providers.aws]\nbase_url = "http://x"\n[[box]]\nname = "a"\nhost = "h"\n')
    assert "unknown provider 'aws'" in msg
    (msg,) = problems('[providers.vast]\nbase_url = "ftp://x"\n[[box]]\nname = "a"\nhost = "h"\n')
    assert "must be an http:// or https:// URL" in msg


def test_manual_box_commands() -> None:
    fleet = parse_config('[[box]]\nname = "a"\nhost = "h"\nstop_command = "sudo poweroff"\n'
                         'destroy_command = "echo gone"\n', "f.toml")
    assert fleet.boxes[0].stop_command == "sudo poweroff"
    assert fleet.boxes[0].destroy_command == "echo gone"


def test_milestone_pushes_and_alerts() -> None:
    fleet = parse_config("""
[alerts]
webhook = "https://ntfy.sh/secret-topic"
format = "ntfy"
command = "notify-send gpurent"
cooldown_minutes = 5
unreachable_minutes = 2.5
[[box]]
name = "a"
host = "h"
[box.push]
local_dir = "/tmp/w"
every_epochs = 5
on_best = true
on_complete = true
""", "f.toml")
    push = fleet.box("a").push
    assert push is not None and push.every_epochs == 5 and push.on_best and push.on_complete
    assert push.milestones
    alerts = fleet.alerts
    assert (alerts.webhook, alerts.format, alerts.command) == (
        "https://ntfy.sh/secret-topic", "ntfy", "notify-send gpurent")
    assert (alerts.cooldown_minutes, alerts.unreachable_minutes) == (5.0, 2.5)
    plain = parse_config('[[box]]\nname = "a"\nhost = "h"\n', "f.toml")
    assert plain.alerts.webhook is None and plain.alerts.format == "json"


def test_bad_milestone_and_alert_settings_name_their_line_and_never_echo_the_url() -> None:
    found = problems("""[alerts]
webhook = "http://hooks.example.org/T000/SECRET"
format = "teams"
cooldown_minutes = -1
bell = true
[[box]]
name = "a"
host = "h"
[box.push]
every_epochs = 0
on_best = "yes"
""")
    text = "\n".join(found)
    assert "SECRET" not in text
    assert "fleet.toml:2: key 'alerts.webhook': plain http:// only for a loopback" in text
    assert "fleet.toml:3: key 'alerts.format': must be one of json, ntfy, slack, discord" in text
    assert "fleet.toml:4: key 'alerts.cooldown_minutes'" in text
    assert "fleet.toml:5: key 'alerts.bell': unknown key" in text
    assert "fleet.toml:10: box 'a': key 'push.every_epochs': must be >= 1" in text
    assert "fleet.toml:11: box 'a': key 'push.on_best': expected true or false" in text
    lonely = problems('[[box]]\nname = "a"\nhost = "h"\n[box.push]\non_complete = true\n')
    assert lonely == ["fleet.toml:4: box 'a': key 'push': milestone pushes (every_epochs, "
                      "on_best, on_complete) need a destination: set hf_repo or local_dir"]


SERVERLESS = '''
[[box]]
name = "a"
host = "h"

[[serverless]]
name = "modal-yolox"
provider = "modal"
app = "yolox-train"
volume = "yolo-runs"
runs_path = "/runs"
gpu = "H100:2"
timeout = 21600
'''


def test_serverless_entries_are_read_beside_the_boxes() -> None:
    fleet = parse_config(SERVERLESS, "fleet.toml")
    (entry,) = fleet.serverless
    assert (entry.name, entry.provider, entry.app, entry.volume, entry.runs_path,
            entry.gpu, entry.timeout, entry.usd_per_gpu_second, entry.cli) == \
        ("modal-yolox", "modal", "yolox-train", "yolo-runs", "/runs", "H100:2", 21600.0,
         None, None)
    only = SERVERLESS.split("[[serverless]]")[1]
    assert parse_config("[[serverless]]" + only, "f").boxes == ()  # a fleet of only these


def test_serverless_problems_name_the_file_the_entry_and_the_key() -> None:
    bad = SERVERLESS.replace('provider = "modal"', 'provider = "lambda"') \
        .replace('gpu = "H100:2"', 'gpu = "H100:2"\ntimout = 5') \
        .replace('app = "yolox-train"\n', '')
    found = problems(bad)
    assert any(p.startswith("fleet.toml:8: serverless 'modal-yolox': key 'provider': must be "
                            "one of modal, beam") for p in found), found
    assert any("serverless 'modal-yolox': key 'timout': unknown key (did you mean 'timeout'?)"
               in p for p in found), found
    assert any("serverless 'modal-yolox': key 'app': missing (required)" in p for p in found)
    (msg,) = problems(SERVERLESS.replace('"H100:2"', '"B200"'))
    assert msg.startswith("fleet.toml:12: serverless 'modal-yolox': key 'gpu': no published "
                          "modal price for 'B200'") and msg.endswith("set usd_per_gpu_second")
    parse_config(SERVERLESS.replace('"H100:2"', '"B200"\nusd_per_gpu_second = 0.0017'), "f")
    (msg,) = problems(SERVERLESS.replace('name = "modal-yolox"', 'name = "a"'))
    assert "serverless 'a': key 'name'" not in msg and "box 'a': key 'name'" in msg
    (msg,) = problems(SERVERLESS.replace('"/runs"', '"/runs/../etc"'))
    assert "key 'runs_path'" in msg and "'..'" in msg


def test_a_top_level_key_below_a_table_says_where_it_belongs_and_booleans_read_as_toml() -> None:
    """A new user put [connect] first: each top-level key below it read as an unknown
    'connect.known_hosts' with no hint why, and `true` was shown as Python's True."""
    text = ('[connect]\nper_endpoint = true\nknown_hosts = "/x"\n\n'
            '[[box]]\nname = "a"\nhost = "127.0.0.1"\nssh_config = "/y"\n')
    with pytest.raises(ConfigError) as err:
        parse_config(text, "fleet.toml")
    words = str(err.value)
    assert "got a boolean (true)" in words and "True" not in words
    assert ("'known_hosts' is a top-level key: in TOML every key after a [connect] header "
            "belongs to that table") in words
    assert "after a [[box]] header" in words  # ssh_config is top-level, written in a [[box]]


def test_serverless_values_the_provider_refuses_are_config_errors() -> None:
    """A new user's check-config passed a Modal timeout of 100000 s (lint calls it an error,
    Modal refuses it) and a Beam runs_path with a pattern character (failing at the first
    poll): both are said at check-config, naming the entry and the key."""
    text = ('[[serverless]]\nname = "m"\nprovider = "modal"\napp = "a"\nvolume = "v"\n'
            'runs_path = "/runs"\ngpu = "H100"\ntimeout = 100000\n\n'
            '[[serverless]]\nname = "b"\nprovider = "beam"\napp = "a"\nvolume = "v"\n'
            'runs_path = "/ru*"\ngpu = "H100"\n')
    with pytest.raises(ConfigError) as err:
        parse_config(text, "fleet.toml")
    words = str(err.value)
    assert "fleet.toml:8: serverless 'm': key 'timeout': Modal allows a timeout of 1 to 86400" \
        in words, words
    assert "serverless 'b': key 'runs_path': `beam ls` reads * ? [ as patterns" in words, words
    fine = text.replace("timeout = 100000", "timeout = 86400").replace("/ru*", "/runs")
    assert len(parse_config(fine, "fleet.toml").serverless) == 2
