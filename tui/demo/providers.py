"""Stand-ins for the Vast.ai, RunPod and Lambda Cloud APIs on 127.0.0.1.

One implementation for the demo and the tests (tests/support/provider_servers.py
re-exports it). Each serves the read endpoints in the provider's own shapes
(Vast's paging included) and the actions (stop, start, destroy) with the
provider's own state transitions, on the loopback server of
tui.demo.api_server. The demo gives its boxes a demo key (DEMO_API_KEY) in
place of any real one, so nothing ever leaves the machine.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from tui.demo.api_server import Fault, ProviderServer, Recorded, Reply
from tui.demo.scenario import BoxSpec

DEMO_API_KEY = "gpurent-demo-key"  # not a secret: only these loopback servers accept it


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
        if state == "running" and not self.gpus_free_for(
                instance_id, int(self.instances[instance_id].get("num_gpus") or 0)):
            # What a marketplace does when the machine's GPUs were rented out meanwhile.
            return Reply(200, {"success": False, "error": "resources_unavailable",
                               "msg": "the machine's GPUs are in use by another client; "
                                      "starting is subject to resource availability: try "
                                      "again later, or copy the disk to a new instance"})
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
            if not self.gpus_free_for(pod_id, int(gpu.get("count") or 0)):
                return self.error(409, "There are not enough free GPUs on the host machine "
                                       "to start this pod")
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


# --- the demo's boxes ---


def demo_vast_instance(box: BoxSpec, started: float) -> dict[str, Any]:
    """A demo box as Vast lists it (its pricing, GPUs and start time)."""
    p = box.pricing
    disk = p.get("disk_gb", 0.0)
    storage = p.get("storage_usd_per_gb_month", 0.0)
    return vast_instance(
        int(box.instance_id or 0), label=box.name, dph_total=p.get("running_usd_per_hr"),
        dph_base=p.get("running_usd_per_hr"), disk_space=disk, storage_cost=storage,
        storage_total_cost=disk * storage / 720.0,
        gpu_name=box.gpus[0].name.removeprefix("NVIDIA GeForce ").replace(" ", "_"),
        num_gpus=len(box.gpus), start_date=started, ssh_host="127.0.0.1",
        public_ipaddr="127.0.0.1")


def demo_runpod_pod(box: BoxSpec, started: float) -> dict[str, Any]:
    """A demo box as RunPod lists it."""
    return runpod_pod(
        str(box.instance_id), name=box.name, cost=box.pricing.get("running_usd_per_hr"),
        gpu={"id": box.gpus[0].name.removeprefix("NVIDIA "), "count": len(box.gpus),
             "displayName": box.gpus[0].name.removeprefix("NVIDIA ")},
        mounts={"persistent": {"size": box.pricing.get("disk_gb"), "path": "/workspace"}},
        ssh={"direct": {"host": "127.0.0.1", "port": 22, "username": "root"}},
        startedAt=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"))


DEMO_SERVERS: dict[str, type[ProviderServer]] = {"vast": VastServer, "runpod": RunPodServer}
_DEMO_OBJECTS = {"vast": demo_vast_instance, "runpod": demo_runpod_pod}


def demo_provider_servers(boxes: Iterable[BoxSpec], started: float
                          ) -> dict[str, ProviderServer]:
    """One stand-in per provider the boxes use, holding those boxes (not yet started)."""
    servers: dict[str, ProviderServer] = {}
    for box in boxes:
        if box.provider not in DEMO_SERVERS or box.instance_id is None:
            continue
        if box.provider not in servers:
            servers[box.provider] = DEMO_SERVERS[box.provider](DEMO_API_KEY)
        servers[box.provider].add(_DEMO_OBJECTS[box.provider](box, started))
    return servers
