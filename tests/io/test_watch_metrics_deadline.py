"""A scrape that cannot get the fleet from watch's event loop in time fails as a scrape:
an HTTP 5xx (Prometheus' `up` reads 0, so GpurentWatchDown can fire), never a 200 with
every series gone; watch's log says so once, and the next scrape is answered again.
In-process: a real Watch on this test's loop, its scrape deadline shortened, the loop
blocked by this test past it while a scraper waits."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from support.fleets import make_fleet
from support.prometheus import free_port

from tui.runtime.watch_sink import Watch

DEADLINE = 0.5  # seconds a scrape waits for the loop (watch's own: 10)


def _scrape(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_a_scrape_past_the_deadline_is_a_failed_scrape_said_once(
        tmp_path: Path, isolated_dirs: Path) -> None:
    fleet = make_fleet(tmp_path, [{"name": "down", "host": "127.0.0.1", "port": free_port()}])
    lines: list[str] = []
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
        url = watch.metrics_server.url
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
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    failed = [line for line in lines if "scrape" in line and "503" in line]
    assert len(failed) == 1, lines
    assert f"{DEADLINE:g} s" in failed[0], failed
    assert any(line == "watch: metrics: scrapes answered again" for line in lines), lines
