"""One box: its connection, GPUs, disks and runs, folded from probe answers.

Pure: no I/O. A failed refresh changes only the connection fields, so every
run, history and log line already gathered stays on screen (and in
`status --json`) with the age of the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from tui.model.busy import BusyIntegral, BusyWindow, parse_busy
from tui.model.fields import MAX_COUNT, brief, digits, finite, size
from tui.model.rest import Rest
from tui.model.runs import Cursor, Health, RunState, fold_run
from tui.model.text import clean, clean_block
from tui.model.watchdog import GuardView, fold_guard_part

PROBE_VERSION = 1


class Connection(StrEnum):
    CONNECTING = "connecting"
    OK = "ok"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_REVOKED = "host_key_revoked"  # known_hosts marks the offered key @revoked
    PTY_ONLY = "pty_only"  # the endpoint runs no commands, only interactive shells
    PROBE_FAILED = "probe_failed"
    WATCHER_CRASHED = "watcher_crashed"  # a bug in the panel, not the box: shown, restarted


@dataclass(frozen=True)
class GpuRow:
    index: int
    name: str
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None


@dataclass(frozen=True)
class DiskRow:
    """A runs root's filesystem, in `df`'s terms: `free` is what is still available to
    write (statvfs f_bavail), so the blocks reserved for root count as neither."""

    root: str
    total: int
    used: int
    free: int
    mount: str | None = None   # the mount point holding the runs root, as df names it
    device: str | None = None
    fstype: str | None = None

    @property
    def used_pct(self) -> float:
        """Used / (used + available): what `df` shows (total would count reserved blocks)."""
        room = self.used + self.free
        return 100.0 * self.used / room if room > 0 else 0.0

    @property
    def percent(self) -> int:
        """`df`'s Use%: rounded up, so a disk that is not quite full never reads 100%
        before it is, and a nearly empty one never reads 0%."""
        return min(math.ceil(self.used_pct), 100)

    @property
    def where(self) -> str:
        """Which filesystem: `/ (overlay)`, `/workspace (/dev/sda1, ext4)`."""
        details = ", ".join(x for x in (self.device if self.device != self.fstype else None,
                                       self.fstype) if x)
        place = self.mount or self.root
        return f"{place} ({details})" if details else place


def _label(value: object, limit: int = 120) -> str | None:
    """A short name the box gave (a mount point, a device): printable characters only."""
    if not isinstance(value, str) or not value:
        return None
    safe = clean(value)
    return safe if len(safe) <= limit else safe[:limit - 3] + "..."


class BadAnswer(ValueError):
    """The probe answered something this client cannot read."""


def _gpu_value(field: str) -> float | None:
    field = field.strip()
    if not field or field.startswith("[") or field.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    try:
        return finite(float(field))
    except ValueError:
        return None


def parse_gpu_rows(lines: list[str]) -> tuple[tuple[GpuRow, ...], str | None]:
    """Rows of `nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,
    memory.total,temperature.gpu,power.draw --format=csv,noheader,nounits`.

    Fields that the card does not report ("[N/A]", "[Not Supported]") become
    None; a GPU name may itself hold commas, so the name is what lies between
    the index and the last five fields.
    """
    rows: list[GpuRow] = []
    bad = 0
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        index = digits(parts[0]) if len(parts) >= 7 else None
        if index is None:
            bad += 1
            continue
        name = clean(", ".join(parts[1:-5]))
        util, used, total, temp, power = (_gpu_value(p) for p in parts[-5:])
        rows.append(GpuRow(index, name, util, used, total, temp, power))
    note = f"{bad} nvidia-smi line(s) could not be read" if bad else None
    return tuple(rows), note


@dataclass(frozen=True)
class BoxState:
    """Everything known about one box at one moment. Times are the panel's clock
    (`*_at`) except `box_time`, the box's own clock from its last answer."""

    name: str
    connection: Connection = Connection.CONNECTING
    error: str | None = None
    box_time: float | None = None
    last_ok_at: float | None = None
    failed_since: float | None = None
    failures: int = 0
    retry_at: float | None = None
    runs: tuple[RunState, ...] = ()
    gpus: tuple[GpuRow, ...] = ()
    gpu_note: str | None = None
    gpu_busy: BusyWindow | None = None  # the driver's last busy average (utilisation window)
    busy: BusyIntegral = field(default_factory=BusyIntegral)  # over its answered (billed) time
    disks: tuple[DiskRow, ...] = ()
    root_problems: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    truncated: bool = False
    loading: bool = False  # some run's history is still arriving, a capped read at a time
    hidden: tuple[str, ...] = ()  # what the search saw but could not look into, and why
    python: str | None = None
    refresh_seconds: float | None = None
    guard: GuardView | None = None  # the on-box watchdog's state, when one was installed
    guard_sig: str | None = None    # the signature of that state (the probe's cursor)
    # Stopped or destroyed on purpose (tui.model.rest): its silence is expected. Set only
    # while it does not answer; an answer clears it.
    rest: Rest | None = None

    def run(self, path: str) -> RunState | None:
        for run in self.runs:
            if run.path == path:
                return run
        return None

    def data_age(self, now: float) -> float | None:
        """Seconds since the last good answer, on the panel's clock."""
        return None if self.last_ok_at is None else max(0.0, now - self.last_ok_at)

    def counts(self) -> dict[Health, int]:
        counts = {h: 0 for h in Health}
        for run in self.runs:
            counts[run.health] += 1
        return counts


MAX_TIME = 1e11  # epoch seconds past the year 5000: not a clock


_KINDS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    and finite(v) is not None,
    "time": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    and finite(v) is not None and 0 <= v < MAX_TIME,
    "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, Mapping),
}


class _Shape:
    """Checks one field of an answer after another; the first that is off is the box's
    BadAnswer, named by where it sits (`runs[3].metrics.off`)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def bad(self, key: str, what: str) -> BadAnswer:
        return BadAnswer(f"malformed probe answer: {self.where}{key} {what}")

    def opt(self, obj: Mapping[str, Any], key: str, kind: str) -> None:
        if key not in obj:
            return
        value = obj[key]
        ok = _KINDS[kind](value)  # only the asked kind is checked (every field, every run)
        if not ok and not (value is None and kind in ("number", "time")):
            words = {"str": "text", "bool": "true or false",
                     "count": "a whole number from 0 to 2**64-1", "number": "a finite number",
                     "time": "a time in range",
                     "strs": "a list of texts", "list": "a list", "object": "an object"}
            raise self.bad(key, f"is not {words[kind]} (got {type(value).__name__})")


def check_increment(shape: _Shape, inc: object) -> None:
    if not isinstance(inc, Mapping):
        raise shape.bad("", "is not an object")
    for key in ("off", "size", "skipped"):
        shape.opt(inc, key, "count")
    for key in ("id", "head", "text", "error"):
        shape.opt(inc, key, "str")
    for key in ("reset", "more"):
        shape.opt(inc, key, "bool")


def check_run(index: int, raw: object) -> None:
    """Every field of one run as the probe sends it: the right type, in range."""
    shape = _Shape(f"runs[{index}].")
    if not isinstance(raw, Mapping):
        raise shape.bad("", "is not an object")
    if not isinstance(raw.get("path"), str) or not raw["path"]:
        raise shape.bad("path", "is missing or not text")
    for key in ("name", "root", "s_sig", "status_error", "w_sig", "w_error", "h_sig"):
        shape.opt(raw, key, "str")
    for key in ("status_missing", "vanished", "pid_alive"):
        shape.opt(raw, key, "bool")
    shape.opt(raw, "errors", "strs")
    shape.opt(raw, "w_dirs", "strs")  # folders in weights/ (bounded where folded)
    shape.opt(raw, "w_more", "count")
    for key in ("metrics", "log"):
        if key in raw:
            check_increment(_Shape(f"runs[{index}].{key}."), raw[key])
    for key in ("weights", "hist"):
        if key not in raw:
            continue
        rows = raw[key]
        if not isinstance(rows, list):
            raise shape.bad(key, "is not a list")
        for n, row in enumerate(rows):
            ok = (isinstance(row, list) and len(row) in (3, 5) and isinstance(row[0], str)
                  and all(_KINDS["count"](v) for v in (row[1], *row[3:]))
                  and isinstance(row[2], int | float) and not isinstance(row[2], bool)
                  and finite(row[2]) is not None)
            if not ok:
                raise shape.bad(f"{key}[{n}]", "is not [name, size, mtime(, mtime_ns, inode)]")


def check_answer(answer: Mapping[str, Any]) -> None:
    """The whole answer's shape: a box that sends something else is probe_failed, with why,
    never a traceback in `status` or a dead watcher in the panel."""
    top = _Shape("")
    top.opt(answer, "time", "time")
    top.opt(answer, "boot", "time")
    top.opt(answer, "python", "str")
    top.opt(answer, "truncated", "bool")
    top.opt(answer, "gone", "strs")
    for key in ("roots", "disks", "hidden"):
        top.opt(answer, key, "list")
    for n, raw in enumerate(answer["runs"]):
        check_run(n, raw)
    for n, row in enumerate(answer.get("roots") or []):
        shape = _Shape(f"roots[{n}].")
        if not isinstance(row, Mapping):
            raise shape.bad("", "is not an object")
        for key in ("root", "path", "error"):
            shape.opt(row, key, "str")
        shape.opt(row, "warnings", "count")
    for n, row in enumerate(answer.get("disks") or []):
        shape = _Shape(f"disks[{n}].")
        if not isinstance(row, Mapping):
            raise shape.bad("", "is not an object")
        shape.opt(row, "root", "str")
        for key in ("total", "used", "free"):
            shape.opt(row, key, "count")
    for n, row in enumerate(answer.get("hidden") or []):
        shape = _Shape(f"hidden[{n}].")
        if not isinstance(row, Mapping) or not isinstance(row.get("path"), str):
            raise shape.bad("", "is not an object with a path")
        shape.opt(row, "why", "str")
    if "guard" in answer:
        shape = _Shape("guard.")
        guard = answer["guard"]
        if not isinstance(guard, Mapping):
            raise shape.bad("", "is not an object")
        shape.opt(guard, "at", "time")
        shape.opt(guard, "absent", "bool")
        for key in ("sig", "error"):
            shape.opt(guard, key, "str")
    if "gpus" in answer:
        shape = _Shape("gpus.")
        gpus = answer["gpus"]
        if not isinstance(gpus, Mapping):
            raise shape.bad("", "is not an object")
        shape.opt(gpus, "absent", "bool")
        shape.opt(gpus, "error", "str")
        shape.opt(gpus, "rows", "strs")
        shape.opt(gpus, "busy_src", "str")


def fold_answer(prev: BoxState, answer: Mapping[str, Any], now: float,
                refresh_seconds: float | None = None) -> BoxState:
    """The box after one good probe answer. Raises BadAnswer if it is not one."""
    if not isinstance(answer, Mapping):
        raise BadAnswer("probe answer is not a JSON object")
    if "fatal" in answer:
        raise BadAnswer(f"probe crashed on the box: {clean(str(answer['fatal']))}")
    if answer.get("v") != PROBE_VERSION:
        raise BadAnswer(f"probe answer has version {brief(answer.get('v'))}, "
                        f"expected {PROBE_VERSION}")
    box_time = finite(answer.get("time"))
    if box_time is None or not isinstance(answer.get("runs"), list):
        raise BadAnswer("probe answer lacks the box clock or the run list")
    try:
        check_answer(answer)
        return _fold(prev, answer, box_time, now, refresh_seconds)
    except BadAnswer:
        raise
    except Exception as exc:
        # The shape check and the bounded readers should have caught it; if not, it is
        # still this box's bad answer, with words, never a traceback that ends `status`,
        # `watch` or the panel for every box. The words are the box's: cleaned and short.
        words = clean(str(exc))
        words = words if len(words) <= 200 else words[:197] + "..."
        raise BadAnswer(f"malformed probe answer ({type(exc).__name__}: {words})") from None


def _fold(prev: BoxState, answer: Mapping[str, Any], box_time: float, now: float,
          refresh_seconds: float | None) -> BoxState:
    notices: list[str] = []
    by_path = {run.path: run for run in prev.runs}
    runs: dict[str, RunState] = {}
    for raw in answer["runs"]:
        path = raw["path"]
        runs[path] = fold_run(by_path.get(path), raw, box_time)
    for path in answer.get("gone") or []:
        if path in by_path:
            notices.append(f"run {by_path[path].name!r} is gone from the box")

    gpus, gpu_note = prev.gpus, prev.gpu_note
    raw_gpus = answer.get("gpus")
    if isinstance(raw_gpus, Mapping):
        if raw_gpus.get("absent"):
            gpus, gpu_note = (), "no nvidia-smi on this box"
        elif raw_gpus.get("error"):
            gpus, gpu_note = (), clean(str(raw_gpus["error"]))
        else:
            gpus, gpu_note = parse_gpu_rows([str(r) for r in raw_gpus.get("rows") or []])
    gpu_busy, busy = None, prev.busy
    if isinstance(raw_gpus, Mapping):
        gpu_busy, busy_note = parse_busy(raw_gpus.get("busy"), now)
        gpu_note = gpu_note or busy_note
    if gpu_busy is not None:
        busy = busy.add(gpu_busy)
        for path, run in runs.items():  # a run's share: the box's GPUs while it progressed
            if run.health is Health.RUNNING:
                runs[path] = replace(run, busy=run.busy.add(gpu_busy))

    disks: list[DiskRow] = []
    filesystems: set[object] = set()
    for d in answer.get("disks") or []:
        if d.get("fs") in filesystems:
            continue  # two roots on one filesystem: its use is shown once
        filesystems.add(d.get("fs"))
        disks.append(DiskRow(clean(str(d.get("root"))), size(d.get("total")) or 0,
                             size(d.get("used")) or 0, size(d.get("free")) or 0,
                             _label(d.get("mount")), _label(d.get("device")),
                             _label(d.get("fstype"))))
    root_problems = []
    for r in answer.get("roots") or []:
        if r.get("error"):
            root_problems.append(clean(f"runs root {r.get('root')}: {r['error']}"))
        elif r.get("warnings"):
            root_problems.append(clean(f"runs root {r.get('root')}: {r['warnings']} folder(s) "
                                       "below it could not be read"))
    hidden = tuple(clean(f"{h['path']}: {h.get('why') or 'not searched'}")
                   for h in answer.get("hidden") or [])
    guard, guard_sig = prev.guard, prev.guard_sig
    if "guard" in answer:
        guard, _ = fold_guard_part(prev.guard, answer["guard"])
        guard_sig = None if answer["guard"].get("absent") else \
            answer["guard"].get("sig", guard_sig)
    elif guard is not None:
        guard, guard_sig = None, None  # no state file and none was held: no watchdog

    return replace(
        prev,
        connection=Connection.OK, error=None, box_time=box_time, last_ok_at=now,
        failed_since=None, failures=0, retry_at=None,
        runs=tuple(sorted(runs.values(), key=lambda r: r.name)),
        gpus=gpus, gpu_note=gpu_note, gpu_busy=gpu_busy, busy=busy, disks=tuple(disks),
        root_problems=tuple(root_problems),
        notices=tuple(notices), truncated=bool(answer.get("truncated")), hidden=hidden,
        loading=needs_more(answer),
        python=clean(str(answer.get("python"))) if answer.get("python") else prev.python,
        refresh_seconds=refresh_seconds if refresh_seconds is not None else prev.refresh_seconds,
        guard=guard, guard_sig=guard_sig,
    )


def came_back(before: BoxState | None, after: BoxState) -> bool:
    """The box answers again after it did not (started again, by the panel or anyone):
    a change of its power state, after which what its line said of earlier actions
    ("✔ stop done 15:44") is history (the journal keeps it), not news."""
    return before is not None and after.connection is Connection.OK \
        and before.connection not in (Connection.OK, Connection.CONNECTING)


def fold_failure(prev: BoxState, connection: Connection, error: str, now: float,
                 retry_at: float | None = None) -> BoxState:
    """The box after a refresh that did not get an answer: only the connection changes."""
    return replace(
        prev, connection=connection, error=clean_block(error), failures=prev.failures + 1,
        failed_since=prev.failed_since if prev.failed_since is not None else now,
        retry_at=retry_at)


def probe_request(state: BoxState, roots: tuple[str, ...], *, log_cap: int = 16384,
                  metrics_cap: int = 1 << 20, max_runs: int = 1000,
                  gpu_timeout: float = 10.0, metrics_budget: int | None = None
                  ) -> dict[str, Any]:
    """The request for the next refresh: what the client already holds of each run.

    `metrics_budget`: the metrics history bytes the whole answer may carry (the
    probe's own default when None); 0 asks for every run's state and no history."""
    request = {
        "roots": list(roots),
        "runs": {run.path: run.cursor.to_request() for run in state.runs},
        "log_cap": log_cap,
        "metrics_cap": metrics_cap,
        "max_runs": max_runs,
        "gpu": True,
        "gpu_timeout": gpu_timeout,
    }
    if metrics_budget is not None:
        request["metrics_budget"] = metrics_budget
    if state.guard_sig is not None:
        request["guard_sig"] = state.guard_sig
    return request


def needs_more(answer: Mapping[str, Any]) -> bool:
    """True while some run still has metrics history beyond the probe's per-read cap."""
    return any(
        isinstance(r, Mapping) and isinstance(r.get("metrics"), Mapping)
        and r["metrics"].get("more")
        for r in answer.get("runs") or [])


__all__ = [
    "BadAnswer", "BoxState", "Connection", "Cursor", "DiskRow", "GpuRow",
    "fold_answer", "fold_failure", "needs_more", "parse_gpu_rows", "probe_request",
]
