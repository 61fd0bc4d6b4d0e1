"""Box text made safe for a terminal: no control sequence a box sent ever reaches the user's.

A run directory's name, a status.json error, a train.log line, a GPU name or a
provider's message is written by someone else. Printed raw, an ESC or OSC in it
can retitle or clear the screen, or write the user's clipboard (OSC 52). Every
such text is cleaned where it enters the model and again where plain text
leaves for a terminal (`status`, error messages, notifications): C0 and C1
controls, DEL and the bidirectional overrides that make text read otherwise
than it is become a visible U+FFFD; a tab becomes a space. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REPLACEMENT = "\ufffd"
# C0 (but tab and newline, handled apart), DEL, C1, and the bidi embeddings,
# overrides and isolates (U+202A-U+202E, U+2066-U+2069).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_OR_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Whole escape sequences (CSI `ESC [ ... m`, OSC `ESC ] ... BEL`) go; `clean`
# then makes any other control a visible U+FFFD.
_SEQUENCE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def clean(text: str) -> str:
    """One line of box text, safe to print: controls (newlines too) become U+FFFD."""
    if text.isprintable():
        return text  # the common case, and fast
    return _UNSAFE_OR_NEWLINE.sub(REPLACEMENT, text.replace("\t", " "))


def clean_block(text: str) -> str:
    """Text of several lines, safe to print: newlines stay, every other control goes."""
    if text.isprintable():
        return text
    return _UNSAFE.sub(REPLACEMENT, text.replace("\t", " ").replace("\r\n", "\n"))


def clean_data(value: Any) -> Any:
    """A parsed JSON document with every string in it (keys too) cleaned to one line."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {clean(str(k)): clean_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_data(v) for v in value]
    return value


def has_unsafe(text: str) -> bool:
    """True when the text holds something `clean_block` would replace."""
    return _UNSAFE.search(text) is not None


def plain(value: object, cap: int = 500) -> str:
    """Box text made safe for a terminal: no control sequences, one bounded string."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
    else:
        text = ""  # None, containers: nothing a box should have sent here
    text = _SEQUENCE.sub("", text[: cap * 4]).replace("\n", " ").replace("\r", " ")
    text = clean(text).strip()
    return text if len(text) <= cap else text[: cap - 3] + "..."
