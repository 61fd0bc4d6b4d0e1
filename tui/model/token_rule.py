"""Which Hub token may go to which box, and when the user is asked. Pure.

A rented box is a stranger's machine. Every step that could put a Hugging Face
token on a box (a push uploading from the box, a milestone or budget push, a
fetch of a private data set, the watchdog's pushes; a launch never does) asks
this one rule first:

- no token goes where no step there will use it (a public data set, a dry-run
  or stop-only watchdog, uploads made from the panel);
- `upload_from = "panel"` in [box.push] means no token ever goes to that box:
  a step that needs one there is withheld, with words saying why and what to do;
- a box with `token_env` gets that variable's token and never the account-wide
  one (HF_TOKEN, or huggingface_hub's saved token);
- the first time a token source travels to a box the user is asked (the panel's
  dialog, the command's [y/N] or --yes), and the send is journaled
  (`token_sent`, the source's name, never its value) so the next one is not
  asked again. Milestone and budget pushes ask no one: their settings in the
  config are the user's standing yes, and their words say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tui.model.config import BoxConfig

Step = Literal["push", "milestone", "budget", "fetch", "guard", "launch"]
ACCOUNT = "HF_TOKEN"  # the account-wide token: HF_TOKEN, else huggingface_hub's saved one
ACCOUNT_WORDS = "HF_TOKEN (or huggingface_hub's saved token)"
SENT_KEY = "token_sent"  # the journal's field: which source went to the box, or null
_ASKED: tuple[Step, ...] = ("push", "fetch", "guard")
_STANDING: dict[Step, str] = {
    "milestone": "Milestone pushes (every_epochs, on_best, on_complete in [box.push]) are "
                 "your standing yes to that: nobody is asked. ",
    "budget": "on_budget = \"push-and-stop\" is your standing yes to that: nobody is asked. ",
}
_WHAT: dict[Step, str] = {
    "push": "This push", "milestone": "This milestone push", "budget": "This budget push",
    "fetch": "This fetch", "guard": "Arming this watchdog", "launch": "This launch",
}
_WHY: dict[Step, str] = {
    "push": "so the box can upload to {repo} itself",
    "milestone": "so the box can upload to {repo} itself",
    "budget": "so the box can upload to {repo} itself",
    "fetch": "so the box can download the private data set {repo}",
    "guard": "so the watchdog can push to {repo} without you (it keeps it in its memory)",
    "launch": "",
}


@dataclass(frozen=True)
class TokenDecision:
    """What one step may send to one box.

    `source`: the token to send (an environment variable's name; ACCOUNT is the
    account-wide token), None when nothing goes. `withheld`: why a step that would
    use a token there gets none (the caller refuses, or goes on without pushing).
    `ask`: the user must say yes before it travels; `notice`: the words to show
    (the question, or the standing-yes note of an unasked first send).
    """

    source: str | None = None
    withheld: str | None = None
    ask: bool = False
    notice: str | None = None

    @property
    def sends(self) -> bool:
        return self.source is not None

    @property
    def source_words(self) -> str:
        return ACCOUNT_WORDS if self.source == ACCOUNT else str(self.source)


def token_source(box: BoxConfig) -> str:
    """The token a box may be given: its own `token_env`, else the account-wide one."""
    push = box.push
    return push.token_env if push is not None and push.token_env else ACCOUNT


def sent_before(box: str, source: str, entries: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the journal shows `source` already went to `box` (the user said yes once).

    Lines from before `token_sent` was journaled count when they are pushes to the Hub
    (the only sender then), as push's first-time question always read them."""
    for entry in entries:
        if entry.get("box") != box:
            continue
        if SENT_KEY in entry:
            if entry.get(SENT_KEY) == source:
                return True
            continue
        dest = entry.get("destination")
        if entry.get("action") == "push" and isinstance(dest, str) \
                and dest.startswith("hf://"):
            return True
    return False


def decide(box: BoxConfig, step: Step, *, uses_token: bool,
           entries: Iterable[Mapping[str, Any]], repo: str | None = None) -> TokenDecision:
    """The one rule: the token `step` may send to `box`, and whether the user is asked.

    `uses_token`: a step there will actually use a token (a push uploading from the
    box, a private or gated data set, a watchdog with a push step that is not a dry
    run); `entries`: the journal; `repo`: the Hub repo it is for (for the words)."""
    if step == "launch" or not uses_token:
        return TokenDecision()
    push = box.push
    if push is not None and push.upload_from == "panel":
        return TokenDecision(withheld=_withheld(box, step, repo))
    source = token_source(box)
    if sent_before(box.name, source, entries):
        return TokenDecision(source=source)
    ask = step in _ASKED
    return TokenDecision(source=source, ask=ask,
                         notice=_notice(box, step, source, repo or _repo(box)))


def _repo(box: BoxConfig) -> str:
    return box.push.hf_repo if box.push is not None and box.push.hf_repo else "the Hub"


def _withheld(box: BoxConfig, step: Step, repo: str | None) -> str:
    base = (f"box {box.name} has upload_from = \"panel\" in [box.push]: no Hub token ever "
            "goes to it")
    if step == "fetch":
        return (f"{base}, and dataset repo {repo} is private, so the box cannot download "
                "it. Nothing was sent. Make the data set public, or give that box a "
                "fine-grained read token for that one repo (token_env, with upload_from = "
                "\"box\")")
    if step == "guard":
        return f"{base}, so the watchdog cannot push (a destroy falls back to stop)"
    return f"{base}: the files are pulled and uploaded from this machine"


_NOTICE_HEAD = re.compile(r"(?P<what>.+?) sends your Hugging Face token from (?P<source>.+?) "
                          r"to box (?P<box>[^,]+), ")


def notice_brief(line: str) -> str | None:
    """The one line a box's header gives a token note (`This push sends your Hugging Face
    token from HF_TOKEN to box a100`): the whole paragraph was in the dialog, or is in the
    CLI's output. None for any other line."""
    match = _NOTICE_HEAD.match(line)
    if match is None:
        return None
    return (f"{match['what']} sends your Hugging Face token from {match['source']} to box "
            f"{match['box']}")


def _notice(box: BoxConfig, step: Step, source: str, repo: str) -> str:
    words = ACCOUNT_WORDS if source == ACCOUNT else source
    scoped = ("Prefer a fine-grained token with access to that one repo (token_env in "
              "[box.push]), or set upload_from = \"panel\": ") if source == ACCOUNT else \
        ("It is this box's own token (token_env); to send none, set upload_from = "
         "\"panel\": ")
    home = ("the files come to this machine, are verified, and are uploaded from here, and "
            "no token leaves it.") if step != "fetch" else \
        "no token leaves this machine (a private data set then cannot be fetched)."
    return (f"{_WHAT[step]} sends your Hugging Face token from {words} to box {box.name}, "
            f"{_WHY[step].format(repo=repo)}. A rented box is a stranger's machine: whoever "
            f"controls it can use that token. {_STANDING.get(step, '')}{scoped}{home}")
