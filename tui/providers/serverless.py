"""The serverless adapters by provider: `adapter(provider)` is the one place a provider is
wired in, a module under tui/providers/ exposing app_state, list_volume,
read_volume_file, fetch_volume_file and stop_app (the contract in
tui/model/serverless.py)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from tui.model.config import ServerlessConfig
from tui.model.serverless import ServerlessError

# provider -> its adapter's module: wiring a provider in is one line here.
ADAPTERS = {
    "modal": "tui.providers.modal_cli",
    "beam": "tui.providers.beam_cli",
}


def adapter(provider: str) -> ModuleType:
    """The provider's adapter module; cli_missing when this build has none."""
    name = ADAPTERS.get(provider)
    try:
        if name is None:
            raise ImportError(provider)
        return importlib.import_module(name)
    except ImportError:
        raise ServerlessError("cli_missing", f"{provider}: no adapter in this build of "
                              "gpurent-tui") from None


def cli_options(entry: ServerlessConfig, env: Mapping[str, str] | None) -> dict[str, Any]:
    """The keyword arguments every adapter call takes: the CLI (when set) and the env."""
    options: dict[str, Any] = {"env": env}
    if entry.cli:
        options["cli"] = entry.cli
    return options


def volume_join(*parts: str) -> str:
    """A path on the volume: '/'-joined, no leading or doubled '/'."""
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


