"""The secret values this process holds, for the one redaction (tui/model/redact.py).

A box or a provider may echo back any secret the panel sent it or holds: the
Hub token (HF_TOKEN, or huggingface_hub's saved token file), a box's own
`token_env`, the provider API keys, WANDB_API_KEY. They live in the
environment and in that one file; this reads them at the moment a text is
about to be journaled, logged or alerted, so a variable set later is covered
too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from tui.model.redact import redact, secrets_in_env

MAX_TOKEN_FILE = 4096  # a saved Hub token is ~40 bytes; anything larger is no token
# Every box's every refresh asks (tui.remote.watch): the last answer per variable-name
# set, kept while the environment and the token file are as they were.


class _Held(NamedTuple):
    env: tuple[object, ...]  # the environment's raw items when it was read
    path: Path  # the token file's place, which only the environment decides
    saved: tuple[int, int, int] | None  # that file's identity (inode, size, mtime)
    secrets: list[str]


_recent: dict[tuple[str, ...], _Held] = {}


def _hub_token_file() -> Path:
    """Where huggingface_hub saves `hf auth login`'s token (HF_TOKEN_PATH, HF_HOME)."""
    if os.environ.get("HF_TOKEN_PATH"):
        return Path(os.environ["HF_TOKEN_PATH"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "huggingface")
    return Path(home) / "token"


def held_secrets(names: Iterable[str] = ()) -> list[str]:
    """Every secret value in play: the secret-named variables (and `names`), and the
    saved Hub token."""
    found = secrets_in_env(os.environ, names)
    try:
        with _hub_token_file().open("rb") as f:
            saved = f.read(MAX_TOKEN_FILE).decode("utf-8", "replace").strip()
    except OSError:
        saved = ""
    if saved:
        found.append(saved)
    return found


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def recent_held_secrets(names: Iterable[str] = ()) -> list[str]:
    """`held_secrets(names)`, read again only when the environment or the token file
    changed since the last call: a thousand boxes' refreshes do not each walk the
    environment and read the file, and a variable set later still counts at once. The
    environment is compared by its raw items (CPython keeps them undecoded in `_data`),
    the file by a stat."""
    key = tuple(sorted(names))
    data = getattr(os.environ, "_data", None)
    env = tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())
    found = _recent.get(key)
    path = found.path if found is not None and found.env == env else _hub_token_file()
    saved = _identity(path)
    if found is None or found.env != env or found.saved != saved:
        if len(_recent) > 64:
            _recent.clear()  # box-specific variable names are few; never grows unbounded
        found = _recent[key] = _Held(env, path, saved, held_secrets(key))
    return found.secrets


def scrub(text: str, *more: str | None) -> str:
    """`text` redacted of every held secret, and of `more` (a token passed by argument)."""
    return redact(text, [*held_secrets(), *(m for m in more if m)])
