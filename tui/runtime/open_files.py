"""The process's open-files limit, raised for a large fleet at start.

Every box reached directly holds one socket, every jump host one more; a
thousand boxes pass the soft limit most systems start a process with (1024).
The soft limit may be raised to the hard one by the process itself, so the
panel, `status` and `watch` do that at start, and say in one line when the
fleet needs more than even the hard limit allows (tui.model.fanout estimates).
"""

from __future__ import annotations

import resource

from tui.model.config import FleetConfig
from tui.model.fanout import BoxRoute, files_needed, files_warning, soft_limit_wanted

# macOS refuses a soft RLIMIT_NOFILE over OPEN_MAX even where the hard limit says
# unlimited: the next best is this.
_OPEN_MAX = 10240


def fleet_files_needed(fleet: FleetConfig) -> int:
    """The open files `fleet` needs (tui.model.fanout.files_needed)."""
    return files_needed((BoxRoute(b.jump, b.provider) for b in fleet.boxes), fleet.connect)


def raise_open_files(fleet: FleetConfig) -> str | None:
    """Raise the soft open-files limit to the hard one; the line to show when the fleet
    needs more than that (None when it fits)."""
    needed = fleet_files_needed(fleet)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = None if hard == resource.RLIM_INFINITY else hard
    wanted = soft_limit_wanted(soft, cap, needed)
    if wanted != soft:
        for target in (wanted, min(wanted, _OPEN_MAX)):
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (ValueError, OSError):
                continue
            break
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return files_warning(needed, soft, cap, len(fleet.boxes))
