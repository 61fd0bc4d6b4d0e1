"""What the `modal` CLI prints, read into plain values: pure, bounded, hostile-safe.

The shapes are the CLI's (client 1.5.0 and later; see docs/serverless.md): a JSON array
from `modal app list --json` and `modal volume ls --json`, `modal client version: X`
from `modal --version`, an exception's message on stderr (inside a box of line-drawing
characters when rich draws one) for a failure. Every string is cleaned before it leaves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tui.model.fields import whole
from tui.model.serverless import AppState, ServerlessError, VolumeEntry
from tui.model.text import plain

MIN_VERSION = (1, 5, 0)  # the release that gave --json its snake_case keys
MAX_ENTRIES = 10_000  # volume entries read from one listing; past this the rest is dropped
DETAIL_CHARS = 200
_VERSION = re.compile(r"modal client version:\s*([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?")
_BOX = re.compile("[\u2500-\u257f]")  # rich's panel border (╭─ Error ─╮ │ ... │ ╰─╯)
_SIZE = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*(B|KiB|MiB|GiB|TiB|PiB|EiB|ZiB)")
_UNITS = {"B": 0, "KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5, "EiB": 6, "ZiB": 7}
# `modal app list`'s state words: which the fleet reads as running and as stopped.
RUNNING_WORDS = ("deployed", "ephemeral", "ephemeral (detached)", "initializing...",
                 "stopping...")
STOPPED_WORDS = ("stopped", "disabled")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """(1, 5, 4) from `modal client version: 1.5.4`, else None."""
    match = _VERSION.search(text[:4096])
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def version_problem(text: str) -> ServerlessError | None:
    """None when the CLI is new enough; else why not, said with the fix."""
    version = parse_version(text)
    need = ".".join(map(str, MIN_VERSION))
    if version is None:
        return ServerlessError("cli_too_old", f"modal --version said {plain(text, 80)!r}, "
                               f"not a version: gpurent-tui needs modal {need} or later "
                               "(pip install -U modal)")
    if version < MIN_VERSION:
        have = ".".join(map(str, version))
        return ServerlessError("cli_too_old", f"modal {have} is too old: gpurent-tui reads "
                               f"its --json output as modal {need} and later print it "
                               "(pip install -U modal)")
    return None


def last_line(stderr: str) -> str:
    """The CLI's own words for a failure: its error's lines without rich's box, joined;
    else its last line, cleaned and at most DETAIL_CHARS."""
    lines = [plain(_BOX.sub(" ", line), 400) for line in stderr[-65536:].splitlines()]
    lines = [line for line in lines if line and line != "Error"]
    if not lines:
        return ""
    boxed = _BOX.search(stderr[-65536:]) is not None
    words = " ".join(lines[-6:]) if boxed else lines[-1]
    words = re.sub(r"\s+", " ", words).strip()
    return words if len(words) <= DETAIL_CHARS else words[:DETAIL_CHARS - 3] + "..."


def classify(stderr: str, *, what: str) -> ServerlessError:
    """A failed call's kind from the CLI's message (`what`: "app" or "volume")."""
    words = last_line(stderr)
    low = words.lower()
    if "token missing" in low or "could not authenticate" in low or \
            ("authenticat" in low and ("fail" in low or "invalid" in low)):
        return ServerlessError("not_logged_in", "modal is not logged in here: run `modal "
                               f"token new` (or `modal setup`) as this user ({words})")
    if what == "app" and ("no app with name" in low or "not found" in low):
        return ServerlessError("app_not_found", f"modal: {words}")
    if what == "volume" and ("not found" in low or "no such file" in low):
        return ServerlessError("path_missing", f"modal: {words}")
    return ServerlessError("failed", f"modal failed: {words or 'no message on stderr'}")


def _array(stdout: bytes, command: str) -> list[Any]:
    try:
        data = json.loads(stdout.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise ServerlessError("failed", f"{command} did not print JSON") from None
    if not isinstance(data, list):
        raise ServerlessError("failed", f"{command} printed JSON that is not an array")
    return data


def parse_stamp(value: object) -> float | None:
    """Epoch seconds of the CLI's `2026-12-05 07:32:10+00:00` (app list) or
    `2026-12-05 07:32 UTC` (volume ls, run with TZ=UTC); None for anything else."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def parse_size(value: object) -> int | None:
    """Bytes of the CLI's humanized size (`1.2 MiB`): rounded as the CLI rounded it."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if not isinstance(value, str):
        return None
    match = _SIZE.fullmatch(value.strip())
    if match is None:
        return None
    return int(float(match.group(1)) * 1024 ** _UNITS[match.group(2)])


def _app_state(row: Mapping[str, Any], app: str) -> AppState:
    word = plain(row.get("state"), 40)
    state = "running" if word in RUNNING_WORDS else "stopped" if word in STOPPED_WORDS \
        else "unknown"
    tasks = whole(row.get("tasks"), from_text=True)
    detail = f"{word}" if word else "no state said"
    return AppState(provider="modal", app=app, state=state,
                    tasks=tasks if tasks is not None and tasks >= 0 else None,
                    started_at=parse_stamp(row.get("created_at")),
                    stopped_at=parse_stamp(row.get("stopped_at")) if state == "stopped"
                    else None, detail=detail[:DETAIL_CHARS])


def app_from_list(stdout: bytes, app: str) -> AppState:
    """The app named `app` in `modal app list --json`: a live one before a stopped one,
    the latest of each; `missing` when the list does not name it."""
    rows = [r for r in _array(stdout, "modal app list --json") if isinstance(r, dict)]
    if rows and "description" not in rows[0] and "Description" in rows[0]:
        raise ServerlessError("cli_too_old", "modal app list --json printed the old keys "
                              "(Description, App ID): pip install -U modal")
    mine = [_app_state(r, app) for r in rows[:MAX_ENTRIES] if r.get("description") == app]
    if not mine:
        return AppState(provider="modal", app=app, state="missing",
                        detail="not in modal app list (never deployed, or stopped long ago)")
    mine.sort(key=lambda s: (s.state == "running", s.started_at or 0.0))
    return mine[-1]


def volume_entries(stdout: bytes) -> list[VolumeEntry]:
    """`modal volume ls VOLUME PATH --json` as entries (paths '/'-separated, no leading /)."""
    entries: list[VolumeEntry] = []
    for row in _array(stdout, "modal volume ls --json")[:MAX_ENTRIES]:
        if not isinstance(row, dict) or not isinstance(row.get("filename"), str):
            continue
        path = plain(row["filename"], 1000).strip("/")
        if not path or any(part in ("", ".", "..") for part in path.split("/")):
            continue  # never a path that climbs out of where it was listed
        raw = row["filename"].strip("/")
        keep_raw = raw != path and len(raw) <= 1000 and "\x00" not in raw and \
            not any(part in ("", ".", "..") for part in raw.split("/"))
        entries.append(VolumeEntry(path=path, is_dir=row.get("type") == "dir",
                                   size=parse_size(row.get("size")),
                                   mtime=parse_stamp(row.get("created_modified")),
                                   raw_path=raw if keep_raw else None))
    return entries
