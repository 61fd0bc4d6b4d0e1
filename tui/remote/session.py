"""One SSH session per box: open the hop chain once, reuse it, probe and run programs over it.

Every failure becomes a BoxError carrying one of the Connection states and
words a person can act on, naming the hop that failed. Every step has the
box's timeout, so a hung box costs its own pane a timeout and nothing else.
Every answer from the box is a frame (tui.remote.framing) with a fresh
nonce, bounded in size before and after decompression: banners and chatter
around it are ignored, a flood or a zlib bomb costs that box a
`probe_failed`, never the panel's memory.

Public API of BoxSession (the panel, the CLI, actions and preflight use it):

- `await connection()`: the box's own asyncssh connection, logged in first
  if needed (BoxError if it cannot be).
- `await run_probe(request)`: one refresh; the probe's answer as a dict. A
  long-lived probe is kept per connection (`python3 -c` reading request
  lines, see tui.onbox.probe.serve): the probe keeps the request it was
  last sent, so an idle refresh sends a nonce and little else. It is started
  again when it dies, dropped when a request times out or its answer is
  lost, and replaced by a one-shot `python3 -` per refresh where the box
  cannot keep it. Both ways send the probe the same request and get the
  same answer.
- `await run_program(source, stdin, ...)`: run any on-box program (stdlib
  Python 3.6+) once through `python3 -` and get its framed answer(s). The
  program runs as `__main__` with a global `NONCE` (str) and `sys.stdin`
  reading `stdin`; it answers by writing frames to stdout:
  `sys.stdout.buffer.write(b"\\n--gpurent-" + NONCE.encode() + b" " +
  str(len(payload)).encode() + b"\\n" + payload)` (then flush). Anything
  else it or the box's shell prints is ignored. Returns a ProgramResult
  (the frames, exit status, signal, stderr tail); raises BoxError when the
  program could not run (timeout, lost connection, no python3, a PTY-only
  endpoint) or wrote no frame, or a frame over `max_frame`.
- `await close()`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncssh

from tui.model.box import Connection
from tui.model.config import BoxConfig, FleetConfig
from tui.onbox.probe import adopt
from tui.remote.channel import PTY_ONLY_FIX, Ending, OnboxProcess, no_answer
from tui.remote.errors import BoxError, describe_os_error
from tui.remote.framing import FrameError, inflate, new_nonce
from tui.remote.hops import HopClient, JumpPool, close_quietly, jump_pool, open_hop
from tui.remote.hostkeys import HostKeyStore
from tui.remote.programs import (
    ONE_SHOT_COMMAND,
    SERVE_COMMAND,
    one_shot_payload,
    program_source,
    serve_loader,
)
from tui.remote.route import RouteError, resolve_route, ssh_destination

__all__ = ["BoxError", "BoxSession", "ProgramResult", "describe_os_error"]

PROBE_COMMAND = ONE_SHOT_COMMAND
# One probe answer. The probe bounds what it sends (metrics history 2 MiB and log tails
# 1 MiB per answer, at most 1000 runs), so a legitimate answer stays under ~8 MiB even at
# a first look at a box of 1000 runs: 16 MiB is twice that. Past it, or past MAX_ITEMS
# JSON values to build (each costs ~70 bytes of Python objects: 16 MiB of `{},` would
# be ~400 MiB and seconds of a frozen event loop), the box reads probe_failed.
MAX_ANSWER_FRAME = 16 << 20  # compressed bytes of one probe answer
MAX_ANSWER = 16 << 20        # the same answer decompressed
MAX_ITEMS = 1 << 20          # objects, arrays and comma-separated values in one answer
MAX_PROGRAM_FRAME = 1 << 20
KEPT_FRAMES = 64        # a streaming program's frames kept for its result: the last ones,
KEPT_BYTES = 32 << 20   # within this many bytes (every frame is seen through on_frame)
_ONE_SHOT_ENTRY = "\nsys.exit(main(sys.stdin.read(), NONCE))\n"
_SERVE_ENTRY = "\nsys.exit(serve())\n"
_MISSING = object()


@functools.cache
def _probe_program(entry: str) -> str:
    return program_source("probe") + entry


def probe_payload(request: dict[str, Any], nonce: str) -> bytes:
    """What `python3 -` reads for a one-shot probe (the request rides in stdin, never
    in argv or on the remote command line)."""
    return one_shot_payload(_probe_program(_ONE_SHOT_ENTRY), nonce,
                            json.dumps(request, separators=(",", ":")).encode())


def kept_probe_loader() -> bytes:
    """The first stdin line of a kept probe (`programs.SERVE_COMMAND`); request lines
    follow it (benchmarks start one by hand to measure it)."""
    return serve_loader(_probe_program(_SERVE_ENTRY))


def decode_answer(payload: bytes, limit: int = MAX_ANSWER) -> dict[str, Any]:
    """A frame's payload (zlib JSON) as a dict; FrameError or ValueError if it is not one."""
    data = inflate(payload, limit)
    # Counted before anything is built (a C-speed scan; commas and brackets inside
    # strings count too, which only errs on the side of refusing).
    items = data.count(b"{") + data.count(b"[") + data.count(b",")
    if items > MAX_ITEMS:
        raise FrameError(f"the answer holds over {MAX_ITEMS} JSON values ({items} "
                         "separators and brackets), over the cap")
    try:
        answer = json.loads(data)
    except RecursionError:  # the probe refuses deep documents; an older probe might not
        raise ValueError("answer is nested too deeply to read") from None
    if not isinstance(answer, dict):
        raise ValueError("answer is not a JSON object")
    return answer


def request_delta(held: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """What a kept probe that holds `held` must be told to hold `request` (see
    tui.onbox.probe.apply_delta): changed settings, the changed fields of each run's
    cursor (null: the field is gone), runs gone. Nothing at all when nothing changed:
    the idle refresh."""
    delta: dict[str, Any] = {}
    changed = {k: v for k, v in request.items()
               if k != "runs" and held.get(k, _MISSING) != v}
    unset = [k for k in held if k != "runs" and k not in request]
    runs, held_runs = request.get("runs") or {}, held.get("runs") or {}
    cursors: dict[str, Any] = {}
    for path, cursor in runs.items():
        old = held_runs.get(path)
        if old is None:
            cursors[path] = cursor
        elif old != cursor:
            patch = {k: v for k, v in cursor.items() if old.get(k, _MISSING) != v}
            patch.update({k: None for k in old if k not in cursor})
            cursors[path] = patch
    drop = [p for p in held_runs if p not in runs]
    for key, value in (("set", changed), ("unset", unset), ("runs", cursors), ("drop", drop)):
        if value:
            delta[key] = value
    return delta


@dataclass(frozen=True)
class ProgramResult:
    """What an on-box program answered: its frames in order, and how it ended."""

    frames: list[bytes]
    exit_status: int | None
    exit_signal: str | None
    stderr: str


class _CannotKeep(Exception):
    """A fresh long-lived probe ended without answering: this box runs one-shot."""


class BoxSession:
    """The kept-open connection to one box (through its jump hosts, if any)."""

    keep_probe = True  # a session may be told to probe one-shot (benchmarks compare both)
    max_answer_frame = MAX_ANSWER_FRAME
    max_answer = MAX_ANSWER

    def __init__(self, box: BoxConfig, fleet: FleetConfig, store: HostKeyStore) -> None:
        self.box = box
        self.timeout = fleet.timeout_for(box)
        self.store = store
        self._fleet = fleet
        self._conns: list[asyncssh.SSHClientConnection] = []  # jump hosts first, the box last
        self._client: HopClient | None = None
        self._leases: list[object] = []
        self._pool: JumpPool | None = None
        self._lock = asyncio.Lock()
        self._probe_lock = asyncio.Lock()
        self._probe: OnboxProcess | None = None
        self._probe_held: dict[str, Any] = {}
        self._serve_refused = False
        self.bytes_out = 0
        self.bytes_in = 0
        self.last_bytes_out = 0
        self.last_bytes_in = 0
        self.connects = 0
        self.refused = 0  # handshakes a server dropped before its banner, tried again
        self.probe_starts = 0  # long-lived probes started

    @property
    def connected(self) -> bool:
        return bool(self._conns) and self._client is not None and not self._client.lost \
            and not self._conns[-1].is_closed()

    @property
    def probe_mode(self) -> str:
        """How this connection probes: "kept" (one long-lived probe) or "one-shot"."""
        return "kept" if self.keep_probe and not self._serve_refused else "one-shot"

    async def close(self) -> None:
        """Close the box's own connection and let go of the shared jump hosts."""
        self._drop_probe()
        conns, self._conns, self._client = self._conns, [], None
        leases, self._leases = self._leases, []
        if conns:
            await close_quietly(conns[-1])
        if self._pool is not None:
            for key in reversed(leases):
                closed = self._pool.release(key)
                if closed is not None:
                    await close_quietly(closed)

    async def connect(self) -> None:
        """Open every hop in turn (jump hosts shared, the box its own); on failure, let go
        of what was taken."""
        try:
            hops = resolve_route(self.box, self._fleet)
        except RouteError as exc:
            raise BoxError(Connection.UNREACHABLE, f"box {self.box.name}: {exc}") from None
        await self.close()
        pool = self._pool = jump_pool()
        conns: list[asyncssh.SSHClientConnection] = []
        leases: list[object] = []
        try:
            for index, hop in enumerate(hops[:-1]):
                key = (self.store.policy, tuple(hops[:index + 1]))
                opener = functools.partial(
                    open_hop, hop, conns[-1] if conns else None, store=self.store,
                    timeout=self.timeout, who=f"jump host {hop.label}",
                    via=ssh_destination(hops[:index]) if index else None,
                    route=hops[:index + 1], limits=self._fleet.connect,
                    on_refused=self._refused)
                conns.append(await pool.acquire(key, opener))
                leases.append(key)
            conn, client = await open_hop(
                hops[-1], conns[-1] if conns else None, store=self.store, timeout=self.timeout,
                who=f"box {self.box.name}",
                via=ssh_destination(hops[:-1]) if len(hops) > 1 else None,
                route=hops, limits=self._fleet.connect, on_refused=self._refused)
        except BaseException:
            for lease in leases:
                pool.release(lease)
            raise
        self._conns, self._client, self._leases = [*conns, conn], client, leases
        self._serve_refused = False
        self.connects += 1

    def _refused(self) -> None:
        self.refused += 1

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The box's own connection (the last hop), opened first if needed; BoxError if not."""
        async with self._lock:
            if not self.connected:
                await self.connect()
            return self._conns[-1]

    # --- the probe ------------------------------------------------------------------

    async def run_probe(self, request: dict[str, Any]) -> dict[str, Any]:
        """One refresh: (re)connect if needed, ask the probe, decode its answer."""
        async with self._probe_lock:
            conn = await self.connection()
            sent = received = 0
            kept = False
            try:
                async with asyncio.timeout(self.timeout):
                    if self.probe_mode == "kept":
                        try:
                            payload, sent, received = await self._ask_kept(conn, request)
                            kept = True
                        except _CannotKeep:
                            self._serve_refused = True
                            payload, sent, received = await self._ask_once(conn, request)
                    else:
                        payload, sent, received = await self._ask_once(conn, request)
            except TimeoutError:
                await self.close()
                raise BoxError(Connection.TIMEOUT,
                               f"box {self.box.name}: probe did not answer within "
                               f"{self.timeout:g} s") from None
            except BoxError as exc:
                if exc.connection in (Connection.UNREACHABLE, Connection.TIMEOUT):
                    await self.close()
                raise
            finally:
                self.last_bytes_out, self.last_bytes_in = sent, received
                self.bytes_out += sent
                self.bytes_in += received
            try:
                answer = decode_answer(payload, self.max_answer)
                if kept:
                    adopt(self._probe_held, answer)  # what the kept probe now holds
            except (FrameError, ValueError) as exc:
                self._drop_probe()  # what it holds is not known any more
                raise BoxError(Connection.PROBE_FAILED,
                               f"box {self.box.name}: the probe's answer cannot be used: "
                               f"{exc}") from None
            return answer

    def _drop_probe(self) -> None:
        if self._probe is not None:
            self._probe.close()
        self._probe, self._probe_held = None, {}

    def _lost(self) -> bool:
        return self._client is None or self._client.lost

    async def _ask_kept(self, conn: asyncssh.SSHClientConnection, request: dict[str, Any]
                        ) -> tuple[bytes, int, int]:
        """Ask the kept probe (starting one if there is none or it died)."""
        request = json.loads(json.dumps(request))  # what the probe will hold, exactly
        sent = received = 0
        restarted = False
        while True:
            proc = self._probe
            if proc is None or not proc.alive:
                self._drop_probe()
                try:
                    proc = await OnboxProcess.start(conn, SERVE_COMMAND)
                except asyncssh.ChannelOpenError:
                    raise _CannotKeep from None
                except (asyncssh.Error, OSError) as exc:
                    raise self._lost_error(exc) from None
                self.probe_starts += 1
                self._probe = proc
            nonce = new_nonce()
            line = json.dumps({"nonce": nonce, **request_delta(self._probe_held, request)},
                              separators=(",", ":")).encode() + b"\n"
            got_before = proc.stdout_bytes + proc.stderr_bytes
            try:
                if proc.bytes_out == 0:
                    proc.send(kept_probe_loader())
                    sent += proc.bytes_out
                proc.send(line)
                sent += len(line)
                self._probe_held = request  # it applies the line, answers, then adopts
                payload = await proc.next_frame(nonce, max_frame=self.max_answer_frame)
            except FrameError as exc:
                self._drop_probe()
                raise BoxError(Connection.PROBE_FAILED,
                               f"box {self.box.name}: the probe's answer cannot be used: "
                               f"{exc}") from None
            except (asyncssh.Error, OSError):
                payload = None
            except BaseException:
                self._drop_probe()  # a timeout: its answer, if any, is not for the next one
                raise
            received += proc.stdout_bytes + proc.stderr_bytes - got_before
            if payload is not None:
                return payload, sent, received
            ending = await proc.ending(conn, self._lost())
            answered = proc.frames > 0
            self._drop_probe()
            if ending.connection_lost:
                raise no_answer(self.box.name, "probe", ending)
            if answered and not restarted:
                restarted = True  # it worked and died: start it again, once
                continue
            raise _CannotKeep

    async def _ask_once(self, conn: asyncssh.SSHClientConnection, request: dict[str, Any]
                        ) -> tuple[bytes, int, int]:
        nonce = new_nonce()
        frames, _, proc = await self._run_once(
            conn, probe_payload(request, nonce), nonce, max_frame=self.max_answer_frame,
            max_frames=1, what="probe", wait_ending=False)
        return frames[0], proc.bytes_out, proc.stdout_bytes + proc.stderr_bytes

    def _lost_error(self, exc: BaseException) -> BoxError:
        return BoxError(Connection.UNREACHABLE,
                        f"box {self.box.name}: connection lost during the probe "
                        f"({exc or type(exc).__name__})")

    # --- any program ------------------------------------------------------------------

    async def _run_once(self, conn: asyncssh.SSHClientConnection, payload: bytes, nonce: str,
                        *, max_frame: int, max_frames: int | None, what: str,
                        wait_ending: bool, on_frame: Callable[[bytes], None] | None = None,
                        command: str = ONE_SHOT_COMMAND,
                        ) -> tuple[list[bytes], Ending | None, OnboxProcess]:
        """Start `command` (`python3 -`) with `payload`, read its frames; BoxError if none."""
        try:
            proc = await OnboxProcess.start(conn, command)
        except asyncssh.ChannelOpenError as exc:
            if exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED:  # the exec request refused
                raise BoxError(Connection.PTY_ONLY,
                               f"box {self.box.name}: the SSH server refused to run a command "
                               f"({exc.reason}): {PTY_ONLY_FIX}") from None
            raise BoxError(Connection.PROBE_FAILED,
                           f"box {self.box.name}: the box refused a session: {exc.reason}") \
                from None
        except (asyncssh.Error, OSError) as exc:
            raise BoxError(Connection.UNREACHABLE,
                           f"box {self.box.name}: connection lost during the {what} "
                           f"({exc or type(exc).__name__})") from None
        frames: collections.deque[bytes] = collections.deque()
        kept = seen = 0
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.send(payload, eof=True)
            while max_frames is None or seen < max_frames:
                try:
                    got = await proc.next_frame(nonce, max_frame=max_frame)
                except FrameError as exc:
                    raise BoxError(Connection.PROBE_FAILED,
                                   f"box {self.box.name}: the {what}'s answer cannot be used: "
                                   f"{exc}") from None
                except (asyncssh.Error, OSError):
                    got = None
                if got is None:
                    break
                seen += 1
                frames.append(got)
                kept += len(got)
                # A program that streams (max_frames=None) shows its frames through
                # on_frame as they come; only the last few are kept for the result.
                while len(frames) > KEPT_FRAMES or (kept > KEPT_BYTES and len(frames) > 1):
                    kept -= len(frames.popleft())
                if on_frame is not None:
                    on_frame(got)
            ending = None
            if not seen or wait_ending:
                ending = await proc.ending(conn, self._lost())
            if not seen:
                assert ending is not None
                raise no_answer(self.box.name, what, ending, "it wrote no answer")
            return list(frames), ending, proc
        finally:
            proc.close()

    async def run_program(self, source: str, stdin: bytes = b"", *,
                          timeout: float | None = None, max_frames: int | None = 1,
                          max_frame: int = MAX_PROGRAM_FRAME,
                          on_frame: Callable[[bytes], None] | None = None,
                          what: str = "program",
                          command: str = ONE_SHOT_COMMAND) -> ProgramResult:
        """Run an on-box program once and return its framed answer(s); see the module
        docstring for the program's side. `max_frames=None` reads frames until the
        program ends, and the result keeps only the last KEPT_FRAMES (within
        KEPT_BYTES); `on_frame` sees each as it arrives (progress); `command` is the
        remote command of a Python that reads its program from stdin (another
        interpreter than `python3 -`, already shell-quoted)."""
        conn = await self.connection()
        nonce = new_nonce()
        limit = timeout if timeout is not None else self.timeout
        try:
            async with asyncio.timeout(limit):
                frames, ending, _ = await self._run_once(
                    conn, one_shot_payload(source, nonce, stdin), nonce, max_frame=max_frame,
                    max_frames=max_frames, what=what, wait_ending=True, on_frame=on_frame,
                    command=command)
        except TimeoutError:
            raise BoxError(Connection.TIMEOUT,
                           f"box {self.box.name}: the {what} did not finish within "
                           f"{limit:g} s") from None
        assert ending is not None
        return ProgramResult(frames, ending.exit_status, ending.exit_signal, ending.stderr)
