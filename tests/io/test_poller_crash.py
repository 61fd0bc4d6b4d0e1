"""A provider poller that raises (a bug, not a provider's error) says so on each provider
box's line and is started again: the money never freezes silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.pilot import box_text, until
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd

from tui.app import GpurentApp
from tui.model.config import FleetConfig
from tui.providers.meter import CostMeter


class FlakyMeter(CostMeter):
    """The real meter, whose first poll raises inside the poller's worker."""

    polls = 0

    async def poll(self) -> None:
        self.polls += 1
        if self.polls == 1:
            raise RuntimeError("the rates broke")
        await super().poll()


async def test_a_crashed_provider_poller_is_shown_and_restarted(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    vast = VastServer("vast-secret-key", [vast_instance(12345678)])
    vast.start()
    try:
        server = sshd_factory()
        root = runs_root_with(tmp_path, "yolox_completed")
        fleet: FleetConfig = make_fleet(tmp_path, [
            box_entry(server, client_key, "vast-box", runs_roots=[str(root)], provider="vast",
                      instance_id="12345678")], known_hosts=[server.known_hosts_line()],
            providers={"vast": {"base_url": vast.url}})
        meter = FlakyMeter(fleet)
        app = GpurentApp(fleet, meter=meter)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: "provider poller crashed" in box_text(app, "vast-box"))
            assert "provider poller crashed: RuntimeError: the rates broke; restarted in" \
                in box_text(app, "vast-box")
            # Started again after its backoff: the next poll reads the rates, and the line
            # no longer says it crashed.
            await until(pilot, lambda: meter.polls >= 2 and "provider poller crashed"
                        not in box_text(app, "vast-box"), timeout=30)
            assert app.cost is not None and app.cost.boxes["vast-box"].rates.running is not None
    finally:
        vast.close()


async def test_watch_shows_a_crashed_poller_on_the_boxes_and_restarts_it(
        tmp_path: Path, isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`watch` runs the same runtime: each provider box's money says the poller crashed,
    the log says when it starts again, and the next poll reads the rates (it only logged
    the crash before, and the boxes' money kept its last picture as if nothing broke)."""
    import asyncio

    from tui.runtime.events import CostChanged, Event
    from tui.runtime.watch_sink import Watch
    from tui.store.journal import Journal

    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    vast = VastServer("vast-secret-key", [vast_instance(12345678)])
    vast.start()
    try:
        fleet = make_fleet(tmp_path, [{"name": "vast-box", "host": "127.0.0.1", "port": 1,
                                       "provider": "vast", "instance_id": "12345678"}],
                           providers={"vast": {"base_url": vast.url}})
        meter = FlakyMeter(fleet)
        logs: list[str] = []
        watch = Watch(fleet, journal=Journal(tmp_path / "journal.jsonl"), meter=meter,
                      log=logs.append)
        marked: list[str | None] = []  # what each money picture says of the box
        sink = watch.runtime.sink

        def tee(item: Event) -> None:
            if isinstance(item, CostChanged):
                marked.append(item.cost.boxes["vast-box"].provider_error)
            sink(item)

        watch.runtime.sink = tee
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            async with asyncio.timeout(60):
                while not (meter.polls >= 2 and marked and marked[-1] is None):
                    await asyncio.sleep(0.1)
        finally:
            stop.set()
            assert await task == 0
    finally:
        vast.close()
    assert any(line.startswith("providers: poll failed (RuntimeError: the rates broke); "
                               "restarted in") for line in logs), logs
    crashed = [m for m in marked if m and "provider poller crashed" in m]
    assert crashed and crashed[0].startswith(
        "provider poller crashed: RuntimeError: the rates broke; restarted in"), marked
