"""The journal (`J`) scrolls from the keyboard: at 80x24 one push's words fill the screen,
and the panel focuses nothing by itself (AUTO_FOCUS = None)."""

from __future__ import annotations

from pathlib import Path

from support.panel_states import CONFIG, NOW, fleet_states
from support.pilot import until
from textual.containers import VerticalScroll

from tui.app import GpurentApp
from tui.model.config import parse_config
from tui.screens.journal import JournalScreen
from tui.store.journal import Journal


async def test_the_journal_scrolls_with_page_down_at_80x24(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    for n in range(12):
        journal.record(box="vast-4090", action="stop", outcome="done", at=NOW - 60 * n,
                       message=f"stop {n}: stopped box vast-4090; the disk still bills")
    app = GpurentApp(parse_config(CONFIG, "fleet.toml"), states=fleet_states(), live=False,
                     clock=lambda: NOW, journal=journal)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("J")
        await until(pilot, lambda: isinstance(app.screen, JournalScreen))
        page = app.screen.query_one(VerticalScroll)
        assert page.max_scroll_y > 0
        await pilot.press("pagedown")
        await until(pilot, lambda: page.scroll_y > 0, timeout=5)
