"""RunPod over REST v2 (`/v2/pods`): errors are RFC 9457 problems, 429 carries Retry-After.

Stop and start are `POST /v2/pods/{id}/action`; destroy is `DELETE /v2/pods/{id}`
(204). An action the pod does not allow now answers 409 (kind not_allowed).
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
    iso_epoch,
)

DEFAULT_URL = "https://api.runpod.io"
# The persistent volume bills $0.20/GB-month while stopped ($0.10 running);
# the container disk is wiped on stop and not billed.
STOPPED_VOLUME_USD_PER_GB_MONTH = 0.20

_STATES: dict[str, InstanceState] = {
    "RUNNING": "running", "PROVISIONING": "starting", "STARTING": "starting",
    "EXITED": "stopped", "TERMINATED": "destroyed", "ERROR": "error"}


def runpod_info(obj: Mapping[str, Any], instance_id: str | None = None) -> InstanceInfo:
    """One pod in the panel's words."""
    status = nonempty(obj.get("status"))
    state = _STATES.get(status.upper(), "unknown") if status else "unknown"
    gpu = table(obj.get("gpu"))
    disk_gb = finite(table(table(obj.get("mounts")).get("persistent")).get("size"),
                     from_text=True)
    actions = obj.get("actions")
    # `actions` lists the transitions allowed now: a running pod without "stop"
    # (one with a network volume, say) cannot be stopped, only terminated.
    can_stop = not (state == "running" and isinstance(actions, list) and "stop" not in actions)
    return InstanceInfo(
        provider="runpod",
        instance_id=ident(obj, instance_id),
        state=state,
        raw_state=status,
        # `cost` is what the pod bills now: 0.0 once EXITED, so it is no running rate then.
        running_usd_per_hr=finite(obj.get("cost"), from_text=True) if state == "running" else None,
        disk_usd_per_hr=None,
        disk_gb=disk_gb,
        storage_usd_per_gb_month=STOPPED_VOLUME_USD_PER_GB_MONTH if disk_gb is not None
        else None,
        hours_per_month=None,  # 720 or 730 is unverified: the caller's default applies
        can_stop=can_stop,
        gpu_name=nonempty(gpu.get("id")),
        num_gpus=whole(gpu.get("count"), from_text=True),
        started_at=iso_epoch(obj.get("startedAt")),
        label=nonempty(obj.get("name")),
        raw=frozen_raw(obj),
    )


class RunPodClient(HttpProvider):
    name = "runpod"
    title = "RunPod"
    default_url = DEFAULT_URL
    key_var = "RUNPOD_API_KEY"

    def said(self, data: Any, body: str) -> str:
        if isinstance(data, Mapping) and (data.get("title") or data.get("detail")):
            return ": ".join(str(data[k]) for k in ("title", "detail") if data.get(k))
        return super().said(data, body)

    async def get(self, instance_id: str) -> InstanceInfo:
        subject = f"pod {instance_id}"
        data = await self.call("GET", f"/v2/pods/{quote(instance_id, safe='')}",
                               subject=subject, instance_id=instance_id)
        if not isinstance(data, Mapping) or not data:
            raise self.error("bad_answer", subject, "the answer is not a pod object",
                             instance_id=instance_id)
        return runpod_info(data, instance_id)

    async def list(self) -> list[InstanceInfo]:
        data = await self.call("GET", "/v2/pods", subject="pod list")
        # A bare array (as v1 answers); an object wrapping it is accepted too.
        pods = data if isinstance(data, list) else table(data).get("pods", table(data).get("data"))
        if not isinstance(pods, list) or not all(
                isinstance(p, Mapping) and p.get("id") is not None for p in pods):
            raise self.error("bad_answer", "pod list", "the answer is not a list of pods with ids")
        return [runpod_info(pod) for pod in pods]

    async def _action(self, instance_id: str, action: str) -> None:
        await self.act("POST", f"/v2/pods/{quote(instance_id, safe='')}/action",
                       subject=f"pod {instance_id} ({action})", instance_id=instance_id,
                       body={"action": action})

    async def stop(self, instance_id: str) -> None:
        """To EXITED: GPU and container disk released, the persistent volume still billed."""
        await self._action(instance_id, "stop")

    async def start(self, instance_id: str) -> None:
        """Back to RUNNING: a resumed pod may get fewer GPUs, even none."""
        await self._action(instance_id, "start")

    async def destroy(self, instance_id: str) -> None:
        """Terminate the pod and its volume: nothing is billed afterwards."""
        await self.act("DELETE", f"/v2/pods/{quote(instance_id, safe='')}",
                       subject=f"pod {instance_id} (destroy)", instance_id=instance_id)
