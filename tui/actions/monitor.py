"""Look at a run through LibreYOLO's own web monitor, over the box's SSH path.

`libreyolo monitor RUN --no-browser` serves the run's files on 127.0.0.1 of
the box (port 8420, or the next free one). We reuse a monitor already
serving that run, or start one detached (tui/onbox/launch.py), then forward
a local port (the one asked for, else a free one: never the box's choice) to
it through the session the panel already holds: jump hosts included, since
the box's own connection is tunneled through them. Closing
stops the forward, and the monitor only if we started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import asyncssh

from tui.actions.launch import box_python, run_launcher
from tui.model.config import BoxConfig
from tui.model.text import clean_block
from tui.remote.session import BoxError, BoxSession

MONITOR_PORTS = tuple(range(8420, 8440))
START_DEADLINE = 90.0


NO_LIBREYOLO = re.compile(r"No module named '?libreyolo'?(?![\w.])")


class MonitorError(Exception):
    """The monitor could not be opened, in words a person can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class MonitorHandle:
    """One open view: the box's monitor and our local end of the forward."""

    box: str
    run_dir: str
    run_id: str
    remote_port: int
    local_port: int
    started: bool  # we started the monitor (so closing stops it)
    pid: int | None
    ticks: Any
    log: str | None
    listener: asyncssh.SSHListener | None
    conn: asyncssh.SSHClientConnection | None = None  # the connection the forward rides

    @property
    def forwarding(self) -> bool:
        return self.listener is not None and self.conn is not None and not self.conn.is_closed()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    @property
    def run_url(self) -> str:
        return f"{self.url}?run={quote(self.run_id, safe='')}"


def run_candidates(box: BoxConfig, run: str) -> list[str]:
    """Where RUN may be: itself when a path (`/...`, `~/...`), else under each runs root."""
    if run.startswith(("/", "~")):
        return [run]
    return [posixpath.join(root, run) for root in box.runs_roots]


async def open_monitor(session: BoxSession, box: BoxConfig, run: str, *,
                       local_port: int | None = None,
                       on_cancel: Callable[[str], None] = lambda _: None) -> MonitorHandle:
    """Serve `run` with libreyolo monitor on the box and forward a local port to it.

    Cancelled before it returns (Ctrl+C, `w` again, the panel quitting), it
    stops the monitor it started and tells `on_cancel` how that went; one the
    box had not named yet is stopped by the box itself, its client gone.
    """
    begun: dict[str, Any] = {}  # the monitor this call started: pid, ticks, log
    try:
        return await _open_monitor(session, box, run, local_port, begun)
    except asyncio.CancelledError:
        said = "no monitor was started yet (the box stops one it starts for nobody)"
        if begun:
            handle = MonitorHandle(box=box.name, run_dir="", run_id="", remote_port=0,
                                   local_port=0, started=True, pid=begun.get("pid"),
                                   ticks=begun.get("ticks"), log=begun.get("log"),
                                   listener=begun.get("listener"))
            # Shielded: a second cancel (Ctrl+C again) must not cut the stop short.
            said = f"could not stop the monitor (pid {handle.pid}) on box {box.name}"
            with contextlib.suppress(Exception, asyncio.CancelledError):
                said = await asyncio.shield(close_monitor(session, handle))
        on_cancel(said)
        raise


def _note_started(begun: dict[str, Any], frame: dict[str, Any]) -> None:
    """Keep the pid of a monitor the box started, from its first word of it on."""
    for key in ("starting", "monitor"):
        found = frame.get(key)
        if isinstance(found, dict) and isinstance(found.get("pid"), int) and (
                key == "starting" or found.get("started")):
            begun.update(pid=found["pid"], ticks=found.get("ticks"),
                         log=found.get("log") if isinstance(found.get("log"), str) else None)


async def _open_monitor(session: BoxSession, box: BoxConfig, run: str,
                        local_port: int | None, begun: dict[str, Any]) -> MonitorHandle:
    if box.stand_in is not None:  # a demo box: no LibreYOLO there to serve a monitor
        raise MonitorError(f"box {box.name}: {box.stand_in}")
    answer: dict[str, Any] | None = None
    errors: list[str] = []
    for candidate in run_candidates(box, run):
        result = await run_launcher(session, {"mode": "monitor_start", "run_dir": candidate,
                                              "python": box_python(box),
                                              "ports": list(MONITOR_PORTS),
                                              "wait": START_DEADLINE - 10},
                                    deadline=START_DEADLINE,
                                    on_frame=functools.partial(_note_started, begun))
        monitor = result.first("monitor")
        if isinstance(monitor, dict) and isinstance(monitor.get("port"), int):
            answer = {**monitor, "run_dir": candidate}
            break
        error = result.first("error")
        if error is not None and NO_LIBREYOLO.search(str(error)):  # its traceback says no more
            raise MonitorError(f"box {box.name}: LibreYOLO is not installed in "
                               f"{box_python(box)} there: pip install libreyolo (or set "
                               "`python` for this box to the interpreter that has it)")
        errors.append(clean_block(str(error)) if error is not None
                      else f"box {box.name}: {result.reason or 'no answer'} "
                           f"{clean_block(result.stderr)[-300:]}".strip())
        if error is None or "no LibreYOLO run" not in str(error):
            break
    if answer is None:
        raise MonitorError(f"box {box.name}: " + "; ".join(errors))
    remote_port = answer["port"]
    if not 1 <= remote_port <= 65535:
        raise MonitorError(f"box {box.name}: the monitor reported port {remote_port}")
    handle_args = dict(box=box.name, run_dir=answer["run_dir"],
                       run_id=clean_block(str(answer.get("run_id") or posixpath.basename(run))),
                       remote_port=remote_port, started=bool(answer.get("started")),
                       pid=answer.get("pid") if isinstance(answer.get("pid"), int) else None,
                       ticks=answer.get("ticks"),
                       log=answer.get("log") if isinstance(answer.get("log"), str) else None)
    try:
        conn = await session.connection()
        listener = await _forward(conn, local_port, remote_port)
        begun["listener"] = listener
    except (BoxError, asyncssh.Error, OSError) as exc:
        handle = MonitorHandle(local_port=0, listener=None, **handle_args)
        await _stop_started(session, handle)
        message = exc.message if isinstance(exc, BoxError) else str(exc)
        raise MonitorError(f"box {box.name}: cannot forward a local port to the monitor "
                           f"({message})") from None
    return MonitorHandle(local_port=listener.get_port(), listener=listener, conn=conn,
                         **handle_args)


async def _forward(conn: asyncssh.SSHClientConnection, local_port: int | None,
                   remote_port: int) -> asyncssh.SSHListener:
    """A local listener on 127.0.0.1: the port the user gave, else any free one the
    system picks. Never the box's own port number: which port this machine listens on
    is ours to choose, and a box naming 11434 (another local service's default) would
    take it from that service while the look lasts."""
    return await conn.forward_local_port("127.0.0.1", local_port or 0, "127.0.0.1",
                                         remote_port)


async def _stop_started(session: BoxSession, handle: MonitorHandle) -> str:
    if not handle.started or handle.pid is None:
        return "the monitor was already running before; left running"
    result = await run_launcher(session, {"mode": "monitor_stop", "pid": handle.pid,
                                          "ticks": handle.ticks, "log": handle.log},
                                deadline=30.0)
    if "stopped" in {k for f in result.frames for k in f}:
        return "monitor stopped"
    return f"could not stop the monitor (pid {handle.pid}) on box {handle.box}: " \
           f"{result.reason or clean_block(str(result.first('error')))}"


async def hold_monitor(session: BoxSession, handle: MonitorHandle, stop: asyncio.Event, *,
                       say: Callable[[str], None] = lambda _: None,
                       check_seconds: float = 1.0, retry_seconds: float = 3.0) -> None:
    """Keep the forward up until `stop` is set: when its connection drops, log in again
    (or take the session's new connection, when the panel already did) and forward the
    same local port anew; the monitor on the box never noticed."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), check_seconds)
        if stop.is_set() or handle.forwarding:
            continue
        say(f"the connection to box {handle.box} was lost; forwarding again when it is back")
        if handle.listener is not None:
            handle.listener.close()
            handle.listener = None
        while not stop.is_set():
            try:
                handle.conn = await session.connection()
                handle.listener = await _forward(handle.conn, handle.local_port,
                                                 handle.remote_port)
            except (BoxError, asyncssh.Error, OSError) as exc:
                reason = exc.message if isinstance(exc, BoxError) else str(exc)
                say(f"not yet: {clean_block(reason)}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), retry_seconds)
                continue
            say(f"forwarding again: {handle.url}")
            break


async def close_monitor(session: BoxSession, handle: MonitorHandle) -> str:
    """Stop the forward, then the monitor if we started it; what happened, in words."""
    if handle.listener is not None:
        handle.listener.close()
        with contextlib.suppress(Exception):
            await handle.listener.wait_closed()
    return await _stop_started(session, handle)

