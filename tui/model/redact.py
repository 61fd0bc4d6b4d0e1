"""One redaction for every text a box or a provider sends that is journaled, logged,
alerted or shown. Pure.

A box is a stranger's machine and a provider's error body is someone else's
words: either may echo back a secret this process sent or holds (a launcher
that prints its own command line with `--wandb-key`, a provider quoting the
API key it refused, a traceback with `https://user:pass@host`). So every such
text passes `redact` before it is kept or printed. It removes:

- the known secret values in play (the Hub token, a box's `token_env`, the
  provider API keys, WANDB_API_KEY...), even split across lines or wrapped by
  the sender (whitespace, a JSON `\\n` or a cleaned control between any two of
  its characters), so a text may be folded or cut only after it was redacted;
- the values of secret-named options: `--wandb-key V`, `--hf-token=V`,
  `api_key=V`, `"password": "V"`, `-k V`, `--auth`, `--credentials`,
  `--pass`/`--password`, `['--wandb-key', 'V']` (an argv echoed as a list), and
  `Authorization: Bearer V`;
- token-shaped words wherever they stand: `hf_...`, GitHub tokens, 40+ hex
  digits (a Weights & Biases key is 40, a Vast.ai key 64) except where labelled
  as a hash or a commit (`sha256 <hex>`, `commit <hex>`), which the journal
  keeps;
- the user and password of a URL (`https://user:pass@host` -> `https://***@host`).

The on-box programs (tui/onbox) scrub their own words first; this is the one
that counts, on the panel's side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "***"
# An option or variable name that says its value is a secret: --wandb-key,
# --hf-token, --client-secret, --password/--pass, --auth, --credentials, API_KEY.
SECRET_NAME = re.compile(r"key|token|secret|passw|passwd|passphrase|credential|auth(?!or)"
                         r"|^-{0,2}pass$|^-{0,2}k$", re.IGNORECASE)
# Values that look like a known token wherever they stand: Hugging Face (`hf_` + 34),
# GitHub, and 40+ hex digits of both kinds (Weights & Biases API keys are 40, Vast.ai's
# 64; a run of one letter, "AAAA...", is padding, not a key).
TOKEN_SHAPE = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\b(?:gh[pousr]_|github_pat_)\w{30,}"
                         r"|(?<![0-9A-Fa-f])[0-9A-Fa-f]{40,}(?![0-9A-Fa-f])")
# A hex run right after one of these is a hash or a commit of ours, kept.
HASH_LABELS = ("sha256 ", "sha256=", "sha256:", "sha256: ", "commit ", "commit=", "oid ")
_DIGIT = re.compile(r"[0-9]")
_HEX_LETTER = re.compile(r"[A-Fa-f]")
# A secret known by value is looked for with anything a sender's wrapping or our own
# cleaning may have put between two of its characters.
_GAP = r"(?:\s|\ufffd|\\[nrt])*"
MIN_SECRET = 4  # a shorter "secret" is matched nowhere: it would star common words
MIN_SPLIT_SECRET = 8  # shorter secrets are matched whole only (a 3-letter one is a word)
# --name V, --name=V, -k V; name=V (an environment line, a query string); "name": "V".
_NAME = r"[A-Za-z0-9][\w.-]*"
_DASHED = re.compile(rf"(?<![\w-])(--?{_NAME}|-k)(=|[ \t]+)(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)")
_ASSIGNED = re.compile(rf"(?<![\w-])({_NAME})(=)(\"[^\"\n]*\"|'[^'\n]*'|[^\s&\"',;)]+)")
_QUOTED = re.compile(rf"([\"']{_NAME}[\"']\s*:\s*)(\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*')")
# A command line echoed as a list: ['--wandb-key', 'V'] (Python's repr, JSON).
_LISTED = re.compile(rf"([\"'](?:--?{_NAME})[\"'],\s*)([\"'])((?:(?!\2)[^\n])*)\2")
_BEARER = re.compile(r"\b(Bearer|Basic)[ \t]+([A-Za-z0-9._~+/=-]{8,})")
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#]+@")


def _secret_pattern(secret: str) -> str:
    if len(secret) < MIN_SPLIT_SECRET:
        return re.escape(secret)
    return _GAP.join(re.escape(c) for c in secret if not c.isspace())


def _known(text: str, secrets: Iterable[str]) -> str:
    wanted = sorted({s.strip() for s in secrets if len(s.strip()) >= MIN_SECRET},
                    key=len, reverse=True)
    if not wanted:
        return text
    # Whole, then split: a plain replace is fast and catches the common case.
    for secret in wanted:
        text = text.replace(secret, REDACTED)
    long = [s for s in wanted if len(s) >= MIN_SPLIT_SECRET]
    if long:
        text = re.sub("|".join(_secret_pattern(s) for s in long), REDACTED, text)
    return text


def _named(match: re.Match[str]) -> str:
    name, sep, value = match.group(1), match.group(2), match.group(3)
    if not SECRET_NAME.search(name) or value.strip("'\"") == REDACTED:
        return match.group(0)
    return f"{name}{sep}{REDACTED}"


def _quoted(match: re.Match[str]) -> str:
    head = match.group(1)
    if not SECRET_NAME.search(head.strip("\"': \t")):
        return match.group(0)
    quote = match.group(2)[0]
    return f"{head}{quote}{REDACTED}{quote}"


def _listed(match: re.Match[str]) -> str:
    head, quote, value = match.group(1), match.group(2), match.group(3)
    name = head.strip().rstrip(",").strip("\"'")
    if not SECRET_NAME.search(name) or value.startswith("-"):
        return match.group(0)
    return f"{head}{quote}{REDACTED}{quote}"


def _shaped(match: re.Match[str]) -> str:
    word = match.group(0)
    if "_" in word:
        return REDACTED  # hf_..., ghp_..., github_pat_...: a hex run has no "_"
    before = match.string[max(0, match.start() - 8):match.start()]
    if before.endswith(HASH_LABELS) or not (_DIGIT.search(word) and _HEX_LETTER.search(word)):
        return word  # a labelled hash, or "AAAA..." padding: no key
    return REDACTED


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret it may hold replaced by ***: the known `secrets`,
    secret-named options' values, token-shaped words and URL passwords."""
    if not text:
        return text
    text = _known(text, secrets)
    text = _USERINFO.sub(rf"\g<1>{REDACTED}@", text)
    text = _QUOTED.sub(_quoted, text)
    text = _LISTED.sub(_listed, text)
    text = _DASHED.sub(_named, text)
    text = _ASSIGNED.sub(_named, text)
    text = _BEARER.sub(rf"\g<1> {REDACTED}", text)
    return TOKEN_SHAPE.sub(_shaped, text)


def _option(arg: str) -> str | None:
    """The name of the option an argument is (`--x-key`, `--x-key=V`, `x_key=V`, `-k`)."""
    if arg.startswith("--") and len(arg) > 2:
        return arg[2:].split("=", 1)[0]
    if re.fullmatch(r"-[A-Za-z](=.*)?", arg, re.DOTALL):
        return arg[1:2]
    head = arg.split("=", 1)[0]
    return head if "=" in arg and re.fullmatch(r"[A-Za-z_][\w-]*", head) else None


def redact_args(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """A command line fit for a journal: the value after (or in `=V` of) a secret-named
    option (`--x-key`, `-k`, `--auth`, `--credentials`, `--pass`), and every secret
    `redact` finds in an argument, starred. An option right after a secret-named one is
    an option, not its value."""
    known = list(secrets)
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        key = _option(arg)
        if key and SECRET_NAME.search(key):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
                continue
            hide_next = True
        out.append(redact(arg, known))
    return out


def secrets_in_env(env: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The values of the variables that hold secrets: those `names`, and every variable
    whose name says so (HF_TOKEN, WANDB_API_KEY, VAST_API_KEY, a box's token_env...) and
    whose value is long enough to be one (KEYTIMEOUT=1 is no secret, and "1" is in every
    text)."""
    wanted = set(names)
    return [value for name, value in env.items() if value and value.strip() and (
        name in wanted or (SECRET_NAME.search(name) and len(value.strip()) >= MIN_SPLIT_SECRET))]


def redact_tree(value: Any, secrets: Sequence[str], keep: frozenset[str] = frozenset()
                ) -> Any:
    """Every string in a JSON-like value redacted, but those under the keys in `keep`
    (hashes, sizes, commits: ours, and needed whole)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {k: v if k in keep else redact_tree(v, secrets, keep) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, secrets, keep) for v in value]
    return value
