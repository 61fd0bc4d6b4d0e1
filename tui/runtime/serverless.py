"""Serverless entries polled through their provider's CLI: one poll reads the app's state,
lists the runs root on the volume and reads each recent run's status.json and weights.

tui.providers.serverless.ADAPTERS is the one place a provider is wired in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import ModuleType
from typing import Any

from tui.model.config import FleetConfig, ServerlessConfig
from tui.model.serverless import ServerlessError, VolumeEntry
from tui.model.serverless_runs import (
    STATUS_LIMIT,
    ServerlessState,
    VolumeRead,
    app_problem,
    at_rest,
    fold_runs,
    run_folders,
)
from tui.model.serverless_view import carry_stop, settle_runs
from tui.providers.serverless import adapter, cli_options, volume_join

SERVERLESS_POLL_SECONDS = 30.0
CALL_TIMEOUT = 30.0  # one CLI call
READS_AT_ONCE = 4  # CLI processes one entry runs at a time
async def _read_run(api: ModuleType, entry: ServerlessConfig, folder: VolumeEntry,
                    options: dict[str, Any], timeout: float) -> VolumeRead:
    """One run folder: its status.json and its weights/ listing (either may be missing).
    Read by the name the CLI printed; shown by its cleaned one."""
    path = folder.raw_path or folder.path
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
    return VolumeRead(folder.path, status, status_error, weights, weights_error)


async def _volume_missing(api: ModuleType, entry: ServerlessConfig,
                          options: dict[str, Any], timeout: float) -> bool:
    """Whether the volume itself is not there (its root cannot be listed either), once
    its runs root was not found: a wrong `volume` is a problem, a runs root not made yet
    is not."""
    if entry.runs_path.strip("/") == "":
        return True
    try:
        await api.list_volume(entry.volume, "/", timeout=timeout, **options)
    except ServerlessError as exc:
        return exc.kind == "path_missing"
    return False


async def poll_entry(entry: ServerlessConfig, previous: ServerlessState | None,
                     clock: Callable[[], float], *, env: Mapping[str, str] | None = None,
                     timeout: float = CALL_TIMEOUT) -> ServerlessState:
    """One look at an entry. A failure keeps what was read before (marked by `error`):
    the row says why, and shows the last good picture beside it."""
    state = previous or ServerlessState(name=entry.name, provider=entry.provider)
    options = cli_options(entry, env)
    try:
        api = adapter(entry.provider)
        app = carry_stop(state.app, await api.app_state(entry.app, timeout=timeout,
                                                        **options), clock())
    except ServerlessError as exc:
        return replace(state, error=str(exc), error_kind=exc.kind, checked_at=clock())
    runs_error = None
    problem: str | None = None
    try:
        listing = await api.list_volume(entry.volume, entry.runs_path, timeout=timeout,
                                        **options)
    except ServerlessError as exc:
        if exc.kind != "path_missing":
            return replace(state, app=app, error=str(exc), error_kind=exc.kind,
                           checked_at=clock(), ok_at=clock())
        listing = []
        if await _volume_missing(api, entry, options, timeout):
            problem = f"volume {entry.volume} is missing ({exc}): check `volume` in the config"
        else:
            runs_error = f"no {entry.runs_path} on volume {entry.volume} yet ({exc})"
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def read(folder: VolumeEntry) -> VolumeRead:
        async with gate:
            return await _read_run(api, entry, folder, options, timeout)

    folders = run_folders(listing)
    reads = await asyncio.gather(*(read(f) for f in folders))
    now = clock()
    folded = fold_runs(state.runs, reads, entry.runs_path, now)
    # judged on the runs as they say, before settle_runs reads a live one dead
    problem = "; ".join(p for p in (app_problem(app, folded), problem) if p) or None
    app = at_rest(app, folded)
    runs = settle_runs(folded, app)
    return ServerlessState(name=entry.name, provider=entry.provider, app=app, runs=runs,
                           error=None, error_kind=None, checked_at=now, ok_at=now,
                           runs_error=runs_error, problem=problem,
                           raw_paths=tuple((f.path, f.raw_path) for f in folders
                                           if f.raw_path is not None))


async def poll_all(fleet: FleetConfig, clock: Callable[[], float], *,
                   env: Mapping[str, str] | None = None) -> list[ServerlessState]:
    """Every entry once, in parallel (`status`)."""
    return list(await asyncio.gather(*(poll_entry(e, None, clock, env=env)
                                       for e in fleet.serverless)))
