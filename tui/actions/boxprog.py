"""Run one of our programs on a box (`python3 -`) and read its framed answer, bounded.

Everything the program says arrives in frames (tui/remote/framing.py) carrying a
nonce fresh for this run, so a login banner, motd or library chatter around
them is ignored; a frame's first byte says whether it holds a JSON event (`J`)
or a piece of a file (`D`). A box that floods stdout or stderr, or sends a
frame over the cap, is cut off with words, never buffered without end; one
that goes silent longer than the idle time is given up on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from typing import Any

import asyncssh

from tui.model.text import clean_block
from tui.remote.channel import PTY_ONLY_FIX, Ending, no_answer, pty_only
from tui.remote.framing import FrameError, FrameReader, new_nonce
from tui.remote.programs import program_source
from tui.store.secrets import scrub as redact_held

PUSH_COMMAND = "python3 -"
# Each read takes all the channel holds (twice its window): asyncssh opens the window
# again as soon as it hands a packet on, whatever it still buffers, so reads smaller
# than the window let a fast box grow that buffer without end (312 MB for a 300 MiB
# pull); a read of the whole window consumes what was let in before more is asked.
READ_BYTES = 1 << 22
MAX_FRAME = 8 << 20      # the largest event or data piece a push program sends (1 MiB + 1)
MAX_NOISE = 1 << 20      # bytes of banner or chatter tolerated around the frames
STDERR_KEEP = 4096       # the tail of stderr kept for an error message
STDOUT_KEEP = 2000       # the tail of stdout kept to recognise a PTY-only endpoint's complaint
# A heartbeat: alive, and (where the box's kernel says) how many bytes its program moved.
_BEAT = re.compile(rb'J\{"beat": ?[0-9]{1,12}(?:, ?"moved": ?([0-9]{1,19}))?\}')


class _Motion:
    """Whether a frame is progress: file bytes, a step done, or a heartbeat whose count of
    bytes moved went up. A bare heartbeat, or one that moved nothing, is not."""

    def __init__(self) -> None:
        self.moved = -1

    def saw(self, payload: bytes) -> bool:
        beat = _BEAT.fullmatch(payload)
        if beat is None:
            return True
        if beat.group(1) is None or int(beat.group(1)) <= self.moved:
            return False
        self.moved = int(beat.group(1))
        return True


class PushError(Exception):
    """A push step that failed, in words a person can act on (never holding a secret)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def scrub(text: str, secret: str | None) -> str:
    """The text redacted (the one redaction: `secret`, every secret in play, secret-named
    options, token shapes) and with no control sequence: box errors end up in messages."""
    return clean_block(redact_held(text, secret))


def box_payload(params: dict[str, Any]) -> bytes:
    """What `python3 -` reads: the on-box program, its parameters as a literal, the call."""
    literal = repr(json.dumps(params, separators=(",", ":")))
    return f"{program_source('push')}\nPARAMS = {literal}\nsys.exit(main(PARAMS))\n".encode()


async def _stderr_tail(stream: asyncssh.SSHReader[bytes], keep: list[bytes]) -> None:
    """Read stderr to its end, keeping only the last STDERR_KEEP bytes."""
    while data := await stream.read(READ_BYTES):
        keep[0] = (keep[0] + data)[-STDERR_KEEP:]


async def run_box_program(conn: asyncssh.SSHClientConnection, params: dict[str, Any], *,
                          box: str, idle_seconds: float, secret: str | None = None,
                          on_event: Callable[[dict[str, Any]], None] | None = None,
                          on_data: Callable[[bytes], None] | None = None,
                          deadline_seconds: float | None = None,
                          stall_seconds: float | None = None) -> dict[str, Any]:
    """Run the on-box push program and return its last word (`done` or `error`).

    Timed by silence: the program beats every few seconds, so a long hash or
    upload is fine and a hung box is caught after `idle_seconds`. Timed by
    progress: beats alone for `stall_seconds` (no file bytes, no step done) end
    it, so a box whose work hangs while its heartbeat goes on is let go. And
    bounded in all by `deadline_seconds` (a cap the caller sets), so a box that
    fakes progress forever cannot hold the push, and its box's action lock, forever.
    """
    loop = asyncio.get_running_loop()
    end = None if deadline_seconds is None else loop.time() + deadline_seconds
    moved_at = loop.time()
    motion = _Motion()

    def wait() -> float:
        left = [idle_seconds]
        if end is not None:
            left.append(end - loop.time())
        if stall_seconds is not None:
            left.append(moved_at + stall_seconds - loop.time())
        return max(0.0, min(left))

    nonce = new_nonce()
    params = {**params, "nonce": nonce}
    reader = FrameReader(nonce, max_frame=MAX_FRAME, max_noise=MAX_NOISE)
    try:
        proc = await conn.create_process(PUSH_COMMAND, encoding=None)
    except asyncssh.ChannelOpenError as exc:
        raise PushError(refused_session(box, exc)) from None
    except (asyncssh.Error, OSError) as exc:
        raise PushError(f"box {box}: connection lost ({scrub(str(exc), secret)})") from None
    out, out_bytes = b"", 0
    err = [b""]
    stderr_task = asyncio.ensure_future(_stderr_tail(proc.stderr, err))
    final: dict[str, Any] | None = None
    try:
        try:
            proc.stdin.write(box_payload(params))
            proc.stdin.write_eof()
        except BrokenPipeError:
            pass  # the session closed before its request went: how it ended says why, below
        while final is None and (data := await asyncio.wait_for(proc.stdout.read(READ_BYTES),
                                                                 wait())):
            out, out_bytes = (out + data)[-STDOUT_KEEP:], out_bytes + len(data)
            for payload in reader.feed(data):
                final = _take(payload, on_event, on_data) or final
                if motion.saw(payload):
                    moved_at = loop.time()
        if final is not None:
            proc.stdin.close()
        else:
            await asyncio.wait_for(proc.wait(), wait())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stderr_task, 2)
    except TimeoutError:
        if final is None and stall_seconds is not None \
                and loop.time() >= moved_at + stall_seconds - 0.01:
            raise PushError(f"box {box}: the push program made no progress for "
                            f"{stall_seconds:g} s (no file bytes and no step done: it only "
                            "said it was alive); it was stopped") from None
        if final is None and end is not None and loop.time() >= end - 0.01:
            raise PushError(f"box {box}: the push program ran past its limit of "
                            f"{deadline_seconds:g} s (it kept talking but never finished); "
                            "it was stopped") from None
        if final is None:
            raise PushError(f"box {box}: the push program went silent for {idle_seconds:g} s")\
                from None
    except FrameError as exc:
        raise PushError(f"box {box}: the push program's output cannot be read ({exc}); "
                        "nothing it said was used") from None
    except (asyncssh.Error, OSError) as exc:
        if final is None:
            raise PushError(f"box {box}: connection lost during the push "
                            f"({scrub(str(exc), secret)})") from None
    finally:
        proc.close()
        if not stderr_task.done():
            stderr_task.cancel()
    if final is not None:
        return final
    err_text = scrub(err[0].decode("utf-8", "replace").strip(), secret)
    if proc.exit_status == 127 or ("python3" in err_text and "not found" in err_text):
        raise PushError(f"box {box}: python3 not found on the box "
                        f"(install it, e.g. apt-get install python3-minimal)")
    signal = proc.exit_signal[0] if proc.exit_signal else None
    ending = Ending(proc.exit_status, signal, out_bytes, err_text, False,
                    out.decode("utf-8", "replace"))
    if not reader.in_frame and pty_only(ending):
        raise PushError(no_answer(box, "push program", ending).message)
    cut = " (the answer was cut short)" if reader.in_frame else ""
    raise PushError(f"box {box}: the push program exited {proc.exit_status} without an "
                    f"answer{cut}: {err_text[-300:] or 'no error output'}")


def refused_session(box: str, exc: asyncssh.ChannelOpenError) -> str:
    """Words for a session the box would not open: an exec request refused is a PTY-only
    endpoint (RunPod's basic proxy), and the words say how to reach the box instead."""
    if exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED:
        return f"box {box}: the SSH server refused to run a command ({exc.reason}): {PTY_ONLY_FIX}"
    return f"box {box}: the box refused a session: {exc.reason}"


def _take(payload: bytes, on_event: Callable[[dict[str, Any]], None] | None,
          on_data: Callable[[bytes], None] | None) -> dict[str, Any] | None:
    """One frame: a piece of a file goes to `on_data`, an event to `on_event`; the last
    word (done or error) is returned."""
    kind, body = payload[:1], payload[1:]
    if kind == b"D":
        if on_data is None:
            raise FrameError("file bytes where none were asked for")
        on_data(body)
        return None
    if kind != b"J":
        raise FrameError(f"a frame of unknown kind {kind!r}")
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        raise FrameError("an event that is not JSON") from None
    if not isinstance(event, dict):
        raise FrameError("an event that is not a JSON object")
    if "done" in event or "error" in event:
        return event
    if on_event is not None:
        on_event(event)
    return None
