"""The loopback HTTP server behind the provider stand-ins (tui.demo.providers).

One implementation for the demo and the tests: a server holds instances in a
dict, checks the Bearer key, routes requests to a provider's handlers,
records every request, and can be told to misbehave for the next requests:
any status, body and headers, or a delay longer than the client's timeout.
It runs `http.server` in a thread on 127.0.0.1, so sync tests, async tests,
subprocesses and the demo's event loop can all talk to it. One answer per
connection (`Connection: close`).

Adding an action is one `self.route("PUT", pattern, handler)` in a
subclass's `add_routes`; a handler takes the Recorded request and the path's
named groups and returns a Reply.

The actions (stop, start, destroy) change the stored instance the way each
provider does. What a provider changes at once (Vast's intended_status,
Lambda's "terminating") lands at once; the effect itself lands after
`settle_gets` more answered GETs (a test: a client must poll to see it), or
`settle_seconds` later (the demo: stopping takes a few seconds). A started
instance gets `start_gpus` GPUs when set ("a resumed pod may get zero GPUs");
`free_gpus` says how many GPUs an instance's machine has free for a start
(a marketplace rents them out while a box is stopped); `destroy_removes`
says whether a destroyed instance is gone (404) or kept with a destroyed
status (RunPod, Lambda; a destroyed Vast instance is always gone).
`on_change(instance_id, fields or None)` hears every change, from whichever
thread made it.

Besides the account key, a server accepts instance-scoped keys (`scope(key,
instance_id)`), as an instance's own environment carries them (Vast's
CONTAINER_API_KEY, a pod's RUNPOD_API_KEY): such a key reads and acts on
exactly its own instance, and is refused (403) for any other and for lists.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Reply:
    """An answer: bytes and str go out as they are, anything else as JSON."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    """What the next matching request gets instead of the normal answer."""

    status: int | None = None  # None: the normal answer, after `delay`
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0         # seconds before answering; make it exceed the client's timeout
    path: str | None = None    # only requests whose path starts with this
    method: str | None = None  # only requests with this method ("PUT", "DELETE", ...)


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None


Handler = Callable[..., Reply]


class ProviderServer:
    """A provider's API on 127.0.0.1: routes, key check, scripted faults and a request log."""

    provider: ClassVar[str]
    id_field: ClassVar[str] = "id"
    destroy_removes: bool = False  # a destroyed instance: gone (404), or kept as destroyed

    def __init__(self, key: str, instances: Iterable[Mapping[str, Any]] = ()) -> None:
        self.key = key
        self.instances: dict[str, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.scoped: dict[str, str] = {}  # instance-scoped key -> the one instance it may touch
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self.settle_gets = 0                # answered GETs that still see the old state
        self.settle_seconds = 0.0           # or: seconds before the effect lands
        self.start_gpus: int | None = None  # GPUs a started instance gets (None: as before)
        self.free_gpus: dict[str, int] = {}  # GPUs free for a start (absent: enough)
        self.on_change: Callable[[str, Mapping[str, Any] | None], None] | None = None
        self._timers: set[threading.Timer] = set()
        self._pending: list[tuple[list[int], str, Mapping[str, Any] | None]] = []
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add(*instances)
        self.add_routes()

    # --- what a test uses ---

    def add(self, *objs: Mapping[str, Any]) -> None:
        for obj in objs:
            self.instances[str(obj[self.id_field])] = dict(obj)

    def scope(self, key: str, instance_id: str | int) -> None:
        """Accept `key` for requests about `instance_id` alone (an instance's own key)."""
        self.scoped[key] = str(instance_id)

    def count(self, method: str, path_prefix: str = "/") -> int:
        """How many requests with this method (and path prefix) the server saw."""
        return sum(1 for r in self.requests if r.method == method
                   and r.path.startswith(path_prefix))

    def change(self, instance_id: str, fields: Mapping[str, Any] | None) -> None:
        """Update an instance now (None: remove it); a new dict, so no answer in flight moves."""
        with self._lock:
            if fields is None:
                if self.instances.pop(instance_id, None) is None:
                    return
                now: dict[str, Any] | None = None
            elif instance_id in self.instances:
                now = self.instances[instance_id] = {**self.instances[instance_id], **fields}
            else:
                return
        if self.on_change is not None:
            self.on_change(instance_id, now)

    def later(self, instance_id: str, fields: Mapping[str, Any] | None) -> None:
        """`change` after `settle_seconds`, or `settle_gets` more answered GETs (at once when
        both are 0)."""
        with self._lock:
            if self.settle_seconds > 0 and not self._closing.is_set():
                timer = threading.Timer(self.settle_seconds, self._land,
                                        (instance_id, fields))
                timer.daemon = True
                self._timers.add(timer)
                timer.start()
            elif self.settle_gets <= 0:
                self.change(instance_id, fields)
            else:
                self._pending.append(([self.settle_gets], instance_id, fields))

    def _land(self, instance_id: str, fields: Mapping[str, Any] | None) -> None:
        with self._lock:
            self._timers.difference_update({t for t in self._timers if not t.is_alive()})
        if not self._closing.is_set():
            self.change(instance_id, fields)

    def gpus_free_for(self, instance_id: str, wanted: int) -> bool:
        """Whether the instance's machine has `wanted` GPUs free for a start."""
        with self._lock:
            return self.free_gpus.get(instance_id, wanted) >= wanted

    def _settle(self) -> None:
        """One GET was answered: count down every pending change, apply the due ones."""
        with self._lock:
            waiting = []
            for left, instance_id, fields in self._pending:
                left[0] -= 1
                if left[0] <= 0:
                    self.change(instance_id, fields)
                else:
                    waiting.append((left, instance_id, fields))
            self._pending = waiting

    def fail(self, *faults: Fault) -> None:
        """Queue faults: each is used by one request, in order."""
        with self._lock:
            self._faults.extend(faults)

    def error_fault(self, status: int, words: str, **kwargs: Any) -> Fault:
        """A fault whose body is this provider's own error shape."""
        reply = self.error(status, words)
        headers = {**reply.headers, **kwargs.pop("headers", {})}
        return Fault(status, reply.body, headers, **kwargs)

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> str:
        self._httpd = _HttpServer(self)
        # A short poll: shutdown() waits up to one poll interval (0.5 s by default).
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        name=f"{self.provider}-api", daemon=True)
        self._thread.start()
        return self.url

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a delay fault; no change lands later
        with self._lock:
            timers = list(self._timers)
        for timer in timers:
            timer.cancel()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> ProviderServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what a provider subclass defines ---

    def add_routes(self) -> None:
        raise NotImplementedError

    def error(self, status: int, words: str) -> Reply:
        raise NotImplementedError

    def headers(self) -> Mapping[str, str]:
        """Headers on every answer."""
        return {}

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append((method, re.compile(pattern), handler))

    # --- serving ---

    def _next_fault(self, request: Recorded) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if (fault.path is None or request.path.startswith(fault.path)) and \
                        (fault.method is None or fault.method == request.method):
                    return self._faults.pop(i)
        return None

    def respond(self, request: Recorded) -> Reply | None:
        """The answer to one request; None: drop the connection unanswered."""
        self.requests.append(request)
        fault = self._next_fault(request)
        if fault is not None and fault.delay and self._closing.wait(fault.delay):
            return None
        if fault is not None and fault.status is not None:
            return Reply(fault.status, fault.body, fault.headers)
        auth = request.headers.get("authorization") or ""
        scoped_to = None
        if auth != f"Bearer {self.key}":
            scoped_to = self.scoped.get(auth.removeprefix("Bearer ")) \
                if auth.startswith("Bearer ") else None
            if scoped_to is None:
                return self.error(401, "missing or wrong API key")
        wrong_method = False
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method == request.method:
                groups = match.groupdict()
                if scoped_to is not None and list(groups.values()) != [scoped_to]:
                    return self.error(403, f"this key is scoped to instance {scoped_to} and "
                                           f"may not {request.method} {request.path}")
                reply = handler(request, **groups)
                if method == "GET":
                    self._settle()
                return reply
            wrong_method = True
        if wrong_method:
            return self.error(405, f"{request.method} is not allowed on {request.path}")
        return self.error(404, f"no such endpoint {request.path}")


class _HttpServer(ThreadingHTTPServer):
    """The loopback HTTP server of one stand-in, which its handlers ask for the stand-in."""

    daemon_threads = False  # close() joins every handler thread

    def __init__(self, app: ProviderServer) -> None:
        super().__init__(("127.0.0.1", 0), _RequestHandler)
        self.app = app


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        assert isinstance(self.server, _HttpServer)
        app = self.server.app
        length = int(self.headers.get("Content-Length") or 0)
        split = urlsplit(self.path)
        request = Recorded(
            self.command, split.path, parse_qs(split.query, keep_blank_values=True),
            {k.lower(): v for k, v in self.headers.items()},
            self.rfile.read(length) if length else b"")
        reply = app.respond(request)
        self.close_connection = True
        if reply is None:
            return
        if isinstance(reply.body, bytes | str):
            data = reply.body.encode() if isinstance(reply.body, str) else reply.body
            kind = "text/plain; charset=utf-8"
        else:
            data = b"" if reply.body is None else json.dumps(reply.body).encode()
            kind = "application/json"
        headers = {"Content-Type": kind, **app.headers(), **reply.headers}
        try:
            self.send_response(reply.status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test): nothing to tell it

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: `requests` is the log."""


