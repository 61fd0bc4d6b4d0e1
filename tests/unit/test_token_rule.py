"""The one rule for which Hub token may go to which box, and when the user is asked:
no token where no step uses one, none ever to an upload_from = "panel" box, a box's own
token_env and never the account-wide one, the first send asked (milestone and budget
pushes excepted: their settings are the yes), and a launch sends none."""

from __future__ import annotations

from typing import Any

import pytest

from tui.model.config import BoxConfig, PushTarget
from tui.model.token_rule import ACCOUNT, SENT_KEY, decide, sent_before


def box(**push: Any) -> BoxConfig:
    return BoxConfig(name="b", host="h", push=PushTarget(**push) if push else None)


def sent(source: str | None, name: str = "b", action: str = "fetch") -> dict[str, Any]:
    return {"box": name, "action": action, "destination": "/data", SENT_KEY: source}


@pytest.mark.parametrize("step", ["push", "milestone", "budget", "fetch", "guard", "launch"])
def test_no_token_goes_where_no_step_uses_one(step: str) -> None:
    decision = decide(box(hf_repo="me/r"), step, uses_token=False, entries=[])  # type: ignore[arg-type]
    assert not decision.sends and not decision.ask and decision.notice is None
    assert decision.withheld is None


def test_a_launch_never_sends_a_token() -> None:
    decision = decide(box(hf_repo="me/r"), "launch", uses_token=True, entries=[])
    assert not decision.sends and not decision.ask


@pytest.mark.parametrize("step", ["push", "milestone", "budget", "fetch", "guard"])
def test_an_upload_from_panel_box_is_never_sent_a_token(step: str) -> None:
    config = box(hf_repo="me/r", token_env="BOX_TOKEN", upload_from="panel")
    decision = decide(config, step, uses_token=True, entries=[], repo="me/data")  # type: ignore[arg-type]
    assert not decision.sends and not decision.ask
    assert decision.withheld is not None and 'upload_from = "panel"' in decision.withheld


def test_a_private_fetch_to_a_panel_box_says_why_and_what_to_do() -> None:
    decision = decide(box(upload_from="panel"), "fetch", uses_token=True, entries=[],
                      repo="me/data")
    words = decision.withheld or ""
    assert "box b" in words and "me/data is private" in words and "Nothing was sent" in words
    assert "Make the data set public" in words and "token_env" in words


@pytest.mark.parametrize("step", ["push", "fetch", "guard", "milestone", "budget"])
def test_a_box_with_token_env_gets_that_token_only(step: str) -> None:
    decision = decide(box(hf_repo="me/r", token_env="BOX_TOKEN"), step, uses_token=True,
                      entries=[sent(ACCOUNT)])  # type: ignore[arg-type]
    assert decision.source == "BOX_TOKEN"
    assert decision.notice is not None and "from BOX_TOKEN to box b" in decision.notice
    assert decision.ask is (step in ("push", "fetch", "guard"))  # HF_TOKEN's yes is not its


@pytest.mark.parametrize("step", ["push", "fetch", "guard"])
def test_the_first_send_asks_and_a_journaled_one_does_not(step: str) -> None:
    config = box(hf_repo="me/r")
    first = decide(config, step, uses_token=True, entries=[sent(None), sent(ACCOUNT, "c")])  # type: ignore[arg-type]
    assert first.source == ACCOUNT and first.ask
    assert first.notice is not None and "stranger's machine" in first.notice
    assert "HF_TOKEN" in first.notice and "box b" in first.notice
    again = decide(config, step, uses_token=True, entries=[sent(ACCOUNT)])  # type: ignore[arg-type]
    assert again.source == ACCOUNT and not again.ask and again.notice is None


@pytest.mark.parametrize("step", ["milestone", "budget"])
def test_a_standing_yes_asks_nobody_but_says_so(step: str) -> None:
    decision = decide(box(hf_repo="me/r"), step, uses_token=True, entries=[])  # type: ignore[arg-type]
    assert decision.source == ACCOUNT and not decision.ask
    assert decision.notice is not None and "standing yes" in decision.notice


def test_a_box_with_no_push_settings_may_be_sent_the_account_token_for_a_fetch() -> None:
    decision = decide(box(), "fetch", uses_token=True, entries=[], repo="me/data")
    assert decision.source == ACCOUNT and decision.ask
    assert decision.notice is not None and "private data set me/data" in decision.notice


def test_earlier_sends_as_the_journal_holds_them() -> None:
    legacy_push = {"box": "b", "action": "push", "destination": "hf://me/r/run/"}
    assert sent_before("b", ACCOUNT, [legacy_push])  # from before token_sent was journaled
    assert not sent_before("b", ACCOUNT, [{**legacy_push, SENT_KEY: None}])  # panel upload
    assert not sent_before("b", ACCOUNT, [{**legacy_push, "box": "c"}])
    assert sent_before("b", "BOX_TOKEN", [sent("BOX_TOKEN", action="guard")])
    assert not sent_before("b", "BOX_TOKEN", [sent(ACCOUNT)])
