"""Vast.ai: one instance from /api/v0, the list from /api/v1 (25 a page, after_token).

Vast reports some failures as HTTP 200 with `{"success": false}`, and its 429
carries no Retry-After: both are absorbed by the shared request helper. Stop
and start are a PUT of the wished state; destroy is a DELETE; all on /api/v0.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tui.model.fields import finite, nonempty, table, whole
from tui.model.instance import InstanceState
from tui.providers.base import (
    ErrorKind,
    HttpProvider,
    InstanceInfo,
    Secret,
    frozen_raw,
    ident,
    key_from,
)

DEFAULT_URL = "https://console.vast.ai"
HOURS_PER_MONTH = 720.0  # Vast's own examples divide the disk's $/GB-month by 720
PAGE_LIMIT = 25          # the most /api/v1/instances/ gives per page
MAX_PAGES = 400          # 10,000 instances: past that the paging is going round in circles

# actual_status (the container) -> the panel's state. Vast's docs: null is
# "being provisioned"; frozen is "paused with memory preserved. GPU charges
# apply", so it is billed like running and is not "stopped" (which would let
# the meter charge the disk only); exited is "exited unexpectedly" (see
# vast_state for when the GPU is still held).
_STATES: dict[str | None, InstanceState] = {
    None: "starting", "loading": "starting", "rebooting": "starting",
    "running": "running", "frozen": "running",
    "stopped": "stopped", "exited": "stopped",
    "unknown": "unknown", "offline": "unknown",
}


def vast_state(actual: object, intended: object, cur_state: object) -> InstanceState:
    """The panel's state from the container's status, the wish, and the machine contract."""
    state = _STATES.get(actual, "unknown") if actual is None or isinstance(actual, str) \
        else "unknown"
    if actual == "exited" and cur_state == "running":
        return "error"     # the container died but the GPU is still held, and billed
    if intended == "stopped" and state in ("running", "starting"):
        return "stopping"  # a stop was asked for; the container is not down yet
    if intended == "running" and actual == "stopped":
        return "starting"  # a start was asked for; waiting for the GPU (it may be gone)
    return state


def vast_info(obj: Mapping[str, Any], instance_id: str | None = None) -> InstanceInfo:
    """One Vast instance object in the panel's words."""
    actual = obj.get("actual_status")
    return InstanceInfo(
        provider="vast",
        instance_id=ident(obj, instance_id),
        state=vast_state(actual, obj.get("intended_status"), obj.get("cur_state")),
        raw_state=nonempty(actual),
        running_usd_per_hr=finite(obj.get("dph_total"), from_text=True),
        disk_usd_per_hr=finite(obj.get("storage_total_cost"), from_text=True),
        disk_gb=finite(obj.get("disk_space"), from_text=True),
        storage_usd_per_gb_month=finite(obj.get("storage_cost"), from_text=True),
        hours_per_month=HOURS_PER_MONTH,
        can_stop=True,
        gpu_name=nonempty(obj.get("gpu_name")),
        num_gpus=whole(obj.get("num_gpus"), from_text=True),
        started_at=finite(obj.get("start_date"), from_text=True),
        label=nonempty(obj.get("label")),
        raw=frozen_raw(obj),
    )


def _vast_kind(words: str) -> ErrorKind:
    """Vast's error codes are not documented: read the kind from the words."""
    lowered = words.lower()
    # Auth first: "API key not found" is about the key, not the instance.
    if any(w in lowered for w in ("auth", "api key", "api_key", "apikey", "permission",
                                  "forbidden", "unauthorized", "credential", "token")):
        return "auth"
    if any(w in lowered for w in ("not_found", "no_such", "not found", "does not exist")):
        return "not_found"
    if "too frequent" in lowered or "rate" in lowered:
        return "rate_limited"
    if "not_allowed" in lowered or "not allowed" in lowered:
        return "not_allowed"
    return "bad_answer"


class VastClient(HttpProvider):
    name = "vast"
    title = "Vast.ai"
    default_url = DEFAULT_URL
    key_var = "VAST_API_KEY"

    @classmethod
    def find_key(cls, env: Mapping[str, str]) -> Secret | None:
        """VAST_API_KEY, then the CLI's key file ($XDG_CONFIG_HOME/vastai), then ~/.vast_api_key."""
        home = Path(env["HOME"]) if env.get("HOME") else Path.home()
        config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
        return key_from(env, "VAST_API_KEY",
                        (config / "vastai" / "vast_api_key", home / ".vast_api_key"))

    @classmethod
    def url_from(cls, env: Mapping[str, str]) -> str:
        return env.get("VAST_URL") or DEFAULT_URL

    @property
    def key_words(self) -> str:
        return ("set VAST_API_KEY (or save the key in $XDG_CONFIG_HOME/vastai/vast_api_key "
                "or ~/.vast_api_key)")

    def said(self, data: Any, body: str) -> str:
        if isinstance(data, Mapping) and (data.get("msg") or data.get("error")):
            return " ".join(str(data[k]) for k in ("error", "msg") if data.get(k))
        return super().said(data, body)

    def kind_from_body(self, data: Any) -> ErrorKind | None:
        if isinstance(data, Mapping) and data.get("success") is False:
            return _vast_kind(f"{data.get('error', '')} {data.get('msg', '')}")
        return None

    def failure_in(self, data: Any) -> tuple[ErrorKind, str] | None:
        if isinstance(data, Mapping) and data.get("success") is False:
            return self.kind_from_body(data) or "bad_answer", self.said(data, "")
        return None

    async def get(self, instance_id: str) -> InstanceInfo:
        subject = f"instance {instance_id}"
        data = await self.call("GET", f"/api/v0/instances/{quote(instance_id, safe='')}/",
                               subject=subject, instance_id=instance_id)
        obj = table(data).get("instances")
        if not isinstance(data, Mapping) or "instances" not in data or \
                (obj is not None and not isinstance(obj, Mapping)):
            raise self.error("bad_answer", subject, "the answer has no 'instances' object",
                             instance_id=instance_id)
        if not obj:
            raise self.error("not_found", subject, "not found (the API answered no instance)",
                             instance_id=instance_id)
        return vast_info(obj, instance_id)

    async def list(self) -> list[InstanceInfo]:
        found: list[InstanceInfo] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {"limit": PAGE_LIMIT}
            if token:
                params["after_token"] = token
            data = await self.call("GET", "/api/v1/instances/", subject="instance list",
                                   params=params)
            page = table(data).get("instances")
            if not isinstance(page, list) or not all(
                    isinstance(o, Mapping) and o.get("id") is not None for o in page):
                raise self.error("bad_answer", "instance list",
                                 "the answer has no 'instances' list of objects with ids")
            found.extend(vast_info(obj) for obj in page)
            next_token = table(data).get("next_token")
            if not next_token or not page:
                return found
            if next_token == token:
                raise self.error("bad_answer", "instance list",
                                 f"paging is stuck on after_token {next_token!r}")
            token = str(next_token)
        raise self.error("bad_answer", "instance list", f"more than {MAX_PAGES} pages")

    def _one(self, instance_id: str) -> str:
        return f"/api/v0/instances/{quote(instance_id, safe='')}/"

    async def _set_state(self, instance_id: str, state: str, verb: str) -> None:
        await self.act("PUT", self._one(instance_id), subject=f"instance {instance_id} ({verb})",
                       instance_id=instance_id, body={"state": state})

    async def stop(self, instance_id: str) -> None:
        """Ask for the stopped state: the GPU is released, the disk stays billed."""
        await self._set_state(instance_id, "stopped", "stop")

    async def start(self, instance_id: str) -> None:
        """Ask for the running state: subject to the GPU still being free."""
        await self._set_state(instance_id, "running", "start")

    async def destroy(self, instance_id: str) -> None:
        """Delete the instance and its disk: nothing is billed afterwards."""
        await self.act("DELETE", self._one(instance_id),
                       subject=f"instance {instance_id} (destroy)", instance_id=instance_id)
