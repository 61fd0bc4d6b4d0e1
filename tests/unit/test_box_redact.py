"""redact_answer: the held secrets leave a probe answer's words; its addresses stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tui.model.box import BoxState, fold_answer
from tui.model.box_redact import redact_answer
from tui.model.status_doc import run_document
from tui.store.secrets import recent_held_secrets

TOKEN = "hf_" + "Qx7mN2pL9vR4tK8wZ3bC6yD1fG5hJ0sAeU"
FAILED = Path(__file__).resolve().parents[1] / "data" / "libreyolo" / "yolox_failed"
HEX = "0123456789abcdef" * 3  # a 48-hex hash of the box's: no held secret, kept


def answer() -> dict[str, Any]:
    path = f"/runs/exp-{TOKEN}"
    return {
        "v": 1, "time": 1000.0, "gone": [f"/runs/old-{TOKEN}"],
        "gpus": {"rows": [f"0, NVIDIA {TOKEN}, 50, 1000, 80000, 40, 300"]},
        "guard": {"sig": f"s-{TOKEN}", "error": f"state says {TOKEN}"},
        "hidden": [{"path": f"/x/{TOKEN}", "why": "not searched"}],
        "runs": [{
            "path": path, "root": "/runs", "s_sig": f"sig-{TOKEN}",
            "status": {**json.loads((FAILED / "status.json").read_text()), f"k-{TOKEN}": 1,
                       "error": {"type": "E", "message": f"bad {TOKEN} {HEX}"}},
            "log": {"text": f"a {TOKEN[:9]}\n{TOKEN[9:]} b\ncommit {HEX}\n",
                    "id": f"id-{TOKEN}", "head": f"h-{TOKEN}", "off": 5},
            "errors": [f"oops {TOKEN}"],
        }],
    }


def test_no_held_secret_leaves_the_answer_as_it_came() -> None:
    sent = answer()
    assert redact_answer(sent, []) is sent
    assert redact_answer(sent, ["abc"]) is sent  # too short to be looked for


def test_every_word_is_redacted_but_what_goes_back_to_the_box() -> None:
    sent = answer()
    got = redact_answer(sent, [TOKEN])
    assert sent == answer()  # the box's answer itself is not changed
    (run,) = got["runs"]
    assert run["path"] == f"/runs/exp-{TOKEN}" and run["path_shown"] == "/runs/exp-***"
    assert run["name"] == "/runs/exp-***"  # no name sent: the shown path, not the real one
    assert run["s_sig"] == f"sig-{TOKEN}"
    assert (run["log"]["id"], run["log"]["head"]) == (f"id-{TOKEN}", f"h-{TOKEN}")
    assert run["log"]["text"] == f"a *** b\ncommit {HEX}\n"  # split across lines too
    assert run["status"]["error"]["message"] == f"bad *** {HEX}"  # hashes stay
    assert "k-***" in run["status"] and run["errors"] == ["oops ***"]
    assert got["gone"] == [f"/runs/old-{TOKEN}"] and got["guard"]["sig"] == f"s-{TOKEN}"
    assert got["guard"]["error"] == "state says ***"
    assert got["hidden"][0]["path"] == "/x/***"
    assert got["gpus"]["rows"] == ["0, NVIDIA ***, 50, 1000, 80000, 40, 300"]


def test_the_folded_run_keeps_its_address_and_shows_the_redacted_path() -> None:
    state = fold_answer(BoxState(name="b"), redact_answer(answer(), [TOKEN]), 1000.0)
    (run,) = state.runs
    assert run.path == f"/runs/exp-{TOKEN}"
    assert run.shown_path == run_document(run)["path"] == "/runs/exp-***"
    assert TOKEN not in repr(run_document(run)) and TOKEN not in state.gpus[0].name
    assert TOKEN not in run.reason and "bad ***" in run.reason


def test_a_secret_split_by_controls_or_wrapping_is_found() -> None:
    """A box may put an ESC (shown as U+FFFD once cleaned), a newline or a JSON escape
    between two characters of the token: the halves would still be read off the screen."""
    for gap in ("\x1b", "\n", " ", "\\n", "\ufffd", "\x9b"):
        sent = {"v": 1, "runs": [{"path": "/r", "errors": [f"x {TOKEN[:7]}{gap}{TOKEN[7:]} y"]}]}
        (run,) = redact_answer(sent, [TOKEN])["runs"]
        assert run["errors"] == ["x *** y"], repr(gap)


def test_the_held_secrets_a_refresh_asks_for_follow_the_environment_at_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Read once for many boxes, yet a token set, changed or saved later counts at the
    next refresh, not a while after (a box's first answer would show it)."""
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    before = recent_held_secrets(["BOX_VAR"])
    assert TOKEN not in before
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert TOKEN in recent_held_secrets(["BOX_VAR"])
    monkeypatch.setenv("BOX_VAR", "box-own-secret")
    assert "box-own-secret" in recent_held_secrets(["BOX_VAR"])
    (tmp_path / "token").write_text("hf_saved_by_login_0123456789\n")
    assert "hf_saved_by_login_0123456789" in recent_held_secrets(["BOX_VAR"])


def test_a_long_text_is_redacted_like_a_short_one() -> None:
    """Past LONG_TEXT each secret has its own pattern (speed): the same words come out,
    a secret holding another replaced whole."""
    inner = TOKEN[3:20]  # a held secret inside another
    for filler in ("", "x" * 600):
        text = f"{filler} {TOKEN} {TOKEN[:10]}\n{TOKEN[10:]} {inner}"
        sent = {"v": 1, "runs": [{"path": "/r", "errors": [text]}]}
        (run,) = redact_answer(sent, [inner, TOKEN])["runs"]
        assert run["errors"] == [f"{filler} *** *** ***"], len(text)
