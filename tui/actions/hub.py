"""The Hugging Face Hub from the panel's side: its token, what it holds, uploads from here.

A Hub push counts only when the Hub itself, asked by the panel with the
panel's token, lists every file at the new commit with the sha256 the box
hashed (the LFS oid, or the hash of a small file's bytes): a box that says
"done" without uploading reads as not verified.

For a box-to-Hub upload the token goes to the box, a stranger's machine: the
first push from each box says so and asks (`token_notice`); a box can name its
own variable (`token_env`, a fine-grained token scoped to one repo); and
`upload_from = "panel"` keeps the token home: the files are pulled, verified,
and uploaded from the panel's machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tui.model.config import BoxConfig
from tui.model.text import clean_block
from tui.model.token_rule import ACCOUNT, Step, TokenDecision, decide, token_source
from tui.store.secrets import scrub

MAX_REGULAR_BYTES = 64 << 20  # a non-LFS file on the Hub is small by the Hub's own rules
_COMMIT = re.compile(r"[0-9a-f]{40}")


class HubError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def resolve_token(token: str | None) -> str | None:
    """The Hub token: the argument, else `HF_TOKEN`, else huggingface_hub's saved one."""
    if token:
        return token
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def box_token(box: BoxConfig, token: str | None = None) -> tuple[str | None, str]:
    """The token for this box's pushes, and where it came from (for messages).

    A box with `token_env` uses that variable and nothing else: falling back to
    the wider HF_TOKEN would send a token the user meant to keep off that box.
    """
    var = token_source(box)
    if var != ACCOUNT:
        value = os.environ.get(var) or None
        if value is None:
            raise HubError(f"box {box.name}: its token variable {var} (token_env in "
                           "[box.push]) is not set; nothing was sent")
        return value, var
    return resolve_token(token), "HF_TOKEN" if os.environ.get("HF_TOKEN") else \
        "huggingface_hub's saved token"


def token_notice(box: BoxConfig, entries: Iterable[Mapping[str, Any]], *,
                 milestone: bool = False, budget: bool = False) -> str | None:
    """Words for the first push that sends a Hub token to this box, or None (the one rule,
    tui.model.token_rule, decides). A milestone or budget push asks no one: its words say
    that those settings were the user's yes."""
    step: Step = "milestone" if milestone else "budget" if budget else "push"
    return decide(box, step, uses_token=push_uses_box_token(box), entries=entries).notice


def push_uses_box_token(box: BoxConfig) -> bool:
    """A push from this box uploads to the Hub from the box itself (so the box would use a
    token); `upload_from = "panel"` uses the token here, never there."""
    push = box.push
    return push is not None and bool(push.hf_repo) and push.upload_from == "box"


def token_value(box: BoxConfig, decision: TokenDecision, token: str | None = None) -> str | None:
    """The value of the token the rule chose for the box (None when none goes).
    HubError when the box's own variable (token_env) is not set: nothing is sent."""
    if decision.source is None:
        return None
    return box_token(box, token)[0]


def _hub_api(endpoint: str | None, token: str | None) -> Any:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def _words(exc: BaseException, token: str | None) -> str:
    text = scrub(f"{type(exc).__name__}: {exc}", token)  # redacted before it is folded
    return clean_block(" ".join(text.split()))[:400]


def _lfs_sha256(info: Any) -> str | None:
    lfs = getattr(info, "lfs", None)
    if not lfs:
        return None
    sha = getattr(lfs, "sha256", None)
    if sha is None and isinstance(lfs, Mapping):
        sha = lfs.get("sha256") or lfs.get("oid")
    return sha if isinstance(sha, str) else None


def _check(repo: str, paths: Sequence[str], commit: str, token: str | None,
           endpoint: str | None) -> dict[str, str | None]:
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    api = _hub_api(endpoint, token)
    infos = {info.path: info for info in api.get_paths_info(repo, list(paths), revision=commit)}
    found: dict[str, str | None] = {}
    for path in paths:
        info = infos.get(path)
        if info is None:
            found[path] = None
            continue
        sha = _lfs_sha256(info)
        if sha is None:
            # A regular (non-LFS) file has only a git blob id: fetch its bytes and hash them.
            if (getattr(info, "size", 0) or 0) > MAX_REGULAR_BYTES:
                found[path] = None
                continue
            url = hf_hub_url(repo, path, revision=commit, endpoint=endpoint)
            response = get_session().get(url, headers=build_hf_headers(token=token))
            hf_raise_for_status(response)
            sha = hashlib.sha256(response.content).hexdigest()
        found[path] = sha.lower()
    return found


async def hub_sha256s(repo: str, paths: Sequence[str], commit: str, *, token: str | None,
                      endpoint: str | None) -> dict[str, str | None]:
    """What the Hub holds at `commit` for each path: its sha256, or None when absent.

    HubError when the Hub cannot be asked (with words, never the token).
    """
    if not _COMMIT.fullmatch(commit):
        raise HubError(f"no commit id to check ({commit[:60]!r} is not one)")
    try:
        return await asyncio.to_thread(_check, repo, paths, commit, token, endpoint)
    except Exception as exc:  # huggingface_hub raises many kinds: all mean "not verified"
        raise HubError(f"the Hub could not be asked what commit {commit[:12]} holds "
                       f"({_words(exc, token)})") from None


def _upload(repo: str, files: Sequence[tuple[str, Path]], message: str, token: str | None,
            endpoint: str | None) -> str:
    from huggingface_hub import CommitOperationAdd

    api = _hub_api(endpoint, token)
    ops = [CommitOperationAdd(path_in_repo=path_in_repo, path_or_fileobj=str(local))
           for path_in_repo, local in files]
    api.preupload_lfs_files(repo, additions=ops)
    info = api.create_commit(repo, operations=ops, commit_message=message)
    return str(getattr(info, "oid", "") or "")


async def upload_from_panel(repo: str, files: Sequence[tuple[str, Path]], message: str, *,
                            token: str | None, endpoint: str | None) -> str:
    """Upload local files (path in repo, local path) in one commit; its id. HubError if not."""
    try:
        return await asyncio.to_thread(_upload, repo, files, message, token, endpoint)
    except Exception as exc:
        raise HubError(f"uploading to {repo} from this machine failed "
                       f"({_words(exc, token)})") from None
