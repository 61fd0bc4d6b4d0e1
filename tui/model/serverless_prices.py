"""What a serverless GPU costs per second: the providers' published prices, as defaults a
config may override, and the GPU count read from the script's own spec ("H100:2"). Pure.

Dated per provider (PRICES_DATED) in the README and docs/serverless.md: a price here is
what the provider published then, not what it bills today. Every cost made from one is an
estimate, and of the GPU alone: Beam also bills CPU and RAM per second, Modal CPU and memory.
"""

from __future__ import annotations

import re

# When each provider's prices below were read: a cost is only as current as its date.
PRICES_DATED: dict[str, str] = {"modal": "2026-05-07", "beam": "2026-12-05"}
# USD per GPU-second, by provider and GPU type (upper case, without Modal's "!" suffix).
PUBLISHED: dict[str, dict[str, float]] = {
    # Modal's published prices on 2026-05-07 (modal.com/pricing, as quoted by
    # techbytes.app's serverless GPU pricing matrix that day): $/hr / 3600.
    "modal": {
        "H100": 0.001097,
        "A100-80GB": 0.000694,
        "L40S": 0.000542,
        "L4": 0.000222,
        "T4": 0.000164,
    },
    # Beam's pricing page (docs.beam.cloud/v2/resources/pricing-and-billing) read on
    # 2026-12-05, per second as it states them (docs/serverless-beam.md, "Prices"). Beam
    # names the GPUs in its SDK's GpuType as gpu="RTX4090" / "A10G" / "H100" / "T4" /
    # "A100-40" / "A100-80". CPU ($0.0000528/core/s) and RAM ($0.0000056/GB/s) are
    # billed on top, not counted here.
    "beam": {
        "RTX4090": 0.000192,
        "A10G": 0.000292,
        "H100": 0.000972,
        # not in the page's newer copy; from the other stored copy of the same page
        # (its publication date unknown), which also prices the H100 at $0.001222/s
        "T4": 0.000150,
        "A100-40": 0.000764,
        "A100-80": 0.000955,
    },
}

_SPEC = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]{0,30})(!|\+)?(?::([0-9]{1,2}))?")


def prices_dated(provider: str) -> str | None:
    """The day `provider`'s published prices here were read, else None."""
    return PRICES_DATED.get(provider)


def gpu_spec(spec: str) -> tuple[str, int] | None:
    """("H100", 2) from "H100:2"; ("A100-80GB", 1) from "a100-80gb"; None if unreadable."""
    match = _SPEC.fullmatch(spec.strip())
    if match is None:
        return None
    count = int(match.group(3)) if match.group(3) else 1
    return (match.group(1).upper(), count) if count >= 1 else None


def published_price(provider: str, gpu: str) -> float | None:
    """The provider's published USD per second for one GPU of this spec, else None."""
    parsed = gpu_spec(gpu)
    if parsed is None:
        return None
    return PUBLISHED.get(provider, {}).get(parsed[0])


def usd_per_second(provider: str, gpu: str, override: float | None) -> float | None:
    """The whole container's USD per second: GPU count x the per-GPU price."""
    parsed = gpu_spec(gpu)
    if parsed is None:
        return None
    each = override if override is not None else published_price(provider, gpu)
    return None if each is None else each * parsed[1]


def price_problem(provider: str, gpu: str, override: float | None) -> str | None:
    """Why a config entry's GPU cannot be priced (said at the config's `gpu` key)."""
    if gpu_spec(gpu) is None:
        return (f"{gpu!r} is not a GPU spec as the script writes it (\"H100\", "
                "\"A100-80GB:4\")")
    if override is None and published_price(provider, gpu) is None:
        known = ", ".join(PUBLISHED.get(provider, {})) or "none"
        return (f"no published {provider} price for {gpu!r} in gpurent-tui (known: {known}): "
                "set usd_per_gpu_second")
    return None
