"""`monitor`: LibreYOLO's web monitor of a run, forwarded here until Ctrl+C."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys

from tui.cli.fleet import box_named, load_fleet
from tui.model.config import BoxConfig, FleetConfig
from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def cmd_monitor(args: argparse.Namespace) -> int:
    """LibreYOLO's monitor for a run, forwarded to 127.0.0.1 here until Ctrl+C."""
    if args.port is not None and not 0 <= args.port <= 65535:  # 0: a free one, as bind
        print(f"monitor: --port {args.port} is not a port (1 to 65535, or 0 for a free one)",
              file=sys.stderr)
        return EXIT_USAGE
    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    try:
        return asyncio.run(_monitor(fleet, box, args.run, args.port))
    except asyncio.CancelledError:
        return EXIT_OK


async def _monitor(fleet: FleetConfig, box: BoxConfig, run: str, port: int | None) -> int:
    import getpass

    from tui.actions.monitor import MonitorError, close_monitor, hold_monitor, open_monitor
    from tui.model.launch import ssh_forward_hint
    from tui.remote.hostkeys import host_key_store
    from tui.remote.session import BoxSession

    session = BoxSession(box, fleet, host_key_store(fleet))
    # Ctrl+C (or a hangup) from the first moment on: during the start it cancels the
    # start, which stops a monitor it started; once open, it ends the look.
    done = asyncio.Event()
    said: list[str] = []
    start = asyncio.ensure_future(open_monitor(session, box, run, local_port=port,
                                               on_cancel=said.append))

    def stop() -> None:
        done.set()
        start.cancel()  # nothing once the start is over

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    try:
        try:
            handle = await start
        except MonitorError as exc:
            print(exc.message, file=sys.stderr)
            return EXIT_FAILED
        except asyncio.CancelledError:
            if not done.is_set():
                raise
            print(f"interrupted while the monitor started on box {box.name}: "
                  f"{'; '.join(said) or 'nothing started'}", file=sys.stderr)
            return EXIT_OK
        how = "started" if handle.started else "already serving"
        print(handle.url, flush=True)
        print(f"libreyolo monitor ({how}) on box {box.name} port {handle.remote_port}, "
              f"run {handle.run_dir}: {handle.run_url}", file=sys.stderr)
        hint = ssh_forward_hint(handle.local_port, os.environ.get("SSH_CONNECTION"),
                                getpass.getuser())
        if hint:
            print(f"on your laptop: {hint}  then open {handle.url}", file=sys.stderr)
        print("Ctrl+C stops the forward" + (" and the monitor" if handle.started else ""),
              file=sys.stderr, flush=True)
        await hold_monitor(session, handle, done,
                           say=lambda line: print(line, file=sys.stderr, flush=True))
        print(await close_monitor(session, handle), file=sys.stderr)
        return EXIT_OK
    finally:
        await session.close()


def add_monitor(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`monitor`."""
    monitor = sub.add_parser("monitor", parents=[common],
                             help="open LibreYOLO's web monitor of a run through the box's "
                                  "SSH path, until Ctrl+C")
    monitor.add_argument("box")
    monitor.add_argument("run", help="run name (under the box's runs roots) or path on the box")
    monitor.add_argument("--port", type=int, metavar="P",
                         help="local port (default: a free one)")
    monitor.set_defaults(func=cmd_monitor)
