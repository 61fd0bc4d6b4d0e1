"""What reading a Beam app costs gpurent-tui, apart from Beam itself.

Two figures: the parse of the largest answers the adapter accepts (a `beam ls` table
and a `deployment list` JSON array, each just under the 4 MiB cap), which bounds the
CPU one hostile or huge answer can take; and one `app_state` and one `list_volume`
against the stand-in CLI (tests/support/bin/beam), which is the adapter's own
subprocess and parsing overhead. The real CLI adds its Python start-up, its own
version check against Beam's API and the gateway's answer; that is not measured here.

    python benchmarks/beam_cli.py
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _path in (str(REPO / "tests"), str(REPO)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tui.model import beam_output  # noqa: E402
from tui.providers import beam_cli  # noqa: E402

BIN = REPO / "tests" / "support" / "bin"


def big_table(rows: int) -> str:
    """A `beam ls` table of `rows` files, laid out as the CLI draws it."""
    names = [f"epoch_{i:06d}_checkpoint_weights.pt" for i in range(rows)]
    width = max(len(n) for n in names)
    header = "  " + "Name".ljust(width) + "        Size   Modified Time   IsDir  "
    out = [" " * (width + 40), header, " " + "─" * (width + 38) + " "]
    for name in names:
        out.append("  " + name.ljust(width) + "   12.00 MiB   3 hours ago     No     ")
    out += ["", f"  {rows} items | 1.00 GiB used", ""]
    return "\n".join(out)


def timed(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


async def standin_calls(rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        volume = Path(tmp) / "vol" / "runs"
        for i in range(20):
            (volume / f"exp{i}").mkdir(parents=True)
        state = Path(tmp) / "state.json"
        state.write_text(json.dumps({
            "version": "0.2.207", "logged_in": True, "volumes": {"cache": str(volume.parent)},
            "deployments": [{"id": "d-1", "name": "trainer", "active": True, "version": 1,
                             "stub_id": "s-1"}],
            "tasks": [{"id": "t-1", "status": "RUNNING", "stub_id": "s-1",
                       "started_at": "2026-12-05T06:00:00Z"}]}))
        env = dict(os.environ, GPURENT_STANDIN_STATE=str(state),
                   PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        await beam_cli.app_state("trainer", env=env)  # the version check, once
        states, lists = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            await beam_cli.app_state("trainer", env=env)
            states.append(time.perf_counter() - start)
            start = time.perf_counter()
            await beam_cli.list_volume("cache", "runs", env=env)
            lists.append(time.perf_counter() - start)
        return statistics.median(states), statistics.median(lists)


def main() -> None:
    cpu = platform.processor() or platform.machine()
    print(f"# beam_cli benchmark on {platform.node()} ({cpu}, Python {platform.python_version()})")
    rows = 50_000
    table = big_table(rows)
    while len(table.encode()) > beam_cli.STDOUT_CAP:
        rows -= 2_000
        table = big_table(rows)
    now = time.time()
    parse = timed(lambda: beam_output.ls_entries(table, "runs", now))
    print(f"ls table, {rows} rows, {len(table.encode()) / 2**20:.2f} MiB: "
          f"{parse * 1000:.0f} ms to parse")
    records = [{"id": f"{i:08d}-6d7c-417b-ac7b-0b92aa0a5572", "name": f"app-{i % 50}",
                "active": True, "version": i, "stub_id": f"stub-{i}",
                "created_at": "2026-12-05T06:00:00Z"} for i in range(20_000)]
    text = json.dumps(records, indent=2)
    while len(text.encode()) > beam_cli.STDOUT_CAP:
        records = records[:-1000]
        text = json.dumps(records, indent=2)
    parse = timed(lambda: beam_output.app_state("app-7", beam_output.json_list(text), []))
    print(f"deployment list JSON, {len(records)} records, {len(text.encode()) / 2**20:.2f} MiB: "
          f"{parse * 1000:.0f} ms to parse and fold")
    state_s, list_s = asyncio.run(standin_calls(10))
    print(f"app_state against the stand-in (2 CLI runs): {state_s * 1000:.0f} ms median of 10")
    print(f"list_volume against the stand-in (1 CLI run, 20 rows): {list_s * 1000:.0f} ms median"
          " of 10")


if __name__ == "__main__":
    main()
