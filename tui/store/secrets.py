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
import time
from collections.abc import Iterable
from pathlib import Path

from tui.model.redact import redact, secrets_in_env

MAX_TOKEN_FILE = 4096  # a saved Hub token is ~40 bytes; anything larger is no token
# Every box's every refresh asks (tui.remote.watch): read afresh at most this often, so
# a thousand boxes do not each walk the environment and open the token file.
HELD_FRESH_SECONDS = 1.0
_recent: dict[tuple[str, ...], tuple[float, list[str]]] = {}


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


def recent_held_secrets(names: Iterable[str] = ()) -> list[str]:
    """`held_secrets(names)`, read again once it is HELD_FRESH_SECONDS old: a variable
    set or a token saved since then counts from the next second on."""
    key = tuple(sorted(names))
    now = time.monotonic()
    found = _recent.get(key)
    if found is None or now - found[0] >= HELD_FRESH_SECONDS:
        if len(_recent) > 64:
            _recent.clear()  # box-specific variable names are few; never grows unbounded
        found = _recent[key] = (now, held_secrets(key))
    return found[1]


def scrub(text: str, *more: str | None) -> str:
    """`text` redacted of every held secret, and of `more` (a token passed by argument)."""
    return redact(text, [*held_secrets(), *(m for m in more if m)])
