"""Sizes the panel shows read in the one byte format (tui/model/sizing.human_bytes): the
destroy dialog says 22.9 MB where the weights list says it (not 23 MB), the journal 2.5 GB
(not 2500.0 MB)."""

from __future__ import annotations

from pathlib import Path

from support.panel_states import CONFIG, NOW, fixed_meter, fleet_states

from tui.app import GpurentApp
from tui.model.config import parse_config
from tui.model.sizing import human_bytes
from tui.screens.confirm import DestroyScreen
from tui.screens.fleet import FleetScreen
from tui.screens.journal import journal_table


async def test_the_destroy_dialog_sizes_each_run_as_the_run_detail_does(tmp_path: Path
                                                                        ) -> None:
    # An instance id, so the provider can be told what to destroy: the dialog opens.
    config = CONFIG.replace('provider = "vast"\n', 'provider = "vast"\ninstance_id = "1"\n', 1)
    app = GpurentApp(parse_config(config, "sizes.toml"), states=fleet_states(), live=False,
                     clock=lambda: NOW,
                     meter=fixed_meter(tmp_path / "ledger.jsonl"))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        fleet.confirm_destroy("vast-4090")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, DestroyScreen)
        sizes = [human_bytes(sum(w.size for w in run.weights))
                 for run in app.states["vast-4090"].runs]
        assert sizes and all(size.endswith(" MB") for size in sizes)
        for line, size in zip(dialog.losses, sizes, strict=True):
            assert line.endswith(f"checkpoint files, {size})"), line


def test_the_journal_sizes_a_push_in_the_same_format() -> None:
    from rich.console import Console

    entry = {"time": NOW, "box": "b", "run": "r", "action": "push", "outcome": "done",
             "files": [{"path": "weights/last.pt", "size": 2_500_000_000}], "verified": True,
             "destination": "hf://me/runs/r/", "message": ""}
    console = Console(width=200, record=True)
    console.print(journal_table([entry]))
    assert "1 files, 2.5 GB -> hf://me/runs/r/" in console.export_text()  # not 2500.0 MB
