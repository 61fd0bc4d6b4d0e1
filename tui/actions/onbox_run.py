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

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tui.model.box import Connection
from tui.remote.session import BoxError, BoxSession


@dataclass
class ProgramRun:
    """How one on-box program ended and every frame it sent, in order."""

    ended: str  # "finished" (it said done), "exited" (no done), "signal", "timeout",
    #             "lost", "not_started", "bad_answer"
    frames: list[dict[str, Any]] = field(default_factory=list)
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
    def done(self) -> bool:
        return self.ended == "finished"


def _text_tail(text: str, limit: int = 300) -> str:
    words = " ".join(text.split())
    return words if len(words) <= limit else "..." + words[-(limit - 3):]


async def run_onbox(session: BoxSession, command: str, source: str, stdin: bytes, *,
                    deadline: float, what: str, max_frame: int = 16 << 20,
                    on_frame: Callable[[dict[str, Any]], None] | None = None) -> ProgramRun:
    """Run `source` on the box under `command` (an interpreter reading stdin) with `stdin`
    as its input; never raises for the box's trouble.

    `deadline` bounds the whole run (seconds). Frames that are not JSON objects
    are dropped; a frame over `max_frame` or a flood of noise ends the run as
    "bad_answer" (the box is not believed further).
    """
    run = ProgramRun("exited")
    stage_at = time.monotonic()

    def seen(raw: bytes) -> None:
        nonlocal stage_at
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
        run.frames.append(frame)
        if on_frame is not None:
            on_frame(frame)

    try:
        result = await session.run_program(source, stdin, timeout=deadline, max_frames=None,
                                           max_frame=max_frame, on_frame=seen, what=what,
                                           command=command)
    except BoxError as exc:
        run.reason = exc.message
        if exc.connection is Connection.TIMEOUT:
            run.ended = "timeout"
        elif "answer cannot be used" in exc.message:
            run.ended = "bad_answer"
        elif not run.frames and exc.connection in (Connection.PROBE_FAILED, Connection.PTY_ONLY):
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


def interpreter_missing(run: ProgramRun) -> bool:
    """The shell could not find the interpreter (exit 127, `not found`): nothing answered."""
    text = f"{run.reason} {run.stderr_tail}".lower()
    return not run.frames and run.ended == "not_started" and (
        "not found" in text or "no such file" in text)


def describe_end(run: ProgramRun, what: str, deadline: float) -> str:
    """Why a program did not say it was done, in words, naming the stage it was in."""
    at = f" during {run.stage}" if run.stage else ""
    if run.stage_seconds is not None and run.ended == "timeout":
        at += f" ({run.stage_seconds:.0f} s in that step)"
    tail = f": {run.stderr_tail}" if run.stderr_tail else ""
    if run.ended == "timeout":
        return f"{what} did not finish within {deadline:g} s; it was{at or ' starting'}"
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
