"""Run one on-box program over a box's kept-open session and collect its framed answers.

`check`, `doctor` and `fetch` send a program on stdin to an interpreter on the
box and read back frames (tui/remote/framing.py): a JSON object each, noise
around them ignored, every frame and the noise bounded. What comes back keeps
apart the endings a caller must not confuse: it never started, it finished,
it died (exit status or signal) or the deadline passed; and the last stage the
program announced, so a crash or a hang is named by where it happened.

The channel itself is BoxSession.run_program's (framing, caps, endings); this
module adds what the preflight programs say about themselves: the stage they
were in, their JSON frames, and whether they said they were done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tui.model.box import Connection
from tui.remote.session import BoxError, BoxSession, ProgramResult

KEPT_FRAMES = 64        # frames of distinct kinds kept after they were seen
KEPT_BYTES = 32 << 20   # and their bytes: a box that streams cannot grow the client with it


def _kind(frame: dict[str, Any]) -> Hashable:
    """What a frame is an instance of: a part by its name, anything else by its keys. A
    later frame of a kind replaces the earlier one (progress, stages, beats)."""
    part = frame.get("part")
    if isinstance(part, str):
        return ("part", part)
    return frozenset(frame)


class KeptFrames:
    """The frames a program sent, bounded: the latest of each kind, at most `count` kinds
    and `size` bytes (the oldest kinds go first). Each frame was seen by the caller as it
    came; what is kept is only what is judged once the program ends."""

    def __init__(self, count: int = KEPT_FRAMES, size: int = KEPT_BYTES) -> None:
        self.count = count
        self.size = size
        self.bytes = 0
        self.seen = 0  # every frame added, kept or not
        self._kept: OrderedDict[Hashable, tuple[dict[str, Any], int]] = OrderedDict()

    def add(self, frame: dict[str, Any], size: int) -> None:
        key = _kind(frame)
        old = self._kept.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._kept[key] = (frame, size)
        self.bytes += size
        self.seen += 1
        while len(self._kept) > self.count or (self.bytes > self.size and len(self._kept) > 1):
            _, (_, dropped) = self._kept.popitem(last=False)
            self.bytes -= dropped

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (frame for frame, _ in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)


@dataclass
class ProgramRun:
    """How one on-box program ended and every frame it sent, in order."""

    ended: str  # "finished" (it said done), "exited" (no done), "signal", "timeout",
    #             "stalled", "lost", "not_started", "bad_answer"
    kept: KeptFrames = field(default_factory=KeptFrames)
    exit_status: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    reason: str = ""
    stage: str | None = None  # the last stage announced
    stage_seconds: float | None = None  # how long it had been in that stage at the end

    def parts(self) -> dict[str, Any]:
        """The `{"part": name, "data": ...}` frames, by name (a later one wins)."""
        found: dict[str, Any] = {}
        for frame in self.frames:
            if isinstance(frame.get("part"), str):
                found[frame["part"]] = frame.get("data")
        return found

    @property
    def frames(self) -> list[dict[str, Any]]:
        """The frames kept (the latest of each kind), oldest first."""
        return list(self.kept)

    @property
    def done(self) -> bool:
        return self.ended == "finished"


def _text_tail(text: str, limit: int = 300) -> str:
    words = " ".join(text.split())
    return words if len(words) <= limit else "..." + words[-(limit - 3):]


async def run_onbox(session: BoxSession, command: str, source: str, stdin: bytes, *,
                    deadline: float, what: str, max_frame: int = 16 << 20,
                    on_frame: Callable[[dict[str, Any]], None] | None = None,
                    stall_seconds: float | None = None) -> ProgramRun:
    """Run `source` on the box under `command` (an interpreter reading stdin) with `stdin`
    as its input; never raises for the box's trouble.

    `deadline` bounds the whole run (seconds); `stall_seconds`, when given, ends it
    sooner once that long has passed without a frame unlike the one before (a
    stuck download that repeats its progress moves nothing). Frames that are not
    JSON objects are dropped; a frame over `max_frame` or a flood of noise ends the
    run as "bad_answer" (the box is not believed further). Every frame goes to
    `on_frame` as it comes; only a bounded few are kept (KeptFrames).
    """
    run = ProgramRun("exited")
    stage_at = moved_at = time.monotonic()
    last = b""

    def seen(raw: bytes) -> None:
        nonlocal stage_at, moved_at, last
        if raw != last:
            moved_at, last = time.monotonic(), raw
        try:
            frame = json.loads(raw)
        except (ValueError, RecursionError):
            return
        if not isinstance(frame, dict):
            return
        if isinstance(frame.get("stage"), str):
            run.stage, stage_at = frame["stage"][:200], time.monotonic()
        if frame.get("done") is True:
            run.ended = "finished"
        run.kept.add(frame, len(raw))
        if on_frame is not None:
            on_frame(frame)

    task = asyncio.ensure_future(session.run_program(
        source, stdin, timeout=deadline, max_frames=None, max_frame=max_frame, on_frame=seen,
        what=what, command=command))
    try:
        result = await _unless_stalled(task, stall_seconds, lambda: moved_at)
    except _Stalled:
        run.ended = "stalled"
        run.reason = (f"made no progress for {stall_seconds:g} s (no new answer from the "
                      f"box, only silence or the same words again); it was stopped")
    except BoxError as exc:
        run.reason = exc.message
        if exc.connection is Connection.TIMEOUT:
            run.ended = "timeout"
        elif "answer cannot be used" in exc.message:
            run.ended = "bad_answer"
        elif not run.kept.seen and exc.connection in (Connection.PROBE_FAILED,
                                                      Connection.PTY_ONLY):
            run.ended = "not_started"
        else:
            run.ended = "lost"
    else:
        run.exit_status = result.exit_status
        run.signal = result.exit_signal
        run.stderr_tail = _text_tail(result.stderr)
        if run.ended != "finished" and run.signal:
            run.ended = "signal"
            run.exit_status = None
    run.stage_seconds = time.monotonic() - stage_at if run.stage else None
    return run


class _Stalled(Exception):
    """The program sent nothing new for the stall time."""


async def _unless_stalled(task: asyncio.Future[ProgramResult], stall: float | None,
                          moved_at: Callable[[], float]) -> ProgramResult:
    """The task's result, or _Stalled (the task cancelled: its channel is closed) once
    `stall` seconds pass after the last time `moved_at` moved."""
    try:
        while stall is not None:
            left = moved_at() + stall - time.monotonic()
            if left <= 0:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, BoxError):
                    await task
                raise _Stalled
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                break
        return await task
    finally:
        if not task.done():
            task.cancel()


def interpreter_missing(run: ProgramRun) -> bool:
    """The shell could not find the interpreter (exit 127, `not found`): nothing answered."""
    text = f"{run.reason} {run.stderr_tail}".lower()
    return not run.kept.seen and run.ended == "not_started" and (
        "not found" in text or "no such file" in text)


def describe_end(run: ProgramRun, what: str, deadline: float) -> str:
    """Why a program did not say it was done, in words, naming the stage it was in."""
    at = f" during {run.stage}" if run.stage else ""
    if run.stage_seconds is not None and run.ended == "timeout":
        at += f" ({run.stage_seconds:.0f} s in that step)"
    tail = f": {run.stderr_tail}" if run.stderr_tail else ""
    if run.ended == "timeout":
        return f"{what} did not finish within {deadline:g} s; it was{at or ' starting'}"
    if run.ended == "stalled":
        return f"{what} {run.reason}{at}"
    if run.ended == "signal" and run.signal == "ALRM":  # the program's own deadline
        return f"{what} did not finish within {deadline:g} s and stopped itself{at}"
    if run.ended == "signal":
        return f"{what} was killed by signal {run.signal}{at}{tail}"
    if run.ended in ("lost", "not_started", "bad_answer"):
        return f"{what}: {run.reason}{at}"
    fatal = next((f["fatal"] for f in run.frames if isinstance(f.get("fatal"), str)), None)
    if fatal:
        return f"{what} crashed{at}: {fatal[:400]}"
    return f"{what} exited {run.exit_status} without finishing{at}{tail}"
