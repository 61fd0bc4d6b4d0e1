"""The layering at run time: each module imported alone, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loaded_after_import(modules: list[str]) -> dict[str, set[str]]:
    """One fresh interpreter per module: what one loads must not hide behind another."""
    code = "import importlib, sys; importlib.import_module(sys.argv[1]); print(*sys.modules)"
    return {module: set(subprocess.run([sys.executable, "-c", code, module], cwd=ROOT,
                                       check=True, capture_output=True, text=True).stdout.split())
            for module in modules}


def test_core_and_io_load_no_textual_at_run_time() -> None:
    """A jump host running `gpurent-tui status` never pays for importing Textual."""
    modules = ["tui.model.box", "tui.model.status_doc", "tui.store.journal",
               "tui.remote.watch", "tui.providers.meter", "tui.actions.flows", "tui.__main__",
               "tui.cli.main"]
    for module, loaded in loaded_after_import(modules).items():
        assert "textual" not in {n.split(".")[0] for n in loaded}, module
        assert not {n for n in loaded if n.startswith(("tui.app", "tui.screens", "widgets"))}


def test_widgets_never_import_beyond_the_model() -> None:
    loaded = loaded_after_import(["widgets"])["widgets"]
    assert not {n for n in loaded if n.startswith("tui.") and not n.startswith("tui.model")}
