"""A scrape that cannot get the fleet from watch's event loop in time fails as a scrape:
an HTTP 5xx (Prometheus' `up` reads 0, so GpurentWatchDown can fire), never a 200 with
every series gone; watch's log says so once, and the next scrape is answered again.
In-process: a real Watch on this test's loop, its scrape deadline shortened, the loop
blocked by this test past it while a scraper waits (urllib, then a real Prometheus whose
`up` drops to 0 and whose GpurentWatchDown goes pending)."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from support.fleets import make_fleet
from support.prometheus import Prometheus, free_port
from support.prometheus import need as need_tool

from tui.runtime.watch_sink import Watch

DEADLINE = 0.5  # seconds a scrape waits for the loop (watch's own: 10)


def _scrape(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@asynccontextmanager
async def _watching(tmp_path: Path, lines: list[str]) -> AsyncIterator[str]:
    """A real Watch over one box down, serving /metrics with the short deadline, on this
    test's loop; yields its URL and stops it (cleanly) at the end."""
    fleet = make_fleet(tmp_path, [{"name": "down", "host": "127.0.0.1", "port": free_port()}])
    watch = Watch(fleet, log=lines.append, metrics=("127.0.0.1", 0),
                  metrics_deadline=DEADLINE)
    stop = asyncio.Event()
    task = asyncio.create_task(watch.run(stop))
    try:
        for _ in range(400):
            if watch.metrics_server is not None or task.done():
                break
            await asyncio.sleep(0.025)
        assert watch.metrics_server is not None, lines
        yield watch.metrics_server.url
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0, lines


async def test_a_scrape_past_the_deadline_is_a_failed_scrape_said_once(
        tmp_path: Path, isolated_dirs: Path) -> None:
    lines: list[str] = []
    async with _watching(tmp_path, lines) as url:
        status, text = await asyncio.to_thread(_scrape, url)
        assert status == 200 and 'gpurent_box_up{box="down"' in text, text

        answers: list[tuple[int, str]] = []
        scraper = threading.Thread(target=lambda: answers.extend(
            _scrape(url) for _ in range(2)))  # two scrapes while the loop is stuck
        scraper.start()
        time.sleep(4 * DEADLINE + 0.5)  # blocks this loop, watch's: nothing on it runs
        await asyncio.to_thread(scraper.join, 30)
        assert [code for code, _ in answers] == [503, 503], answers
        assert all("gpurent_box_up" not in body for _, body in answers), answers

        status, text = await asyncio.to_thread(_scrape, url)  # the loop is free again
        assert status == 200 and 'gpurent_box_up{box="down"' in text, text
    failed = [line for line in lines if "scrape" in line and "503" in line]
    assert len(failed) == 1, lines
    assert f"{DEADLINE:g} s" in failed[0], failed
    assert any(line == "watch: metrics: scrapes answered again" for line in lines), lines


async def test_a_real_prometheus_reads_a_stuck_watch_as_down(
        tmp_path: Path, isolated_dirs: Path) -> None:
    """Prometheus scrapes every second (its timeout 1 s, the watch's deadline 0.5 s): while
    the loop is stuck its `up` reads 0 and GpurentWatchDown is on its way; then 1 again."""
    binary = need_tool("prometheus")
    lines: list[str] = []
    async with _watching(tmp_path, lines) as url:
        prom = Prometheus(binary, tmp_path, url.removeprefix("http://").split("/")[0])
        try:
            def up() -> list[float]:
                return list(prom.query('up{job="gpurent"}').values())

            await asyncio.to_thread(prom.until, "the watch up", lambda: up() == [1.0])
            seen = threading.Event()

            def down_and_paging() -> None:
                prom.until("the stuck watch down", lambda: up() == [0.0] and bool(
                    prom.query('ALERTS{alertname="GpurentWatchDown"}')))
                seen.set()

            looker = threading.Thread(target=down_and_paging, daemon=True)
            looker.start()
            assert seen.wait(60), "Prometheus never read the stuck watch as down"  # blocks
            await asyncio.to_thread(prom.until, "the watch up again", lambda: up() == [1.0])
        finally:
            prom.close()
