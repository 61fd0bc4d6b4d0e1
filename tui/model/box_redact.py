"""The secrets the panel holds, taken out of a box's answer where it enters the model. Pure.

A box is a stranger's machine, and the Hub token may have reached it for a push:
a hostile box can echo it back in any text it sends (a run's status.json
`reason`, a run folder's name, a train.log line, an error, a GPU name, the
watchdog's fields). Everything on screen, in `status`, `watch`'s log and the
/metrics labels is drawn from the model, so the one place to redact is where
an answer becomes the model's values: `redact_answer`, applied by the watcher
right before `fold_answer`.

Only the known secret values are replaced (whole, or split by whitespace, a
JSON `\\n` or a cleaned control: `tui.model.redact`'s `known` rule). The
token-shaped word rules are not applied to box text: they would star a run's
legitimate names, hashes and log lines.

What is sent back to the box stays as the box spelled it: a run's `path`
(it addresses the run for a push, a fetch, a destroy check), the removed runs'
paths (`gone`), and the cursors (`*_sig`, `id`, `head`). A run whose path holds
a secret gets `path_shown`, its redacted spelling, which is what any reader
shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tui.model.redact import MIN_SECRET, MIN_SPLIT_SECRET, REDACTED

# Values that go back to the box as they came (cursors, signatures, addresses): a run's
# signatures, its metrics' and log's cursors, the watchdog's signature, the gone paths.
RUN_KEEP = ("path", "s_sig", "w_sig", "d_sig", "h_sig")
PART_KEEP = ("id", "head")


LONG_TEXT = 512  # past this, each secret is looked for by its own pattern (see `hide`)


@dataclass(frozen=True)
class Hider:
    """The held secrets, ready to look for in many texts: one compiled pattern for them
    all, whole or split by the sender's wrapping; one per secret for long texts (a
    pattern that starts with one literal character is scanned for at C speed, which an
    alternation is not: a cold first look's 160 KiB of history costs a third); and the
    shortest length a secret has (a shorter text, most of an answer's keys, is passed by)."""

    pattern: re.Pattern[str]
    each: tuple[re.Pattern[str], ...]
    shortest: int

    def hide(self, text: str) -> str:
        """`text` with every held secret in it replaced by *** (the same object when it
        holds none)."""
        if len(text) < self.shortest:
            return text
        if len(text) < LONG_TEXT:
            return text if self.pattern.search(text) is None else \
                self.pattern.sub(REDACTED, text)
        for pattern in self.each:  # longest secret first, as in the alternation
            if pattern.search(text) is not None:
                text = pattern.sub(REDACTED, text)
        return text


# Between two characters of a secret: what `redact` allows (whitespace, a JSON escape, a
# U+FFFD), and the raw controls a box may put there, which `clean` turns into U+FFFD only
# after this (so "hf_ab<ESC>cd..." would otherwise reach the screen as "hf_ab\ufffdcd...").
_GAP_CHARS = r"\s\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffd"
_GAP = rf"(?:[{_GAP_CHARS}]|\\[nrt])*"


def _pattern(secret: str) -> str:
    """The secret, whole or split by gaps. After its first character, a lookahead for the
    second (or a gap's first) turns most false starts away before the gap loop is set
    up: a first look's history is mostly digits, and a hex key starts with one."""
    chars = [c for c in secret if not c.isspace()]
    if len(secret) < MIN_SPLIT_SECRET or len(chars) < 2:
        return re.escape(secret)
    ahead = rf"(?=[{re.escape(chars[1])}{_GAP_CHARS}\\])"
    return re.escape(chars[0]) + ahead + _GAP + _GAP.join(re.escape(c) for c in chars[1:])


@lru_cache(maxsize=8)
def _hider(wanted: tuple[str, ...]) -> Hider | None:
    if not wanted:
        return None
    # Longest first: a secret that holds another is replaced whole.
    return Hider(re.compile("|".join(_pattern(s) for s in wanted)),
                 tuple(re.compile(_pattern(s)) for s in wanted), min(len(s) for s in wanted))


def hider(secrets: Iterable[str]) -> Hider | None:
    """A Hider for these secret values, or None when none is long enough to look for
    (cached: the same secrets every refresh compile once)."""
    wanted = sorted({s.strip() for s in secrets if len(s.strip()) >= MIN_SECRET},
                    key=lambda s: (-len(s), s))
    return _hider(tuple(wanted))


def _walk(value: Any, hide: Hider) -> Any:
    """`value` with every string in it hidden; the same object where nothing changed (a
    refresh's answer rarely holds a secret: nothing is copied then). A decoded answer
    holds dicts, lists and strings only: exact type checks, the cheap kind; a string
    shorter than any secret (most keys, numbers as text) is passed by without a call."""
    kind = type(value)
    if kind is str:
        return hide.hide(value)
    shortest = hide.shortest
    if kind is dict:
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            key = hide.hide(k) if type(k) is str and len(k) >= shortest else k
            vkind = type(v)
            if vkind is str:
                new = hide.hide(v) if len(v) >= shortest else v
            else:
                new = _walk(v, hide) if vkind is dict or vkind is list else v
            if out is None and (key is not k or new is not v):
                out = {}
                for k0, v0 in value.items():  # the items before this one, as they were
                    if k0 is k:
                        break
                    out[k0] = v0
            if out is not None:
                out[key] = new
        return value if out is None else out
    if kind is list:
        changed: list[Any] | None = None
        for n, v in enumerate(value):
            vkind = type(v)
            if vkind is str:
                new = hide.hide(v) if len(v) >= shortest else v
            else:
                new = _walk(v, hide) if vkind is dict or vkind is list else v
            if changed is None and new is not v:
                changed = value[:n]
            if changed is not None:
                changed.append(new)
        return value if changed is None else changed
    return value


def _keep(out: dict[str, Any], raw: Mapping[str, Any], keys: Iterable[str]) -> None:
    """Put back, as the box spelled them, the values that go back to it."""
    for key in keys:
        if key in raw:
            out[key] = raw[key]


def _run(raw: Any, hide: Hider) -> Any:
    if not isinstance(raw, Mapping):
        return _walk(raw, hide)
    out = _walk(raw, hide)
    _keep(out, raw, RUN_KEEP)
    for part in ("metrics", "log"):
        if isinstance(raw.get(part), Mapping) and isinstance(out.get(part), dict):
            _keep(out[part], raw[part], PART_KEEP)
    path = raw.get("path")
    if isinstance(path, str):
        shown = hide.hide(path)
        if shown != path:
            out["path_shown"] = shown
            if not raw.get("name"):
                out["name"] = shown  # the name defaults to the path: not the real one
    return out


def redact_answer(answer: Any, secrets: Iterable[str]) -> Any:
    """A probe answer with every held secret in the box's words replaced by ***; the
    same object when nothing is held."""
    hide = hider(secrets)
    if hide is None or not isinstance(answer, Mapping):
        return answer
    out = _walk({k: v for k, v in answer.items() if k != "runs"}, hide)
    _keep(out, answer, ("gone",))
    if isinstance(answer.get("guard"), Mapping) and isinstance(out.get("guard"), dict):
        _keep(out["guard"], answer["guard"], ("sig",))
    runs = answer.get("runs")
    if runs is not None:
        out["runs"] = [_run(r, hide) for r in runs] if isinstance(runs, list) else runs
    return out


def redact_words(value: Any, secrets: Iterable[str]) -> Any:
    """Any other decoded answer of a box's (a profile's parts), or one text (an error that
    quotes the box), with every held secret in its words replaced by ***: for what
    carries no address back to the box."""
    hide = hider(secrets)
    return value if hide is None else _walk(value, hide)
