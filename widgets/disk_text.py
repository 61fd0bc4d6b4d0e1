"""A box's disk at the end of its running runs, as its header shows it. Pure Rich Text from
the sizing model's projection (no markup is ever parsed; box-given names are cleaned)."""

from __future__ import annotations

from rich.text import Text

from tui.model.sizing import DiskProjection, human_bytes
from widgets.fleet_text import clean


def projection_items(projection: DiskProjection) -> tuple[Text, ...]:
    """`→ 43% at runs' end`, or `✗ disk fills before the runs end: 3.6 TB to write, 75 GB
    free` in red; one item per runs filesystem a running run writes to (named when the
    box has several), none without a running run to project."""
    several = len(projection.filesystems) > 1
    items = []
    for fs in projection.filesystems:
        where = f"{clean(fs.where)} " if several else ""
        if fs.fills:
            items.append(Text(f"✗ disk {where}fills before the runs end: "
                              f"{human_bytes(fs.need)} to write, {human_bytes(fs.free)} free",
                              style="bold red"))
        else:
            items.append(Text(f"→ {where}{fs.end_pct}% at runs' end",
                              style="yellow" if fs.end_pct >= 90 else "dim"))
    return tuple(items)
