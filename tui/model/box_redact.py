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


@dataclass(frozen=True)
class Hider:
    """The held secrets, ready to look for in many texts: one compiled pattern for them
    all, whole or split by the sender's wrapping, and the shortest length one can have
    (a shorter text, most of an answer's keys and numbers-as-text, is passed by)."""

    pattern: re.Pattern[str]
    shortest: int

    def hide(self, text: str) -> str:
        """`text` with every held secret in it replaced by *** (the same object when it
        holds none)."""
        if len(text) < self.shortest or self.pattern.search(text) is None:
            return text
        return self.pattern.sub(REDACTED, text)


# Between two characters of a secret: what `redact` allows (whitespace, a JSON escape, a
# U+FFFD), and the raw controls a box may put there, which `clean` turns into U+FFFD only
# after this (so "hf_ab<ESC>cd..." would otherwise reach the screen as "hf_ab�cd...").
_GAP = r"(?:[\s\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffd]|\\[nrt])*"


def _pattern(secret: str) -> str:
    if len(secret) < MIN_SPLIT_SECRET:
        return re.escape(secret)
    return _GAP.join(re.escape(c) for c in secret if not c.isspace())


@lru_cache(maxsize=8)
def _hider(wanted: tuple[str, ...]) -> Hider | None:
    if not wanted:
        return None
    # Longest first: a secret that holds another is replaced whole.
    return Hider(re.compile("|".join(_pattern(s) for s in wanted)),
                 min(len(s) for s in wanted))


def hider(secrets: Iterable[str]) -> Hider | None:
    """A Hider for these secret values, or None when none is long enough to look for
    (cached: the same secrets every refresh compile once)."""
    wanted = sorted({s.strip() for s in secrets if len(s.strip()) >= MIN_SECRET},
                    key=lambda s: (-len(s), s))
    return _hider(tuple(wanted))


def _walk(value: Any, hide: Hider) -> Any:
    """`value` with every string in it hidden; the same object where nothing changed (a
    refresh's answer rarely holds a secret: nothing is copied then). A decoded answer
    holds dicts, lists and strings only: exact type checks, the cheap kind."""
    kind = type(value)
    if kind is str:
        return hide.hide(value)
    if kind is dict:
        out: dict[Any, Any] | None = None
        for n, (k, v) in enumerate(value.items()):
            key = hide.hide(k) if type(k) is str else k
            new = hide.hide(v) if type(v) is str else \
                _walk(v, hide) if type(v) in (dict, list) else v
            if out is None and (key is not k or new is not v):
                out = dict(list(value.items())[:n])
            if out is not None:
                out[key] = new
        return value if out is None else out
    if kind is list:
        items = [_walk(v, hide) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
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
    """Any other decoded answer of a box's (a profile's parts) with every held secret in
    its words replaced by ***: for answers that carry no address back to the box."""
    hide = hider(secrets)
    return value if hide is None else _walk(value, hide)
