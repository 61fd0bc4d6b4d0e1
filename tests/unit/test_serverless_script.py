"""A [[serverless]] entry's `script =`: its GPU function's literal timeout= (read by
lint's own facts) stands in for a missing `timeout`; a config timeout that disagrees is
a warning; a script that sets none is the guide's problem; a script that cannot be read
is said, never a crash, and the config stays valid."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path, PurePath

import pytest

from tui.model.config import ConfigError, parse_config
from tui.model.lint import lint
from tui.model.serverless_doc import serverless_document, serverless_lines
from tui.model.serverless_runs import ServerlessState
from tui.model.serverless_script import (
    NO_TIMEOUT,
    entry_problems,
    script_path,
    script_warnings,
    with_script,
    with_scripts,
)
from tui.model.status_doc import _run_line, run_document

DATA = Path(__file__).resolve().parents[1] / "data" / "serverless"
ENTRY = '''[[serverless]]
name = "m"
provider = "modal"
app = "yolo"
volume = "v"
runs_path = "/runs"
gpu = "H100"
script = "jobs/train.py"
'''
MODAL = '''import modal
app = modal.App("yolo")
{pre}
@app.function(gpu="H100"{timeout}, volumes={{"/runs": modal.Volume.from_name("v")}})
def train():
    pass
'''


def script(timeout: str = ", timeout=21600", pre: str = "") -> bytes:
    return MODAL.format(timeout=timeout, pre=pre).encode()


def entry(extra: str = ""):  # type: ignore[no-untyped-def]
    (found,) = parse_config(ENTRY + extra, "/cfg/fleet.toml").serverless
    return found


def test_the_scripts_literal_timeout_stands_in_for_a_missing_one() -> None:
    bare = entry()
    assert (bare.script, bare.timeout, bare.timeout_from) == ("jobs/train.py", None, None)
    read = with_script(bare, script())
    assert (read.timeout, read.timeout_from, read.script_timeout) == (21600, "script", 21600)
    assert script_warnings(read) == [] and entry_problems(read) == []
    computed = with_script(bare, script(", timeout=LIMIT",
                                        pre="import os\nLIMIT = int(os.environ['T'])\n"))
    assert computed.timeout is None and computed.script_note is not None  # not guessed
    assert "not a number without running the script" in computed.script_note
    aliased = with_script(bare, script(", timeout=LIMIT", pre="LIMIT = 7200\n"))
    assert aliased.timeout == 7200  # a name bound to a literal, as lint follows it
    folded = with_script(bare, script(", timeout=HOURS * 60 * 60 // 2",
                                      pre="HOURS = 6\n"))
    assert folded.timeout == 10800  # literals' arithmetic, as the guide writes 6 * 60 * 60
    huge = with_script(bare, script(", timeout=" + " * ".join(["99999"] * 40)))
    assert huge.timeout is None  # an absurd product is not folded into a number
    names = [f"n{i}" for i in range(40)]  # each name twice the next: 2^40 steps unbounded
    chain = "".join(f"{a} = {b} * {b}\n" for a, b in pairwise(names))
    doubled = with_script(bare, script(", timeout=n0", pre=chain + "n39 = 1\n"))
    assert doubled.timeout is None and "not a number" in (doubled.script_note or "")


@pytest.mark.parametrize(("example", "timeout", "unbounded"), [
    ("modal_train.py", 21600, False), ("beam_train.py", 21600, False),
    ("modal_commit_at_end.py", 21600, False), ("modal_no_timeout.py", None, True)])
def test_the_guides_examples(example: str, timeout: float | None, unbounded: bool) -> None:
    data = (DATA / example).read_bytes()
    found = with_script(entry(), data)
    assert (found.timeout, found.script_unbounded) == (timeout, unbounded)
    # lint's own verdict on the same script agrees: GR101 exactly when there is none
    assert any(f.code == "GR101" for f in lint(data).findings) is unbounded


def test_a_config_timeout_that_disagrees_with_the_script_is_a_warning() -> None:
    read = with_script(entry("timeout = 3600\n"), script())
    assert (read.timeout, read.timeout_from, read.script_timeout) == (3600, "config", 21600)
    (warning,) = script_warnings(read)
    assert warning.startswith("timeout = 3600 but script jobs/train.py says timeout=21600")
    assert script_warnings(with_script(entry("timeout = 21600\n"), script())) == []


@pytest.mark.parametrize("timeout", ["", ", timeout=None", ", timeout=0"])
def test_a_script_without_a_timeout_is_the_guides_problem(timeout: str) -> None:
    read = with_script(entry(), script(timeout))
    assert read.script_unbounded and read.timeout is None
    assert entry_problems(read) == [NO_TIMEOUT] == ["no timeout=: a hung run bills forever"]
    assert any("`train` sets no timeout=" in w for w in script_warnings(read))
    doc = serverless_document(read, ServerlessState("m", "modal"), 0.0, run_document)
    assert doc["problems"] == [NO_TIMEOUT] and doc["no_timeout"] is True
    lines = serverless_lines(read, ServerlessState("m", "modal"), 0.0, _run_line)
    assert f"  ! {NO_TIMEOUT}" in lines


@pytest.mark.parametrize(("read", "said"), [
    ("no such file (/cfg/jobs/train.py)", "script jobs/train.py: no such file"),
    (b"def (:\n", "script jobs/train.py: not Python: line 1"),
    (b"\x00\x01", "script jobs/train.py: binary"),
    (b"\xff\xfe", "script jobs/train.py: not UTF-8"),
    (b"x = 1\n" * 200_000, "script jobs/train.py: too large"),
    (b"import os\n", "script jobs/train.py: no Modal or Beam GPU function found"),
    (b"(" * 400 + b")" * 400, "script jobs/train.py: "),
])
def test_a_script_that_cannot_be_read_is_said_and_the_entry_kept(read: bytes | str,
                                                                  said: str) -> None:
    found = with_script(entry(), read)
    assert found.timeout is None and not found.script_unbounded
    (warning,) = script_warnings(found)
    assert warning.startswith(said), warning
    assert entry_problems(found) == []


def test_differing_gpu_functions_are_not_guessed_between() -> None:
    two = script() + b'''
@app.function(gpu="A100", timeout=600)
def evaluate():
    pass
'''
    found = with_script(entry(), two)
    assert found.timeout is None
    assert "timeouts differ (train: 21600, evaluate: 600)" in (found.script_note or "")


def test_the_path_is_beside_the_config_and_read_through_the_caller() -> None:
    assert script_path("/cfg/fleet.toml", "jobs/train.py") == PurePath("/cfg/jobs/train.py")
    assert script_path("/cfg/fleet.toml", "/abs/t.py") == PurePath("/abs/t.py")
    fleet = parse_config(ENTRY, "/cfg/fleet.toml")
    asked: list[PurePath] = []

    def read(path: PurePath) -> bytes:
        asked.append(path)
        return script()

    assert with_scripts(fleet, read).serverless[0].timeout == 21600
    assert asked == [PurePath("/cfg/jobs/train.py")]
    plain = parse_config(ENTRY.replace('script = "jobs/train.py"\n', ""), "/cfg/fleet.toml")
    assert with_scripts(plain, read) is plain and len(asked) == 1


def test_script_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="key 'script'"):
        parse_config(ENTRY.replace('"jobs/train.py"', "3"), "fleet.toml")
