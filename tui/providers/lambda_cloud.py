"""Lambda Cloud: `{"data": ...}` answers, `{"error": {code, message}}` errors, and no stop.

Destroy is `POST /api/v1/instance-operations/terminate`; stop and start are
refused here, before any request, since Lambda has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from tui.model.fields import finite, nonempty, table, whole
from tui.model.instance import InstanceState
from tui.providers.base import (
    HttpProvider,
    InstanceInfo,
    frozen_raw,
    ident,
)

DEFAULT_URL = "https://cloud.lambda.ai"
NO_STOP = "Lambda cannot stop an instance: destroy it or keep it running"

# preempted: Lambda took the machine back; it bills nothing and will not come back.
_STATES: dict[str, InstanceState] = {
    "active": "running", "booting": "starting", "terminating": "stopping",
    "terminated": "destroyed", "unhealthy": "error", "preempted": "destroyed"}


def lambda_info(obj: Mapping[str, Any], instance_id: str | None = None) -> InstanceInfo:
    """One Lambda instance in the panel's words."""
    status = nonempty(obj.get("status"))
    kind = table(obj.get("instance_type"))
    specs = table(kind.get("specs"))
    cents = finite(kind.get("price_cents_per_hour"), from_text=True)
    return InstanceInfo(
        provider="lambda",
        instance_id=ident(obj, instance_id),
        state=_STATES.get(status, "unknown") if status else "unknown",
        raw_state=status,
        running_usd_per_hr=cents / 100 if cents is not None else None,
        disk_usd_per_hr=None,
        disk_gb=finite(specs.get("storage_gib"), from_text=True),
        storage_usd_per_gb_month=None,
        hours_per_month=None,
        can_stop=False,  # Lambda has no stop: terminate is the only way to stop paying
        gpu_name=nonempty(kind.get("gpu_description")) or nonempty(kind.get("description"))
        or nonempty(kind.get("name")),
        num_gpus=whole(specs.get("gpus"), from_text=True),
        started_at=None,  # Lambda gives no start time: the caller records first sight
        label=nonempty(obj.get("name")),
        raw=frozen_raw(obj),
    )


class LambdaClient(HttpProvider):
    name = "lambda"
    title = "Lambda Cloud"
    default_url = DEFAULT_URL
    key_var = "LAMBDA_API_KEY"
    can_stop = False

    def said(self, data: Any, body: str) -> str:
        error = table(table(data).get("error"))
        if error.get("message") or error.get("code"):
            code = f" [{error['code']}]" if error.get("code") else ""
            return f"{error.get('message') or 'error'}{code}"
        return super().said(data, body)

    def _data(self, data: Any, subject: str, instance_id: str | None) -> Any:
        if not isinstance(data, Mapping) or "data" not in data:
            raise self.error("bad_answer", subject, "the answer has no 'data'",
                             instance_id=instance_id)
        return data["data"]

    async def get(self, instance_id: str) -> InstanceInfo:
        subject = f"instance {instance_id}"
        data = await self.call("GET", f"/api/v1/instances/{quote(instance_id, safe='')}",
                               subject=subject, instance_id=instance_id)
        obj = self._data(data, subject, instance_id)
        if not isinstance(obj, Mapping) or not obj:
            raise self.error("bad_answer", subject, "'data' is not an instance object",
                             instance_id=instance_id)
        return lambda_info(obj, instance_id)

    async def list(self) -> list[InstanceInfo]:
        items = self._data(await self.call("GET", "/api/v1/instances", subject="instance list"),
                           "instance list", None)
        if not isinstance(items, list) or not all(
                isinstance(o, Mapping) and o.get("id") is not None for o in items):
            raise self.error("bad_answer", "instance list",
                             "'data' is not a list of instances with ids")
        return [lambda_info(obj) for obj in items]

    async def stop(self, instance_id: str) -> None:
        """Lambda has no stop: refused without a request, so nothing can change."""
        raise self.error("not_allowed", f"instance {instance_id} (stop)", NO_STOP,
                         instance_id=instance_id)

    async def start(self, instance_id: str) -> None:
        """Lambda has no start either (nothing is ever stopped)."""
        raise self.error("not_allowed", f"instance {instance_id} (start)", NO_STOP,
                         instance_id=instance_id)

    async def destroy(self, instance_id: str) -> None:
        """Terminate the instance: billing ends, its disk is gone."""
        await self.act("POST", "/api/v1/instance-operations/terminate",
                       subject=f"instance {instance_id} (destroy)", instance_id=instance_id,
                       body={"instance_ids": [instance_id]})
