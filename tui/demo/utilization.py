"""A demo box's `nvidia-smi -q -d UTILIZATION`: the driver's busy average over 14 s. Pure.

The probe reads how busy the GPUs were from the driver's own samples (NVML, or this
query where NVML will not load: tui/onbox/probe.py), not from one instantaneous read. A
real driver samples each GPU every 200 ms and keeps the last 71 (14 s, as the H200
recording in tests/data/nvidia-smi-h200 shows). A demo box's samples are the demo's own
readings (scenario.gpu_readings, what its csv rows show) at those instants, each GPU
doing what the replay had it doing then, so the busy figure the panel shows is the
utilisation the demo's rows showed over those seconds, printed in nvidia-smi's layout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from tui.demo.scenario import BoxSpec, gpu_readings

SAMPLE_SECONDS = 0.2  # the driver's sample period
SAMPLES = 71  # samples it keeps: 14 s
# The memory controller's busy share, which the demo's rows do not show: a quarter of the
# GPU's, as in the H200 recording (4 % beside 17 %, 9 % beside 39 %).
MEMORY_SHARE = 0.25
DRIVER, CUDA = "580.159.04", "13.0"  # the stand-in driver's (the recording's) versions
# What each GPU was doing at an instant: GPU index -> "train" / "hung" (absent: idle).
States = Callable[[float], Mapping[int, str]]


def sample_times(now: float, since: float | None = None) -> list[float]:
    """The instants whose samples the driver holds at `now`, oldest first: a 200 ms grid,
    the last 71, none before `since` (the box came back then: its driver began afresh)."""
    last = math.floor(now / SAMPLE_SECONDS)
    times = [(last - k) * SAMPLE_SECONDS for k in range(SAMPLES - 1, -1, -1)]
    return [t for t in times if since is None or t >= since]


def gpu_samples(box: BoxSpec, states: States, times: Sequence[float]) -> list[list[int]]:
    """Per GPU, its utilisation % at each of `times`, as the demo's rows read then."""
    readings = [gpu_readings(box, states(t), t) for t in times]
    return [[int(f"{at[index].util:.0f}") for at in readings] for index in range(len(box.gpus))]


def _row(indent: int, key: str, value: str) -> str:
    return f"{' ' * indent + key:<55}: {value}"


def _block(name: str, values: Sequence[int]) -> list[str]:
    """One "... Utilization Samples" block: the span, count and spread of `values`."""
    if not values:
        return [f"    {name} Utilization Samples",
                *(_row(8, key, "N/A") for key in ("Duration", "Number of Samples", "Max",
                                                  "Min", "Avg"))]
    return [f"    {name} Utilization Samples",
            _row(8, "Duration", f"{(len(values) - 1) * SAMPLE_SECONDS:.2f} sec"),
            _row(8, "Number of Samples", str(len(values))),
            _row(8, "Max", f"{max(values)} %"), _row(8, "Min", f"{min(values)} %"),
            _row(8, "Avg", f"{sum(values) / len(values):.0f} %")]


def utilization_text(box: BoxSpec, states: States, now: float,
                     since: float | None = None) -> str:
    """`nvidia-smi -q -d UTILIZATION` on `box` at `now` (its GPUs' samples from `since`)."""
    times = sample_times(now, since)
    stamp = datetime.fromtimestamp(now, UTC)
    lines = ["", "==============NVSMI LOG==============", "",
             _row(0, "Timestamp", f"{stamp:%a %b} {stamp.day:2d} {stamp:%H:%M:%S %Y}"),
             _row(0, "Driver Version", DRIVER), _row(0, "CUDA Version", CUDA), "",
             _row(0, "Attached GPUs", str(len(box.gpus)))]
    for index, gpu_util in enumerate(gpu_samples(box, states, times)):
        memory = [round(u * MEMORY_SHARE) for u in gpu_util]
        lines += [f"GPU 00000000:{index + 1:02X}:00.0", "    Utilization",
                  _row(8, "GPU", f"{gpu_util[-1]} %" if gpu_util else "N/A"),
                  _row(8, "Memory", f"{memory[-1]} %" if memory else "N/A"),
                  *(_row(8, name, "0 %") for name in ("Encoder", "Decoder", "JPEG", "OFA")),
                  *_block("GPU", gpu_util), *_block("Memory", memory),
                  *(line for name in ("ENC", "DEC", "JPG", "OFA")
                    for line in _block(name, [0] * len(gpu_util)))]
    return "\n".join(lines) + "\n"
