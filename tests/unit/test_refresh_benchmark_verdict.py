"""The refresh benchmark's verdict on the kept probe checks each target the issue set for
it side by side with the one-shot probe: bytes up, probe CPU, and bytes down unchanged."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def refresh_benchmark() -> ModuleType:
    """benchmarks/refresh.py, loaded as the script loads (its helpers sit beside it)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("refresh_benchmark", BENCHMARKS / "refresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def idle(up: float, cpu: float, down: float) -> dict[str, float]:
    return {"bytes_out_per_box": up, "probe_cpu_s_per_box": cpu, "bytes_in_per_box": down}


def measured(kept: dict[str, float]) -> dict[str, Any]:
    return {"kept": kept, "one-shot": idle(12398, 0.039, 378)}


def test_the_kept_probe_passes_only_when_bytes_down_are_unchanged() -> None:
    bench = refresh_benchmark()
    ok, line = bench.idle_verdict(measured(idle(37, 0.0012, 374)))
    assert ok, line
    assert "bytes down 374 B vs 378 B" in line and line.endswith("OK")
    # Fewer bytes up and less CPU, but an answer twice the one-shot's: not the same report.
    ok, line = bench.idle_verdict(measured(idle(37, 0.0012, 760)))
    assert not ok
    assert "bytes down 760 B vs 378 B" in line and "OVER TARGET (bytes down)" in line
    ok, line = bench.idle_verdict(measured(idle(37, 0.0012, 200)))  # lost part of the answer
    assert not ok and "(bytes down)" in line


def test_each_missed_target_is_named() -> None:
    bench = refresh_benchmark()
    ok, line = bench.idle_verdict(measured(idle(400, 0.003, 374)))
    assert not ok and line.endswith("OVER TARGET (bytes up, probe CPU)")
