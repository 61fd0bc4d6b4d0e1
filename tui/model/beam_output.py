"""What the `beam` CLI prints, read into plain values: pure, no I/O.

The shapes are those of beam-client (the `beam` command) over the beta9 SDK:
`beam deployment list --format json` and `beam task list --format json` print a
JSON array of the gateway's records (betterproto, snake_case; a field at its
default, such as `"active": false`, is left out); `beam ls` prints only a table
(names, sizes rounded to 0.01 of a binary unit, ages in words); errors are a line
that starts with a cross on stdout. docs/serverless-beam.md cites each source.
Everything the CLI prints is hostile: it is cleaned and bounded here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tui.model.serverless import AppState, VolumeEntry
from tui.model.text import clean, plain

# beam-client 0.2.129 is the first release that requires beta9 >= 0.1.144 (^0.1.152),
# where `beam cp beam://VOLUME/PATH LOCAL` (downloads) arrived; the JSON listings
# are older (beta9 0.1.17 for deployments).
MIN_VERSION: tuple[int, int, int] = (0, 2, 129)
DETAIL_CHARS = 200

_VERSION = re.compile(r"\bversion\s+v?(\d+)\.(\d+)\.(\d+)")
_NOT_LOGGED_IN = re.compile(
    r"Welcome to Beam|Let's get started|Let's try setting it up|does not exist\. Let's"
    r"|Unauthorized: Invalid auth token|Invalid token", re.IGNORECASE)
_TOO_OLD = re.compile(r"Beam CLI update required|No such option|No such command")
_APP_NOT_FOUND = re.compile(r"Deployment not found", re.IGNORECASE)
_PATH_MISSING = re.compile(
    r"unable to find volume|Volume '.*' not found|Path does not exist|status_code=404"
    r"|no such file|not found", re.IGNORECASE)
_ZERO_YEAR = 1  # Go's zero time.Time, sent for a task that has not started or ended
_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_SIZE = re.compile(r"(\d+\.\d\d) (B|KiB|MiB|GiB|TiB|PiB)$")
_SIZE_WINDOW = 16
_UNITS = {"B": 0, "KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5}
_AGE = re.compile(r"^(\d+) (second|minute|hour|day)s? ago$")
_AGE_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_HEADER = re.compile(r"^\s*Name\s+Size\s+Modified Time\s+IsDir\s*$")
_FOOTER = re.compile(r"^\s*(\d+) items \| .* used\s*$")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}$")


def version_of(text: str) -> tuple[int, int, int] | None:
    """`beam, version 0.2.207` (click's --version line) as numbers, else None."""
    match = _VERSION.search(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def last_line(text: str) -> str:
    """The CLI's last non-blank line, cleaned to one bounded line (its own words)."""
    for line in reversed(text.replace("\r", "\n").splitlines()):
        line = plain(line, cap=DETAIL_CHARS).lstrip("✗!✓ ").strip()
        if line:
            return line
    return ""


def failure_kind(text: str, *, volume: bool = False) -> str:
    """Which of the contract's CLI_ERRORS this output says, by the CLI's own words."""
    if _NOT_LOGGED_IN.search(text):
        return "not_logged_in"
    if _TOO_OLD.search(text):
        return "cli_too_old"
    if _APP_NOT_FOUND.search(text):
        return "app_not_found"
    if volume and _PATH_MISSING.search(text):
        return "path_missing"
    return "failed"


def json_list(text: str) -> list[dict[str, Any]]:
    """The JSON array a `--format json` listing printed; ValueError when there is none.

    A line or two before it (a warning) is allowed; anything not an array of objects
    is refused whole, so a half-written answer is never read as a short one."""
    text = _ESCAPES.sub("", text)  # colour, were it forced: JSON itself escapes ESC
    start = -1
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("["):
            start = offset + len(line) - len(line.lstrip())
            break
        offset += len(line)
    if start < 0:
        raise ValueError("no JSON array in the output")
    try:
        value = json.loads(text[start:])
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"broken JSON ({type(exc).__name__})") from None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError("the JSON is not an array of objects")
    return value


def iso_epoch(value: object) -> float | None:
    """An RFC 3339 time as the CLI prints it (`2024-06-13T22:45:01.547676Z`) in epoch
    seconds; None for Go's zero time (not started), a missing or a malformed one."""
    if not isinstance(value, str):
        return None
    match = _ISO.match(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    if year == _ZERO_YEAR:
        return None
    fraction = float("0." + match.group(7)) if match.group(7) else 0.0
    zone = match.group(8)
    offset = timedelta(0)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC) - offset
    except ValueError:
        return None
    return moment.timestamp() + fraction


def _text(value: object, cap: int = DETAIL_CHARS) -> str:
    return plain(value, cap=cap) if isinstance(value, str) else ""


def _version(record: Mapping[str, Any]) -> int:
    version = record.get("version")
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


def safe_id(value: object) -> str | None:
    """A deployment, stub or task id fit to pass back to the CLI in argv, else None."""
    if isinstance(value, str) and _ID.match(value) and "=" not in value and "," not in value:
        return value
    return None


def named(deployments: Sequence[Mapping[str, Any]], app: str) -> list[Mapping[str, Any]]:
    """The deployments called `app` (every version), newest version first."""
    mine = [d for d in deployments if d.get("name") == app]
    return sorted(mine, key=_version, reverse=True)


def active_ids(deployments: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of the active ones (a stop sets `active` false, which the JSON omits)."""
    ids = []
    for record in deployments:
        ident = safe_id(record.get("id"))
        if record.get("active") is True and ident is not None:
            ids.append(ident)
    return ids


def app_state(app: str, deployments: Sequence[Mapping[str, Any]],
              tasks: Sequence[Mapping[str, Any]]) -> AppState:
    """One Beam app (its deployments by name) and its running tasks as an AppState.

    Running: a version is active, or a task of one of its stubs still runs (a stop
    marks the deployment inactive at once; its containers wind down after). Stopped:
    no active version and no running task. Missing: no deployment by that name."""
    mine = named(deployments, app)
    if not mine:
        return AppState("beam", app, "missing",
                        detail=plain(f"no deployment named {clean(app)}; only deployed Beam "
                                     "apps are seen (`beam deploy`)", cap=DETAIL_CHARS))
    stubs = {d.get("stub_id") for d in mine if isinstance(d.get("stub_id"), str)}
    running = [t for t in tasks
               if _text(t.get("status")).upper() == "RUNNING" and t.get("stub_id") in stubs]
    starts = [s for s in (iso_epoch(t.get("started_at")) for t in running) if s is not None]
    active = [d for d in mine if d.get("active") is True]
    newest = mine[0]
    words = f"v{_version(newest)} {'active' if newest.get('active') is True else 'inactive'}"
    if len(active) > 1:
        words += f", {len(active)} versions active"
    stub_type = _text(newest.get("stub_type"), 60)
    if stub_type:  # the running tasks are said beside the detail (AppState.tasks)
        words += f", {stub_type}"
    state = "running" if active or running else "stopped"
    return AppState("beam", app, state, tasks=len(running),
                    started_at=min(starts) if starts else None,
                    detail=plain(words, cap=DETAIL_CHARS))


def size_bytes(text: str) -> int | None:
    """`1.21 KiB` (the CLI's rounding) back to bytes, approximately; None when blank."""
    match = _SIZE.search(text.strip())
    if match is None:
        return None
    return round(float(match.group(1)) * 1024 ** _UNITS[match.group(2)])


def age_epoch(text: str, now: float) -> float | None:
    """The CLI's `Modified Time` (`just now`, `5 minutes ago`, `Dec 01 2026`) as epoch
    seconds, as coarse as the words are; None when blank or not one of its forms."""
    words = text.strip()
    if not words:
        return None
    if words == "just now":
        return now
    one = {"1 minute ago": 60, "1 hour ago": 3600, "1 day ago": 86400}.get(words)
    if one is not None:
        return now - one
    match = _AGE.match(words)
    if match is not None:
        return now - int(match.group(1)) * _AGE_SECONDS[match.group(2)]
    try:
        return datetime.strptime(words, "%b %d %Y").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def age_slack(text: str) -> float:
    """How far age_epoch's reading of these words may sit from the true time: the words'
    own unit (`just now` covers up to 2 s; a date, its whole day)."""
    words = text.strip()
    if words == "just now":
        return 2.0
    match = _AGE.match(words)
    return float(_AGE_SECONDS[match.group(2)]) if match is not None else 86400.0


def _name(raw: str) -> str:
    return clean(_ESCAPES.sub("", raw))


def ls_entries(text: str, folder: str, now: float) -> list[VolumeEntry]:
    """The rows of `beam ls VOLUME/FOLDER` (a table, the CLI has no JSON for it).

    The table shows each entry's last name only (a folder's with a `/`), so the path
    is FOLDER/NAME. Columns are found from the header; the right-hand columns hold
    only ASCII, so each row is read from its right end, and a name in wide or
    zero-width characters (or an escape sequence) cannot shift them. A row that does
    not fit, or a count in the footer that differs from the rows read, is a
    ValueError: never a short list."""
    # Colour, were it forced, is drawn around padded cells: without it the columns hold.
    lines = _ESCAPES.sub("", text).replace("\r\n", "\n").split("\n")
    head = next((i for i, line in enumerate(lines) if _HEADER.match(line)), -1)
    if head < 0 or head + 1 >= len(lines) or set(lines[head + 1].strip()) - {"─", "-"}:
        raise ValueError("no listing table in the output")
    header = lines[head]
    width = len(header)
    size_end = header.index("Size") + len("Size")
    mtime_start = header.index("Modified Time")
    isdir_start = header.index("IsDir", mtime_start)
    rows: list[str] = []
    footer: int | None = None
    for line in lines[head + 2:]:
        if not line.strip():
            continue
        counted = _FOOTER.match(line)
        if counted is not None:
            footer = int(counted.group(1))
            break
        rows.append(line)
    if footer is None:
        raise ValueError("the listing has no item count")
    if footer != len(rows):
        raise ValueError(f"the listing counts {footer} items but shows {len(rows)} rows")
    prefix = folder.strip("/")
    entries = []
    for row in rows:
        # Rows are padded to the table's width, unless something stripped them: put the
        # right edge back where the IsDir column says, whatever the name holds.
        row = row.rstrip()
        word = "Yes" if row.endswith("Yes") else "No" if row.endswith("No") else ""
        if not word:
            raise ValueError("a listing row without Yes/No in IsDir")
        row += " " * (width - isdir_start - len(word))
        end = len(row)
        is_dir = row[end - (width - isdir_start):].strip()
        if is_dir not in ("Yes", "No"):
            raise ValueError("a listing row without Yes/No in IsDir")
        mtime = row[end - (width - mtime_start):end - (width - isdir_start)]
        left = row[:end - (width - size_end)]
        size: int | None = None
        if left and not left[-1].isspace():
            # A size is at most `1023.99 KiB`, three spaces at least from the name.
            tail = len(left) - _SIZE_WINDOW
            match = _SIZE.search(left, max(tail, 0))
            if match is None:
                raise ValueError("a listing row with an unreadable size")
            size = round(float(match.group(1)) * 1024 ** _UNITS[match.group(2)])
            left = left[:match.start()]
        name = left[2:].rstrip() if left.startswith("  ") else left.strip()
        if is_dir == "Yes" and name.endswith("/"):
            name = name[:-1]
        name = _name(name)
        if not name:
            raise ValueError("a listing row without a name")
        path = f"{prefix}/{name}" if prefix else name
        entries.append(VolumeEntry(path=path, is_dir=is_dir == "Yes",
                                   size=None if is_dir == "Yes" else size,
                                   mtime=age_epoch(mtime, now),
                                   mtime_slack=age_slack(mtime)))
    return entries
