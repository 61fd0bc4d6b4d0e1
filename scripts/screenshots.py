"""Write the panel's screenshots (SVG, and PNG where rsvg-convert exists) into screenshots/.

    python scripts/screenshots.py [--out DIR] [--no-png]

The demo fleet frozen by tui.demo.stills (fixed clock, pids and liveness;
no SSH, no network) is shown by the real app through `run_test`. Everything
the panel could write (ledger, journal) and every XDG dir and HOME point into
a temp dir that is removed afterwards, so the user's own files are never read
or touched. Two runs give byte-identical SVGs (tests/ui/test_screenshots.py
checks that the committed ones are current).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "screenshots"
TITLE = "gpurent-tui"
DETAIL_RUN = "rects-yolox-n"  # a running run with history: the chart has something to draw


@dataclass(frozen=True)
class Shot:
    name: str
    size: tuple[int, int]
    keys: tuple[str, ...] = ()
    open_run: str | None = None  # focus this run (j...) and press enter first


SHOTS = (
    Shot("fleet-120x36", (120, 36)),
    Shot("fleet-80x24", (80, 24)),
    Shot("run-detail-120x36", (120, 36), open_run=DETAIL_RUN),
    Shot("help-120x36", (120, 36), keys=("question_mark",)),
    Shot("cost-120x36", (120, 36), keys=("c",)),
)


def pin_environment(home: Path) -> None:
    """Same picture on every machine: UTC, no colour or theme overrides, no real home.

    Must run before Textual is imported (it reads its settings at import)."""
    for var in [v for v in os.environ if v.startswith("TEXTUAL")] + ["NO_COLOR", "FORCE_COLOR"]:
        os.environ.pop(var, None)
    os.environ["TEXTUAL_ANIMATIONS"] = "none"
    os.environ["TZ"] = "UTC"
    time.tzset()
    os.environ["HOME"] = str(home)
    for kind in ("CONFIG", "DATA", "STATE", "CACHE"):
        os.environ[f"XDG_{kind}_HOME"] = str(home / kind.lower())
    os.environ.pop("GPURENT_CONFIG", None)


def normalize(svg: str, name: str) -> str:
    """Rich names the SVG's CSS classes `terminal-<adler32 of the segments>`: a content hash
    (so already stable), replaced by the shot's name so that ids stay readable and a change
    in how Rich hashes can never churn the files."""
    return re.sub(r"terminal-\d+", f"terminal-{name}", svg)


async def take(shot: Shot, work: Path) -> str:
    """One screenshot of the app over the demo stills, as SVG text."""
    from tui.app import GpurentApp
    from tui.demo.stills import NOW, still_facts, still_fleet, still_ledger, still_states
    from tui.providers.meter import CostMeter
    from tui.screens.fleet import FleetScreen
    from tui.store.journal import Journal
    from tui.store.ledger import Ledger

    state = work / shot.name
    state.mkdir()
    ledger = Ledger(state / "ledger.jsonl")
    for event in still_ledger():
        ledger.record(event)
    fleet = still_fleet()
    meter = CostMeter(fleet, ledger=ledger, clock=lambda: NOW)
    meter.facts = dict(still_facts())
    app = GpurentApp(fleet, states=still_states(), live=False, clock=lambda: NOW, meter=meter,
                     journal=Journal(state / "journal.jsonl"))
    async with app.run_test(size=shot.size) as pilot:
        await pilot.pause()
        if shot.open_run is not None:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            for _ in range(20):
                key = screen.cursor()
                run = app.states[key[0]].run(key[1]) if key else None
                if run is not None and run.name == shot.open_run:
                    break
                await pilot.press("j")
            else:
                raise SystemExit(f"run {shot.open_run} not found in the fleet screen")
            await pilot.press("enter")
        if shot.keys:
            await pilot.press(*shot.keys)
        await pilot.pause()
        return normalize(app.export_screenshot(title=TITLE), shot.name)


def to_png(svg: Path) -> Path | None:
    """A PNG beside the SVG via rsvg-convert, if it is installed.

    rsvg drops leading and trailing spaces of each <text> (" 5 " after "running"
    becomes "5"): it is fed a copy marked xml:space="preserve", which renders
    the cells as the terminal does; the SVG itself stays as Textual wrote it."""
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return None
    png = svg.with_suffix(".png")
    text = svg.read_text(encoding="utf-8").replace("<svg ", '<svg xml:space="preserve" ', 1)
    subprocess.run([tool, "--format", "png", "--output", str(png)], input=text.encode(),
                   check=True)
    return png


async def write_all(out: Path, shots: Sequence[Shot], png: bool) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="gpurent-shots-") as tmp:
        for shot in shots:
            path = out / f"{shot.name}.svg"
            path.write_text(await take(shot, Path(tmp)), encoding="utf-8")
            written.append(path)
            if png and (picture := to_png(path)) is not None:
                written.append(picture)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder (default {OUT})")
    parser.add_argument("--no-png", action="store_true", help="SVG only")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    home = Path(tempfile.mkdtemp(prefix="gpurent-shots-home-"))
    try:
        pin_environment(home)
        sys.path.insert(0, str(ROOT))  # the checkout's tui, installed or not
        for path in asyncio.run(write_all(out, SHOTS, png=not args.no_png)):
            print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
