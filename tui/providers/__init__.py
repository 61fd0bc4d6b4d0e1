"""Provider adapters: what Vast.ai, RunPod and Lambda say about an instance, and stop,
start and destroy it.

I/O only, no Textual. make_client picks the adapter, its base URL (the
config's [providers.NAME] base_url, else for Vast $VAST_URL, else the
provider's own) and its key (environment or the provider CLI's key file,
never the config). A missing key is reported by the first call, as a
ProviderError of kind "no_key", so it lands where every other failure does.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from tui.model.config import FleetConfig
from tui.providers.base import (
    KINDS,
    ErrorKind,
    InstanceInfo,
    PowerClient,
    ProviderClient,
    ProviderError,
    Sleep,
)
from tui.providers.lambda_cloud import LambdaClient
from tui.providers.runpod import RunPodClient
from tui.providers.vast import VastClient

ADAPTERS: dict[str, type[VastClient] | type[RunPodClient] | type[LambdaClient]] = {
    "vast": VastClient, "runpod": RunPodClient, "lambda": LambdaClient}

__all__ = ["ADAPTERS", "KINDS", "ErrorKind", "InstanceInfo", "LambdaClient", "PowerClient",
           "ProviderClient", "ProviderError", "RunPodClient", "VastClient", "make_client"]


def make_client(provider: str, fleet: FleetConfig, *, env: Mapping[str, str] | None = None,
                timeout: float = 10.0, sleep: Sleep = asyncio.sleep,
                max_tries: int = 5) -> PowerClient:
    """The adapter for `provider`; ValueError for a provider without an API ("manual")."""
    adapter = ADAPTERS.get(provider)
    if adapter is None:
        raise ValueError(f"no API adapter for provider {provider!r} "
                         f"(adapters: {', '.join(ADAPTERS)})")
    env = os.environ if env is None else env
    base_url = fleet.providers.get(provider) or adapter.url_from(env)
    client: PowerClient = adapter(base_url, adapter.find_key(env), timeout=timeout,
                                     sleep=sleep, max_tries=max_tries,
                                     at_once=fleet.connect.per_provider)
    return client
