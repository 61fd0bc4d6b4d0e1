"""Alerts out of the process: a webhook POST and a local command, in the background.

`AlertSender.send` never waits: each event becomes a task with a bounded
timeout (a dead webhook or a hung command costs that task, never the watch
loop or the panel's event loop), and at most MAX_PENDING sends are in flight
(past that an event is dropped, and the log says so). The webhook URL may
hold a secret (Slack's and Discord's hook tokens, an ntfy topic, a Pipedream
host name): it is logged only as the config names it (`webhook_name`, or a
known public service's host), and an error is named by its type and status,
never by its text (which may quote the URL). An event's words are redacted of
every secret this process holds before they leave. The command is the user's own, run
through the shell here; it reads the secret-free event as JSON on stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterable
from dataclasses import replace

import httpx2

from tui.model.alerts import AlertEvent, webhook_label, webhook_request
from tui.model.config import AlertConfig
from tui.store.secrets import scrub

SEND_TIMEOUT_SECONDS = 10.0
COMMAND_TIMEOUT_SECONDS = 30.0
MAX_PENDING = 32

Log = Callable[[str], None]


class AlertSender:
    """Delivers alert events to the configured webhook and command."""

    def __init__(self, config: AlertConfig, *, log: Log | None = None,
                 failed: Log | None = None, timeout: float = SEND_TIMEOUT_SECONDS,
                 command_timeout: float = COMMAND_TIMEOUT_SECONDS) -> None:
        """`log`: every outcome (watch's stdout); `failed`: the failures alone (the panel
        shows those)."""
        self.config = config
        self.log = log or (lambda line: None)
        self.failed = failed
        self.timeout = timeout
        self.command_timeout = command_timeout
        self._http: httpx2.AsyncClient | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.where = webhook_label(config.webhook, config.webhook_name) \
            if config.webhook else None

    def _fail(self, line: str) -> None:
        self.log(line)
        if self.failed is not None:
            self.failed(line)

    @property
    def active(self) -> bool:
        return bool(self.config.webhook or self.config.command)

    def send(self, events: Iterable[AlertEvent]) -> None:
        """Start delivering each event; returns at once."""
        if not self.active:
            return
        for item in events:
            if len(self._pending) >= MAX_PENDING:
                self._fail(f"alert {item.kind} on {item.box} not sent: {len(self._pending)} "
                         "sends still pending (a dead webhook or a hung command?)")
                continue
            item = replace(item, text=scrub(item.text))
            task = asyncio.get_running_loop().create_task(self.deliver(item))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def deliver(self, item: AlertEvent) -> None:
        """Both ways at once; each bounded, neither raises."""
        jobs = []
        if self.config.webhook:
            jobs.append(self._post(self.config.webhook, item))
        if self.config.command:
            jobs.append(self._run(self.config.command, item))
        await asyncio.gather(*jobs)

    async def _post(self, url: str, item: AlertEvent) -> None:
        target, body = webhook_request(url, self.config.format, item)
        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False,
                                            headers={"User-Agent": "gpurent-tui"})
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._http.post(
                    target, content=body, headers={"Content-Type": "application/json"})
        except (TimeoutError, httpx2.TimeoutException):
            self._fail(f"alert {self.where}: no answer within {self.timeout:g} s "
                     f"({item.kind} on {item.box} not delivered)")
            return
        except (httpx2.HTTPError, httpx2.InvalidURL, OSError, ValueError) as exc:
            self._fail(f"alert {self.where}: {type(exc).__name__} ({item.kind} on "
                     f"{item.box} not delivered)")
            return
        if response.is_success:
            self.log(f"alert {self.where}: {item.kind} on {item.box} delivered "
                     f"(HTTP {response.status_code})")
        else:
            self._fail(f"alert {self.where}: HTTP {response.status_code} ({item.kind} "
                     f"on {item.box} not delivered)")

    async def _run(self, command: str, item: AlertEvent) -> None:
        data = json.dumps(item.document()).encode() + b"\n"
        try:
            proc = await asyncio.create_subprocess_shell(
                command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            self._fail(f"alert command could not start: {exc.strerror or type(exc).__name__}")
            return
        try:
            async with asyncio.timeout(self.command_timeout):
                await proc.communicate(data)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the shell and children
            await proc.wait()
            self._fail(f"alert command killed after {self.command_timeout:g} s ({item.kind} on "
                     f"{item.box})")
            return
        except (BrokenPipeError, ConnectionResetError):
            await proc.wait()  # it did not read the event: its exit code says the rest
        if proc.returncode:
            self._fail(f"alert command exited {proc.returncode} ({item.kind} on {item.box})")

    async def aclose(self, grace: float = 5.0) -> None:
        """Let sends in flight finish for up to `grace` seconds, then cancel them."""
        if self._pending:
            _, late = await asyncio.wait(set(self._pending), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
