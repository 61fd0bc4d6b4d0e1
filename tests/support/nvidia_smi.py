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
import shutil
import subprocess
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


FIXTURES = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi-h200"

_REPLAY = """#!/bin/sh
# stand-in nvidia-smi: the H200 recordings in {data}, utilisation answers in order
b={bin}
case "$*" in
  *UTILIZATION*)
    n=$(cat "$b/util.n" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$b/util.n"
    f=$(sed -n "${{n}}p" "$b/util.seq"); [ -n "$f" ] || f=$(tail -n 1 "$b/util.seq")
    cat "{data}/$f" ;;
  *--query-gpu=index,name,utilization.gpu*) cat "{data}/query.csv" ;;
  *--query-gpu=utilization.gpu*) cut -d, -f3 "{data}/query.csv" | tr -d ' ' ;;
  *) echo "stand-in nvidia-smi: no recorded answer for: $*" >&2; exit 2 ;;
esac
"""


def replaying_nvidia_smi(bin_dir: Path, *util: str) -> dict[str, str]:
    """Write nvidia-smi into `bin_dir` answering the probe's queries from the H200
    recordings: `-q -d UTILIZATION` with the files `util` in turn (the last one again
    once they run out), `--query-gpu=utilization.gpu` (the one-sample read
    scripts/gpu_busy_check.py takes as its reference) with query.csv's; the box env."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in util:
        assert (FIXTURES / name).is_file(), f"no recording {name}"
    (bin_dir / "util.seq").write_text("".join(f"{name}\n" for name in util))
    exe = bin_dir / "nvidia-smi"
    exe.write_text(_REPLAY.format(data=shlex.quote(str(FIXTURES)),
                                  bin=shlex.quote(str(bin_dir))))
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def utilisation_answers_served(bin_dir: Path) -> int:
    """How many `-q -d UTILIZATION` queries the stand-in answered."""
    path = bin_dir / "util.n"
    return int(path.read_text()) if path.exists() else 0


FAKE_NVML_SOURCE = Path(__file__).resolve().parent / "fake_nvml.c"


def fake_nvml(lib_dir: Path) -> dict[str, str] | None:
    """Build the stand-in libnvidia-ml.so.1 (fake_nvml.c) into `lib_dir`: the box env that
    loads it, or None where this machine has no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    lib_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib_dir / "libnvidia-ml.so.1"),
                    str(FAKE_NVML_SOURCE)], check=True)
    return {"LD_LIBRARY_PATH": str(lib_dir), "FAKE_NVML_STEP_US": "10000000"}
