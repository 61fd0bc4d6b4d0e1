"""A stand-in nvidia-smi on a test box's PATH, printing recorded answers per query.

The answers live in tests/data/nvidia-smi/<scenario>/: `base.csv` (the check's
main --query-gpu), `event.csv` / `throttle.csv` (clock reasons under the new and
the old field name), `compute_cap.csv`, `remapped.csv` (--query-remapped-rows),
`pcie.csv` (the link read under load). A `<query>.err` file instead makes that
query fail the way nvidia-smi does (message on stderr, exit 2), as an older
driver does for a field it does not know.
"""

from __future__ import annotations

import shlex
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"

_SCRIPT = """#!/bin/sh
# stand-in nvidia-smi: recorded answers from {data}
d={data}
case "$*" in
  *remapped*) q=remapped ;;
  *clocks_event_reasons*) q=event ;;
  *clocks_throttle_reasons*) q=throttle ;;
  *compute_cap*) q=compute_cap ;;
  *pci.bus_id*) q=base ;;
  *pcie.link.gen.current*) q=pcie ;;
  *) q=plain ;;
esac
if [ -f "$d/$q.err" ]; then cat "$d/$q.err" >&2; exit 2; fi
if [ -f "$d/$q.csv" ]; then cat "$d/$q.csv"; exit 0; fi
echo "stand-in nvidia-smi: no recorded answer for: $*" >&2
exit 2
"""


def fake_nvidia_smi(bin_dir: Path, scenario: str) -> dict[str, str]:
    """Write nvidia-smi into `bin_dir` answering from `scenario`; the box env to use it."""
    data = DATA / scenario
    assert data.is_dir(), f"no recorded nvidia-smi answers {data}"
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text(_SCRIPT.format(data=shlex.quote(str(data))))
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
