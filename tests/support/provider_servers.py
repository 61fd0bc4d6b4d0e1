"""Loopback stand-ins for the Vast.ai, RunPod and Lambda Cloud APIs (reference/providers.md).

Each server holds instances in a dict, checks the Bearer key, serves the
read endpoints in the provider's own shapes (Vast's paging included), records
every request, and can be told to misbehave for the next requests: any status,
body and headers, or a delay longer than the client's timeout. It runs
`http.server` in a thread on 127.0.0.1, so sync tests, async tests and
subprocesses can all talk to it. One answer per connection (`Connection: close`).

Adding an action later is one `self.route("PUT", pattern, handler)` in a
subclass's `add_routes`; a handler takes the Recorded request and the path's
named groups and returns a Reply.

The actions (stop, start, destroy) change the stored instance the way each
provider does. What a provider changes at once (Vast's intended_status,
Lambda's "terminating") lands at once; the effect itself lands after
`settle_gets` more answered GETs, so a client must poll to see it. A started
instance gets `start_gpus` GPUs when set ("a resumed pod may get zero GPUs");
`destroy_removes` says whether a destroyed instance is gone (404) or kept
with a destroyed status (RunPod, Lambda; a destroyed Vast instance is always gone).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
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
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self.settle_gets = 0                # answered GETs that still see the old state
        self.start_gpus: int | None = None  # GPUs a started instance gets (None: as before)
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

    def count(self, method: str, path_prefix: str = "/") -> int:
        """How many requests with this method (and path prefix) the server saw."""
        return sum(1 for r in self.requests if r.method == method
                   and r.path.startswith(path_prefix))

    def change(self, instance_id: str, fields: Mapping[str, Any] | None) -> None:
        """Update an instance now (None: remove it); a new dict, so no answer in flight moves."""
        with self._lock:
            if fields is None:
                self.instances.pop(instance_id, None)
            elif instance_id in self.instances:
                self.instances[instance_id] = {**self.instances[instance_id], **fields}

    def later(self, instance_id: str, fields: Mapping[str, Any] | None) -> None:
        """`change` after `settle_gets` more answered GETs (at once when that is 0)."""
        with self._lock:
            if self.settle_gets <= 0:
                self.change(instance_id, fields)
            else:
                self._pending.append(([self.settle_gets], instance_id, fields))

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
        return f"http://{host}:{port}"

    def start(self) -> str:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._httpd.daemon_threads = False  # close() joins every handler thread
        self._httpd.app = self  # type: ignore[attr-defined]
        # A short poll: shutdown() waits up to one poll interval (0.5 s by default).
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        name=f"{self.provider}-api", daemon=True)
        self._thread.start()
        return self.url

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a delay fault
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
        if request.headers.get("authorization") != f"Bearer {self.key}":
            return self.error(401, "missing or wrong API key")
        wrong_method = False
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method == request.method:
                reply = handler(request, **match.groupdict())
                if method == "GET":
                    self._settle()
                return reply
            wrong_method = True
        if wrong_method:
            return self.error(405, f"{request.method} is not allowed on {request.path}")
        return self.error(404, f"no such endpoint {request.path}")


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        app: ProviderServer = self.server.app  # type: ignore[attr-defined]
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


# --- Vast.ai ---


class VastServer(ProviderServer):
    """GET /api/v0/instances/{id}/ and the paged GET /api/v1/instances/."""

    provider = "vast"
    max_limit = 25

    def add_routes(self) -> None:
        self.route("GET", r"/api/v0/instances/(?P<instance_id>[^/]+)/", self.get_instance)
        self.route("GET", r"/api/v1/instances/", self.list_instances)
        self.route("PUT", r"/api/v0/instances/(?P<instance_id>[^/]+)/", self.put_state)
        self.route("DELETE", r"/api/v0/instances/(?P<instance_id>[^/]+)/", self.delete_instance)

    def error(self, status: int, words: str) -> Reply:
        codes = {401: "auth_error", 404: "no_such_instance", 400: "invalid_args"}
        return Reply(status, {"success": False, "error": codes.get(status, "server_error"),
                              "msg": words})

    def get_instance(self, request: Recorded, instance_id: str) -> Reply:
        obj = self.instances.get(instance_id)
        if obj is None:
            return self.error(404, f"Instance {instance_id} not found.")
        return Reply(200, {"instances": obj})

    def put_state(self, request: Recorded, instance_id: str) -> Reply:
        """Stop or start: intended_status at once, actual_status once it settles."""
        if instance_id not in self.instances:
            return self.error(404, f"Instance {instance_id} not found.")
        state = _json_field(request, "state")
        if state not in ("stopped", "running"):
            return self.error(400, f"state must be 'stopped' or 'running', not {state!r}")
        self.change(instance_id, {"intended_status": state})
        landed: dict[str, Any] = {"actual_status": state, "cur_state": state}
        if state == "running" and self.start_gpus is not None:
            landed["num_gpus"] = self.start_gpus
        self.later(instance_id, landed)
        return Reply(200, {"success": True})

    def delete_instance(self, request: Recorded, instance_id: str) -> Reply:
        if instance_id not in self.instances:
            return self.error(404, f"Instance {instance_id} not found.")
        self.later(instance_id, None)  # Vast keeps no record of a destroyed instance
        return Reply(200, {"success": True})

    def list_instances(self, request: Recorded) -> Reply:
        try:
            limit = int(request.param("limit") or self.max_limit)
        except ValueError:
            return self.error(400, "limit must be an integer")
        if not 1 <= limit <= self.max_limit:
            return self.error(400, f"limit must be between 1 and {self.max_limit}")
        ids = list(self.instances)
        start = 0
        token = request.param("after_token")
        if token:
            try:
                start = ids.index(json.loads(base64.urlsafe_b64decode(token))["after"]) + 1
            except (ValueError, KeyError, TypeError):
                return self.error(400, "bad after_token")
        page = ids[start:start + limit]
        more = start + limit < len(ids)
        next_token = base64.urlsafe_b64encode(json.dumps({"after": page[-1]}).encode()).decode() \
            if more and page else None
        return Reply(200, {"instances": [self.instances[i] for i in page],
                           "next_token": next_token, "total_instances": len(ids)})


def _json_field(request: Recorded, name: str) -> Any:
    """One field of a JSON object body; None when the body is not such an object."""
    try:
        body = request.json()
    except ValueError:
        return None
    return body.get(name) if isinstance(body, dict) else None


VAST_TOO_FREQUENT = Fault(429, "API requests too frequent")


def vast_instance(instance_id: int = 12345678, **fields: Any) -> dict[str, Any]:
    """The seed's box: 8x RTX 4090, 250 GB at $0.20/GB-month, $3.4828/hr."""
    return {
        "id": instance_id, "label": "yolox-coco", "actual_status": "running",
        "intended_status": "running", "cur_state": "running", "gpu_name": "RTX 4090",
        "num_gpus": 8, "dph_total": 3.4828, "dph_base": 3.41, "disk_space": 250,
        "storage_cost": 0.20, "storage_total_cost": 0.0694, "ssh_host": "ssh4.vast.ai",
        "ssh_port": 41022, "public_ipaddr": "203.0.113.7", "start_date": 1767225600.25,
        **fields,
    }


# --- RunPod (REST v2) ---


class RunPodServer(ProviderServer):
    """GET /v2/pods and /v2/pods/{id}; errors are RFC 9457 problems."""

    provider = "runpod"

    def __init__(self, key: str, instances: Iterable[Mapping[str, Any]] = ()) -> None:
        super().__init__(key, instances)
        self._running: dict[str, dict[str, Any]] = {}  # what a stopped pod gets back on start

    def add_routes(self) -> None:
        self.route("GET", r"/v2/pods", self.list_pods)
        self.route("GET", r"/v2/pods/(?P<pod_id>[^/]+)", self.get_pod)
        self.route("POST", r"/v2/pods/(?P<pod_id>[^/]+)/action", self.pod_action)
        self.route("DELETE", r"/v2/pods/(?P<pod_id>[^/]+)", self.delete_pod)

    def error(self, status: int, words: str) -> Reply:
        return Reply(status, {"title": HTTPStatus(status).phrase, "status": status,
                              "detail": words},
                     {"Content-Type": "application/problem+json"})

    def headers(self) -> Mapping[str, str]:
        return {"RateLimit": "limit=100, remaining=99, reset=1"}

    def get_pod(self, request: Recorded, pod_id: str) -> Reply:
        pod = self.instances.get(pod_id)
        if pod is None:
            return self.error(404, f"pod {pod_id} not found")
        return Reply(200, pod)

    def list_pods(self, request: Recorded) -> Reply:
        return Reply(200, list(self.instances.values()))

    def pod_action(self, request: Recorded, pod_id: str) -> Reply:
        """stop: EXITED, cost 0.0, ssh null; start: RUNNING again (maybe other GPUs); else 409."""
        pod = self.instances.get(pod_id)
        if pod is None:
            return self.error(404, f"pod {pod_id} not found")
        action = _json_field(request, "action")
        if action not in ("stop", "start"):
            return self.error(400, f"unknown action {action!r}")
        if action not in (pod.get("actions") or []):
            return self.error(409, f"pod {pod_id} cannot {action} while {pod.get('status')}")
        if action == "stop":
            self._running[pod_id] = {k: pod.get(k) for k in ("cost", "ssh")}
            self.change(pod_id, {"actions": []})
            self.later(pod_id, {"status": "EXITED", "cost": 0.0, "ssh": None,
                                "actions": ["start", "terminate"]})
        else:
            gpu = dict(pod.get("gpu") or {})
            if self.start_gpus is not None:
                gpu["count"] = self.start_gpus
            self.change(pod_id, {"status": "STARTING", "actions": []})
            self.later(pod_id, {"status": "RUNNING", "gpu": gpu,
                                **self._running.pop(pod_id, {}),
                                "actions": ["stop", "restart", "terminate"]})
        return Reply(200, self.instances[pod_id])

    def delete_pod(self, request: Recorded, pod_id: str) -> Reply:
        if pod_id not in self.instances:
            return self.error(404, f"pod {pod_id} not found")
        self.later(pod_id, None if self.destroy_removes else {
            "status": "TERMINATED", "cost": 0.0, "ssh": None, "actions": []})
        return Reply(204)


def runpod_too_many(retry_after: str | None) -> Fault:
    headers = {"Content-Type": "application/problem+json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return Fault(429, {"title": "Too Many Requests", "status": 429,
                       "detail": "rate limit exceeded"}, headers)


def runpod_pod(pod_id: str = "x7k2m9q4p1", **fields: Any) -> dict[str, Any]:
    """A running 2x RTX 4090 pod with a 100 GB persistent volume."""
    return {
        "id": pod_id, "name": "yolo9-runpod", "status": "RUNNING",
        "actions": ["stop", "restart", "terminate"],
        "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 2, "displayName": "RTX 4090"},
        "cost": 1.38, "disk": 50,
        "mounts": {"persistent": {"size": 100, "path": "/workspace"}},
        "ssh": {"direct": {"host": "203.0.113.9", "port": 22017, "username": "root"}},
        "createdAt": "2026-01-02T10:00:00Z", "startedAt": "2026-01-02T10:01:30.250Z",
        **fields,
    }


# --- Lambda Cloud ---


class LambdaServer(ProviderServer):
    """GET /api/v1/instances and /api/v1/instances/{id}, wrapped in {"data": ...}."""

    provider = "lambda"

    def add_routes(self) -> None:
        self.route("GET", r"/api/v1/instances", self.list_instances)
        self.route("GET", r"/api/v1/instances/(?P<instance_id>[^/]+)", self.get_instance)
        self.route("POST", r"/api/v1/instance-operations/terminate", self.terminate)

    def error(self, status: int, words: str) -> Reply:
        codes = {401: "global/invalid-api-key", 403: "global/account-inactive",
                 404: "global/object-does-not-exist", 400: "global/invalid-parameters"}
        return Reply(status, {"error": {"code": codes.get(status, "global/unknown"),
                                        "message": words}})

    def get_instance(self, request: Recorded, instance_id: str) -> Reply:
        obj = self.instances.get(instance_id)
        if obj is None:
            return self.error(404, "Specified instance does not exist.")
        return Reply(200, {"data": obj})

    def list_instances(self, request: Recorded) -> Reply:
        return Reply(200, {"data": list(self.instances.values())})

    def terminate(self, request: Recorded) -> Reply:
        """terminating at once, terminated (or gone) once it settles."""
        ids = _json_field(request, "instance_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return self.error(400, "instance_ids must be a non-empty list of ids")
        missing = [i for i in ids if i not in self.instances]
        if missing:
            return self.error(404, f"Specified instance does not exist: {', '.join(missing)}")
        terminated = []
        for instance_id in ids:
            self.change(instance_id, {"status": "terminating"})
            terminated.append(self.instances[instance_id])
            self.later(instance_id, None if self.destroy_removes else {"status": "terminated"})
        return Reply(200, {"data": {"terminated_instances": terminated}})


def lambda_instance(instance_id: str = "0920582c7ff041399e34823a0be62549",
                    **fields: Any) -> dict[str, Any]:
    """An active 8x A100 (80 GB) instance at 1432 cents an hour."""
    return {
        "id": instance_id, "name": "yolox-lambda", "status": "active", "ip": "198.51.100.4",
        "region": {"name": "us-east-1", "description": "Virginia, USA"},
        "instance_type": {
            "name": "gpu_8x_a100_80gb_sxm4", "description": "8x A100 (80 GB SXM4)",
            "gpu_description": "A100 (80 GB SXM4)", "price_cents_per_hour": 1432,
            "specs": {"vcpus": 240, "memory_gib": 1800, "storage_gib": 19500, "gpus": 8},
        },
        **fields,
    }
