"""Serverless entries polled through their provider's CLI: one poll reads the app's state,
lists the runs root on the volume and reads each recent run's status.json and weights.

`adapter(provider)` is the one place a provider is wired in: a module under
tui/providers/ exposing app_state, list_volume, read_volume_file, fetch_volume_file and
stop_app (the shared contract in tui/model/serverless.py).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import ModuleType
from typing import Any

from tui.model.config import FleetConfig, ServerlessConfig
from tui.model.serverless import ServerlessError
from tui.model.serverless_runs import (
    STATUS_LIMIT,
    ServerlessState,
    VolumeRead,
    fold_runs,
    run_folders,
)

SERVERLESS_POLL_SECONDS = 30.0
CALL_TIMEOUT = 30.0  # one CLI call
READS_AT_ONCE = 4  # CLI processes one entry runs at a time
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


async def _read_run(api: ModuleType, entry: ServerlessConfig, path: str,
                    options: dict[str, Any], timeout: float) -> VolumeRead:
    """One run folder: its status.json and its weights/ listing (either may be missing)."""
    status: bytes | None = None
    status_error = weights_error = None
    weights = ()
    try:
        status = await api.read_volume_file(entry.volume, volume_join(path, "status.json"),
                                            limit=STATUS_LIMIT, timeout=timeout, **options)
    except ServerlessError as exc:
        if exc.kind != "path_missing":
            status_error = str(exc)
    try:
        weights = tuple(await api.list_volume(entry.volume, volume_join(path, "weights"),
                                              timeout=timeout, **options))
    except ServerlessError as exc:
        if exc.kind != "path_missing":
            weights_error = str(exc)
    return VolumeRead(path, status, status_error, weights, weights_error)


async def poll_entry(entry: ServerlessConfig, previous: ServerlessState | None,
                     clock: Callable[[], float], *, env: Mapping[str, str] | None = None,
                     timeout: float = CALL_TIMEOUT) -> ServerlessState:
    """One look at an entry. A failure keeps what was read before (marked by `error`):
    the row says why, and shows the last good picture beside it."""
    state = previous or ServerlessState(name=entry.name, provider=entry.provider)
    options = cli_options(entry, env)
    try:
        api = adapter(entry.provider)
        app = await api.app_state(entry.app, timeout=timeout, **options)
    except ServerlessError as exc:
        return replace(state, error=str(exc), error_kind=exc.kind, checked_at=clock())
    runs_error = None
    try:
        listing = await api.list_volume(entry.volume, entry.runs_path, timeout=timeout,
                                        **options)
    except ServerlessError as exc:
        if exc.kind != "path_missing":
            return replace(state, app=app, error=str(exc), error_kind=exc.kind,
                           checked_at=clock(), ok_at=clock())
        runs_error = f"no {entry.runs_path} on volume {entry.volume} yet ({exc})"
        listing = []
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def read(path: str) -> VolumeRead:
        async with gate:
            return await _read_run(api, entry, path, options, timeout)

    reads = await asyncio.gather(*(read(f.path) for f in run_folders(listing)))
    now = clock()
    runs = fold_runs(state.runs, reads, entry.runs_path, now)
    return ServerlessState(name=entry.name, provider=entry.provider, app=app, runs=runs,
                           error=None, error_kind=None, checked_at=now, ok_at=now,
                           runs_error=runs_error)


async def poll_all(fleet: FleetConfig, clock: Callable[[], float], *,
                   env: Mapping[str, str] | None = None) -> list[ServerlessState]:
    """Every entry once, in parallel (`status`)."""
    return list(await asyncio.gather(*(poll_entry(e, None, clock, env=env)
                                       for e in fleet.serverless)))
