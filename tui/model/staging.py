"""Staging a data set on the Hub and fetching it onto a box: names, and what counts as done.

Pure. `stage` counts when the Hub's sha256 of the uploaded tar equals the one
computed while packing it; `fetch` counts when the sha256 the box computed of
its download equals the Hub's (asked by the panel's machine, never the box's
word), and the box then unpacked it. The box's answer is untrusted: every
field is type- and range-checked before it is believed or printed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.fields import finite, whole
from tui.model.sizing import human_bytes
from tui.model.text import plain

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9._-]{1,96}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def repo_problem(repo: str) -> str | None:
    """Why `repo` is not a Hub repo id (ORG/NAME), or None."""
    if not _REPO.match(repo) or ".." in repo or repo.endswith((".git", ".")):
        return (f"{repo!r} is not a Hugging Face repo id: ORG/NAME, letters, digits, '-', "
                "'_' and '.'")
    return None


def tar_name(folder_name: str) -> str:
    """The tar's name in the repo for a data set folder: `<folder>.tar`, made safe."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder_name).strip("-.") or "dataset"
    return f"{name}.tar"


def rate(size: int, seconds: float | None) -> str:
    if not seconds or seconds <= 0:
        return ""
    return f", {human_bytes(size / seconds)}/s"


@dataclass(frozen=True)
class StageReport:
    """What `stage` did: the tar it packed, and whether the Hub holds exactly it."""

    repo: str
    name: str
    size: int
    sha256: str
    files: int
    verified: bool
    message: str
    commit: str | None = None
    private: bool | None = None
    pack_seconds: float | None = None
    upload_seconds: float | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verified else EXIT_FAILED


@dataclass(frozen=True)
class Expected:
    """The staged tar as the Hub describes it to the panel's machine."""

    repo: str
    filename: str
    size: int
    sha256: str
    revision: str | None = None
    # Whether a box needs a Hub token to download it: a private or gated repo, or one
    # whose visibility the Hub did not say (a public one needs none).
    needs_token: bool = True


@dataclass(frozen=True)
class FetchReport:
    """What `fetch` did on a box, read from its (untrusted) answer."""

    box: str
    repo: str
    filename: str
    dest: str
    verified: bool
    message: str
    bytes: int | None = None
    download_seconds: float | None = None
    extract_seconds: float | None = None
    members: int | None = None
    refused: tuple[str, ...] = ()
    kind: str | None = None  # the box's failure kind: no_hub, auth, mismatch, unsafe, ...
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.verified else EXIT_FAILED


def _seconds(value: object) -> float | None:
    number = finite(value)
    return number if number is not None and 0 <= number < 10**7 else None


def _count(value: object) -> int | None:
    number = whole(value)
    return number if number is not None and number >= 0 else None


FAILURE_WORDS = {
    "no_hub": "huggingface_hub is not installed in the box's interpreter: pip install "
              "huggingface_hub there",
    "auth": "the Hub refused the token (set HF_TOKEN or log in on this machine)",
    "not_found": "the Hub has no such repo or file for this token",
    "no_space": "not enough free disk",
    "mismatch": "the download's sha256 differs from the Hub's",
    "unsafe": "the tar was refused",
    "bad_tar": "the download is not a readable tar",
}


def read_fetch(answer: object, expected: Expected, *, box: str, dest: str,
               failure: str | None = None) -> FetchReport:
    """The fetch's outcome from the box's answer, judged against the Hub's own sha256."""
    unread = FetchReport(box=box, repo=expected.repo, filename=expected.filename, dest=dest,
                         verified=False, message="")
    if failure is not None:
        return replace(unread, message=failure)
    if not isinstance(answer, Mapping):
        return replace(unread, message=f"box {box} sent no fetch answer; nothing is verified")
    if isinstance(answer.get("error"), str):
        kind = plain(answer.get("kind"), 20) or "error"
        words = FAILURE_WORDS.get(kind, "the fetch failed")
        refused = tuple(f"{plain(r.get('name'), 200)}: {plain(r.get('why'), 200)}"
                        for r in (answer.get("refused") or [])[:20] if isinstance(r, Mapping))
        count = _count(answer.get("refused_count"))
        more = f" ({count} in all)" if count and count > len(refused) else ""
        return replace(unread, kind=kind, refused=refused,
                       message=f"{words} on box {box}: {plain(answer['error'], 600)}{more}")
    sha = answer.get("sha256")
    size = _count(answer.get("bytes"))
    real_dest = plain(answer.get("dest"), 400) or dest
    read = replace(unread, dest=real_dest, bytes=size,
                   download_seconds=_seconds(answer.get("download_s")),
                   extract_seconds=_seconds(answer.get("extract_s")),
                   members=_count(answer.get("members")))
    if not isinstance(sha, str) or not _SHA256.match(sha) or size is None:
        return replace(read, message=f"box {box} answered without a usable sha256 and size: "
                                     "nothing is verified")
    if sha != expected.sha256 or size != expected.size:
        return replace(read, kind="mismatch",
                       message=f"box {box} reports sha256 {sha[:16]}... ({size} bytes), "
                               f"the Hub {expected.sha256[:16]}... ({expected.size} bytes): "
                               "not verified")
    extracted = _count(answer.get("extracted_bytes"))
    files = _count(answer.get("files"))
    down = read.download_seconds
    cached = " (already in the box's HF cache)" if answer.get("cached") is True else ""
    took = f" in {down:.1f} s{rate(size, down)}" if down is not None and not cached else ""
    unpack = read.extract_seconds
    message = (f"{expected.filename} ({human_bytes(size)}) fetched onto box {box}{cached}{took}"
               f", sha256 equal to the Hub's; {files if files is not None else '?'} files "
               f"({human_bytes(extracted or 0)}) unpacked into {real_dest}"
               + (f" in {unpack:.1f} s" if unpack is not None else "")
               + ("; the tar was deleted from the box's HF cache"
                  if answer.get("tar_removed") is True else ""))
    return replace(read, verified=True, message=message)
