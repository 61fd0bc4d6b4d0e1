"""Which GPUs a training run holds and which a profile would take, in the box's own names.

LibreYOLO's train_config.yaml `device` says which GPU(s) a trainer asked for, in
the numbering its own process saw: CUDA_VISIBLE_DEVICES renumbers them, and a
multi-GPU run's workers get a mask of just their GPUs. So a device is read with
the environment its process started with into the box's own GPU names (an
index of the whole machine, or a GPU-/MIG- UUID), and a profile is refused only
where it would share one with a training run. What cannot be placed (a device
that names nothing, a mask that cannot be read, an environment we may not read)
is said, never guessed: the profile then refuses as it always did. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.model.text import clean

MAX_GPUS = 64  # indices 0..63; a box's answer naming more is not believed
MAX_TEXT = 100  # characters of a device or mask setting that can be real
PLACING_ENV = ("CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE", "LOCAL_RANK")
_UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}")
_HIDES = re.compile(r"-[0-9]+")  # CUDA stops reading the mask at a negative index


@dataclass(frozen=True, slots=True)
class Asked:
    """A device setting in its own process's numbering: GPU indices, the CPU, or why it
    names neither. `auto` ('' or auto) takes GPU 0 when one is visible, else the CPU."""

    indices: tuple[int, ...] = ()
    cpu: bool = False
    auto: bool = False
    unknown: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where something computes, in the box's GPU names; or why that cannot be told."""

    gpus: tuple[str, ...] = ()
    cpu: bool = False
    unknown: str | None = None


def _shown(raw: object) -> str:
    return repr(clean(str(raw))[:40])


def _index(text: str) -> int | None:
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 2 and int(text) < MAX_GPUS:
        return int(text)
    return None


def parse_device(raw: object) -> Asked:
    """LibreYOLO's device setting as LibreYOLO reads it (training/distributed.py
    parse_device_arg, trainer _setup_device): 0, '0', 'cuda:0', '0,1', [0, 1], 'cpu',
    '' or 'auto'. Anything else, a huge index included, names no GPU we can place."""
    nothing = Asked(unknown=f"device {_shown(raw)} names no GPU gpurent-tui can place")
    if isinstance(raw, bool) or raw is None:
        return Asked(unknown="train_config.yaml names no device") if raw is None else nothing
    if isinstance(raw, int):
        one = _index(str(raw)) if raw >= 0 else None
        return Asked(indices=(one,)) if one is not None else nothing
    if isinstance(raw, list | tuple):
        items = [_index(str(v)) if isinstance(v, str | int) and not isinstance(v, bool)
                 else None for v in raw[:MAX_GPUS + 1]]
        if not items or len(items) > MAX_GPUS or None in items:
            return nothing
        return Asked(indices=tuple(i for i in items if i is not None))
    if not isinstance(raw, str) or len(raw) > MAX_TEXT:
        return nothing
    text = raw.strip().lower()
    if text in ("", "auto"):
        return Asked(indices=(0,), auto=True)
    if text == "cpu":
        return Asked(cpu=True)
    if text == "cuda":
        return Asked(indices=(0,))
    parts = text.split(",") if "," in text else [text.removeprefix("cuda:")]
    found = [_index(p) for p in parts]
    if None in found:
        return nothing
    return Asked(indices=tuple(i for i in found if i is not None))


def visible(mask: str) -> tuple[tuple[str, ...], str | None]:
    """CUDA_VISIBLE_DEVICES as the box's GPU names, in order (a negative index ends it, as
    it ends CUDA's reading); or why it cannot be read."""
    if len(mask) > MAX_TEXT * 4:
        return (), "CUDA_VISIBLE_DEVICES is too long to be real"
    names: list[str] = []
    for part in (p.strip() for p in mask.split(",")) if mask.strip() else ():
        if _HIDES.fullmatch(part):
            break
        index = _index(part)
        if index is not None:
            names.append(str(index))
        elif _UUID.fullmatch(part):
            names.append(part)
        else:
            return (), f"CUDA_VISIBLE_DEVICES={_shown(mask)} cannot be read"
    return tuple(names), None


def place(asked: Asked, env: Mapping[str, str] | None, env_problem: str = "") -> Placement:
    """The box GPUs a process asking `asked` computes on, given the environment it started
    with (None: it could not be read, `env_problem` says why)."""
    if asked.unknown is not None:
        return Placement(unknown=asked.unknown)
    if asked.cpu:
        return Placement(cpu=True)
    if env is None:
        return Placement(unknown="its process's environment cannot be read, so "
                         f"CUDA_VISIBLE_DEVICES may renumber its GPUs ({env_problem})")
    indices = asked.indices
    if "LOCAL_RANK" in env or "LOCAL_WORLD_SIZE" in env:  # torchrun: rank N on cuda:N
        size = _index(env.get("LOCAL_WORLD_SIZE", "x"))
        if not size:
            return Placement(unknown="it was started by a launcher (LOCAL_RANK) without a "
                             "readable LOCAL_WORLD_SIZE")
        indices = tuple(range(size))
    if "CUDA_VISIBLE_DEVICES" not in env:
        return Placement(gpus=tuple(str(i) for i in indices))
    names, problem = visible(env["CUDA_VISIBLE_DEVICES"])
    if problem is not None:
        return Placement(unknown=problem)
    if not names:
        return Placement(cpu=True) if asked.auto else Placement(
            unknown="CUDA_VISIBLE_DEVICES hides every GPU from it")
    if len(indices) > 1 and len(indices) == len(names):
        return Placement(gpus=names)  # a multi-GPU worker: LibreYOLO masked it to its GPUs
    if max(indices) >= len(names):
        return Placement(unknown=f"device {max(indices)} is past its CUDA_VISIBLE_DEVICES="
                         f"{_shown(env['CUDA_VISIBLE_DEVICES'])}")
    return Placement(gpus=tuple(names[i] for i in indices))


def _text_env(raw: Any) -> dict[str, str] | None:
    if not isinstance(raw, Mapping):
        return None
    return {k: v for k, v in raw.items()
            if k in PLACING_ENV and isinstance(v, str) and len(v) <= MAX_TEXT * 4}


def own_env(part: Any) -> dict[str, str] | None:
    """The environment the profiler would start with (the on-box program's), or None."""
    return _text_env(part.get("own")) if isinstance(part, Mapping) else None


def run_placement(entry: Any) -> Placement:
    """One training run's entry of the box's `placing` part: its train_config.yaml device
    and its process's starting environment, type-checked (a box may send anything)."""
    if not isinstance(entry, Mapping):
        return Placement(unknown="the box did not say")
    if entry.get("config") is not True:
        return Placement(unknown="it has no train_config.yaml the box could read")
    device = entry.get("device")
    if isinstance(device, list) and len(device) > MAX_GPUS:
        device = device[:MAX_GPUS + 1]
    env = _text_env(entry.get("env"))
    why = entry.get("env_problem")
    return place(parse_device(device), env,
                 clean(why)[:200] if isinstance(why, str) else "not said")


def _gpus(names: Sequence[str]) -> str:
    return ("GPU " if len(names) == 1 else "GPUs ") + ", ".join(names)


def _same(a: str, b: str) -> bool:
    """One GPU? CUDA takes a UUID's unique prefix for the whole, so a prefix is the GPU."""
    if a.isdigit() or b.isdigit():
        return a == b
    a, b = a.lower(), b.lower()
    return a.startswith(b) or b.startswith(a)


def _comparable(a: Sequence[str], b: Sequence[str]) -> bool:
    """Both named alike: by index, or by UUID of one kind (GPU-, MIG-). An index and a
    UUID may be the same GPU or not; the names alone cannot say."""
    return len({"index" if n.isdigit() else n[:4].upper() for n in (*a, *b)}) <= 1


def refusal(box: str, asked: Placement, training: Sequence[tuple[str, Placement]]
            ) -> str | None:
    """Why a profile placed at `asked` must not run beside these training runs (name,
    placement); None when they hold other GPUs than the profile would use."""
    again = "; --force to profile anyway"
    for name, held in training:
        shared = [g for g in asked.gpus if any(_same(g, h) for h in held.gpus)]
        if shared:
            return (f"run {name} is training on {_gpus(shared)} of box {box}: profiling "
                    "there now would compete for it and measure neither; pick another GPU "
                    f"(--device){again}")
    for name, held in training:
        if held.unknown is not None:
            return (f"run {name} is training on box {box} and which GPU it uses cannot be "
                    f"told ({held.unknown}): profiling now could compete for its GPU and "
                    f"cores and measure neither{again}")
        if held.cpu:
            return (f"run {name} is training on the CPU of box {box}: profiling now would "
                    f"compete for its cores and measure neither{again}")
        if not _comparable(asked.gpus, held.gpus):
            return (f"run {name} is training on box {box} and which GPU it uses cannot be "
                    f"told against the profile's ({_gpus(held.gpus)} against "
                    f"{_gpus(asked.gpus)}: CUDA_VISIBLE_DEVICES names one by UUID){again}")
    names = ", ".join(name for name, _ in training[:3])
    if asked.unknown is not None:
        return (f"run {names} is training on box {box} and the GPU this profile would use "
                f"cannot be told ({asked.unknown}){again}")
    if asked.cpu:
        return (f"run {names} is training on box {box}: a profile on the CPU would compete "
                f"for its cores and measure neither{again}")
    return None


def beside(asked: Placement, training: Sequence[tuple[str, Placement]]) -> str:
    """What a profile allowed beside training runs should be read with."""
    held = ", ".join(f"{name} on {_gpus(p.gpus)}" for name, p in training[:3])
    return (f"training beside it: {held}; profiling {_gpus(asked.gpus)} (the cores and "
            "disk are shared, so the dataload share may read high)")
