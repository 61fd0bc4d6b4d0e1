"""Run one on-box program over a box's kept-open session and collect its framed answers.

`check`, `doctor` and `fetch` send a program on stdin to an interpreter on the
box and read back frames (tui/remote/framing.py): a JSON object each, noise
around them ignored, every frame and the noise bounded. What comes back keeps
apart the endings a caller must not confuse: it never started, it finished,
it died (exit status or signal) or the deadline passed; and the last stage the
program announced, so a crash or a hang is named by where it happened.

This is the one place that opens the channel, so a public BoxSession call for
on-box programs replaces one line here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncssh

from tui.remote.framing import FrameError, FrameReader
from tui.remote.session import BoxError, BoxSession

STDERR_KEEP = 4096
READ_CHUNK = 1 << 16


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


def _text_tail(data: bytes, limit: int = 300) -> str:
    words = " ".join(data.decode("utf-8", "replace").split())
    return words if len(words) <= limit else "..." + words[-(limit - 3):]


async def _connection(session: BoxSession) -> asyncssh.SSHClientConnection:
    return await session.connection()


async def run_onbox(session: BoxSession, command: str, payload: bytes, nonce: str, *,
                    deadline: float, max_frame: int = 16 << 20, max_noise: int = 1 << 20,
                    on_frame: Callable[[dict[str, Any]], None] | None = None) -> ProgramRun:
    """Run `command` on the box with `payload` on its stdin; never raises for the box's trouble.

    `deadline` bounds the whole run (seconds). Frames that are not JSON objects
    are dropped; a frame over `max_frame` or a flood of noise ends the run as
    "bad_answer" (the box is not believed further).
    """
    try:
        conn = await _connection(session)
    except BoxError as exc:
        return ProgramRun("not_started", reason=exc.message)
    try:
        proc = await conn.create_process(command, encoding=None)
    except asyncssh.ChannelOpenError as exc:
        return ProgramRun("not_started", reason=f"the box refused a session: {exc.reason}")
    except (asyncssh.Error, OSError) as exc:
        return ProgramRun("not_started", reason=f"the connection was lost ({exc})")
    run = ProgramRun("exited")
    reader = FrameReader(nonce, max_frame=max_frame, max_noise=max_noise)
    stage_at = time.monotonic()
    err = bytearray()

    async def drain_stderr() -> None:
        while chunk := await proc.stderr.read(READ_CHUNK):
            err.extend(chunk)
            del err[:-STDERR_KEEP]

    async def read_frames() -> None:
        nonlocal stage_at
        while chunk := await proc.stdout.read(READ_CHUNK):
            for raw in reader.feed(chunk):
                try:
                    frame = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(frame, dict):
                    continue
                if isinstance(frame.get("stage"), str):
                    run.stage, stage_at = frame["stage"][:200], time.monotonic()
                if frame.get("done") is True:
                    run.ended = "finished"
                run.frames.append(frame)
                if on_frame is not None:
                    on_frame(frame)

    stderr_task = asyncio.ensure_future(drain_stderr())
    try:
        proc.stdin.write(payload)
        proc.stdin.write_eof()
        async with asyncio.timeout(deadline):
            await read_frames()
            await proc.wait()
            await stderr_task
    except TimeoutError:
        run.ended = "timeout"
        run.reason = f"it did not finish within {deadline:g} s"
    except FrameError as exc:
        run.ended = "bad_answer"
        run.reason = f"its answer cannot be read: {exc}"
    except (asyncssh.Error, OSError) as exc:
        run.ended = "lost"
        run.reason = f"the SSH connection was lost while it ran ({exc or type(exc).__name__})"
    finally:
        proc.close()
        if not stderr_task.done():
            stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncssh.Error, OSError):
                await stderr_task
    run.stage_seconds = time.monotonic() - stage_at if run.stage else None
    run.stderr_tail = _text_tail(bytes(err))
    run.exit_status = proc.exit_status
    if proc.exit_signal:
        run.signal = str(proc.exit_signal[0])
    if run.ended == "exited":
        if run.signal:  # asyncssh then reports an exit status of -1
            run.ended = "signal"
            run.exit_status = None
        elif proc.exit_status is None:
            run.ended = "lost"
            run.reason = "the session ended without an exit status (connection lost?)"
    return run


def interpreter_missing(run: ProgramRun) -> bool:
    """The shell could not find the interpreter (exit 127, `not found`)."""
    tail = run.stderr_tail.lower()
    return not run.frames and (run.exit_status == 127 or (
        run.exit_status not in (None, 0) and ("not found" in tail or "no such file" in tail)))


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
