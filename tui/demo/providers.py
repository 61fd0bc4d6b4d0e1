"""Stand-ins for the Vast.ai and RunPod APIs on 127.0.0.1, so the demo's cost meter never
leaves the machine.

The panel reads a box's rates and state from its provider. The demo points
`[providers.vast]` and `[providers.runpod]` at this server and gives the
panel a demo key (DEMO_API_KEY) in place of any real one. It answers the two
reads the panel makes (`GET /api/v0/instances/<id>/` as Vast does, `GET
/v2/pods/<id>` as RunPod does) with the demo boxes' pricing; anything else is
404, a wrong key 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tui.demo.scenario import BoxSpec

DEMO_API_KEY = "gpurent-demo-key"  # not a secret: only this loopback server accepts it
MAX_HEADER_BYTES = 16384


def vast_instance(box: BoxSpec, started: float) -> dict[str, Any]:
    """A Vast /api/v0/instances/<id>/ object for a demo box (the fields the panel reads)."""
    p = box.pricing
    disk = p.get("disk_gb", 0.0)
    storage = p.get("storage_usd_per_gb_month", 0.0)
    return {"id": int(box.instance_id or 0), "label": box.name, "actual_status": "running",
            "intended_status": "running", "cur_state": "running",
            "dph_total": p.get("running_usd_per_hr"), "disk_space": disk,
            "storage_cost": storage, "storage_total_cost": disk * storage / 720.0,
            "gpu_name": box.gpus[0].name.removeprefix("NVIDIA GeForce ").replace(" ", "_"),
            "num_gpus": len(box.gpus), "start_date": started}


def runpod_pod(box: BoxSpec, started: float) -> dict[str, Any]:
    """A RunPod /v2/pods/<id> object for a demo box (the fields the panel reads)."""
    return {"id": box.instance_id, "name": box.name, "status": "RUNNING",
            "cost": box.pricing.get("running_usd_per_hr"), "actions": ["stop", "terminate"],
            "gpu": {"id": box.gpus[0].name.removeprefix("NVIDIA "), "count": len(box.gpus)},
            "mounts": {"persistent": {"size": box.pricing.get("disk_gb")}},
            "startedAt": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")}


def route(path: str, boxes: Sequence[BoxSpec], started: float) -> tuple[int, Any]:
    """(HTTP status, JSON body) for a GET of `path`."""
    for box in boxes:
        if box.instance_id is None:
            continue
        if box.provider == "vast" and path == f"/api/v0/instances/{box.instance_id}/":
            return 200, {"instances": vast_instance(box, started)}
        if box.provider == "runpod" and path == f"/v2/pods/{box.instance_id}":
            return 200, runpod_pod(box, started)
    return 404, {"title": "Not Found", "detail": f"no demo instance at {path}",
                 "success": False, "error": "not_found", "msg": "no such instance"}


class ProviderApi:
    """The loopback HTTP/1.1 server (keep-alive, GET only, JSON answers)."""

    def __init__(self, boxes: Sequence[BoxSpec], started: float) -> None:
        self.boxes = tuple(boxes)
        self.started = started
        self.requests: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if len(head) > MAX_HEADER_BYTES:
                    break
                method, path, headers = _parse(head)
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                self.requests.append(f"{method} {path}")
                if headers.get("authorization") != f"Bearer {DEMO_API_KEY}":
                    status, body = 401, {"title": "Unauthorized", "detail": "bad API key",
                                         "success": False, "error": "auth_error",
                                         "msg": "Invalid api key"}
                elif method != "GET":
                    status, body = 405, {"title": "Method Not Allowed", "detail": method}
                else:
                    status, body = route(path.split("?", 1)[0], self.boxes, self.started)
                writer.write(_response(status, body))
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                ValueError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


def _parse(head: bytes) -> tuple[str, str, Mapping[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


_REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}


def _response(status: int, body: Any) -> bytes:
    data = json.dumps(body).encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    return head.encode() + data
