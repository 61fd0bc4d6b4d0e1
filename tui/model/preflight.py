"""Before the GPU bills: what `check` and `doctor` found on a box, and what to do about it.

Pure: the on-box program (tui/onbox/preflight.py) sends raw facts (torch's
answers, nvidia-smi's CSV, where HF_HOME lives, LibreYOLO's own JSON); this
module reads them, untrusted, and turns them into findings, each with its fix.
Nothing here runs anything, so every verdict is tested with plain values,
recorded nvidia-smi outputs among them.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.fields import digits, finite, items, size, table, whole
from tui.model.text import plain

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

TEMP_WARN_C = 80.0
TEMP_ERROR_C = 90.0
MATMUL_TOLERANCE = 0.02  # relative: the sum of x @ x for x ~ U[0,1) is n^3/4 within far less
TORCH_INDEX = "https://download.pytorch.org/whl"

# nvidia-smi's clocks_event_reasons / clocks_throttle_reasons bits (NVML's
# nvmlClocksEventReason*); idle is not a problem, the rest may be.
THROTTLE_BITS: tuple[tuple[int, str, str], ...] = (
    (0x1, "gpu_idle", INFO),
    (0x2, "applications clocks setting", INFO),
    (0x4, "software power cap", INFO),
    (0x8, "hardware slowdown", ERROR),
    (0x10, "sync boost", INFO),
    (0x20, "software thermal slowdown", ERROR),
    (0x40, "hardware thermal slowdown", ERROR),
    (0x80, "hardware power brake slowdown", ERROR),
    (0x100, "display clocks setting", INFO),
)

# The oldest driver (major, minor) that runs each CUDA major version's code
# (CUDA's minor version compatibility). Newer drivers run older CUDA builds.
MIN_DRIVER_FOR_CUDA: dict[int, tuple[int, int]] = {11: (450, 80), 12: (525, 60), 13: (580, 65)}

_ARCH = re.compile(r"^(sm|compute)_([0-9]{2,3})([a-z]?)$")


def interpreter_command(python: str) -> str:
    """The remote command that runs a program read from stdin with the box's interpreter.

    Quoted, so a path with spaces or `$()` is one word; a leading `~/` stays
    the box user's home (the remote shell expands `$HOME`, never our text).
    """
    if python == "~" or python.startswith("~/"):
        rest = python[2:]
        return '"$HOME"' + ("/" + shlex.quote(rest) if rest else "") + " -"
    return f"{shlex.quote(python)} -"


@dataclass(frozen=True)
class Finding:
    """One thing found, in words a person acts on."""

    severity: str  # error | warning | info
    code: str  # stable id, e.g. "cuda.unavailable", "gpu0.ecc"
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "code": self.code, "message": self.message,
                "fix": self.fix}


# -- compute capability and the wheel's arch list ------------------------------------

def parse_arch(arch: str) -> tuple[str, int, int, str] | None:
    """`sm_86` -> ("sm", 8, 6, ""); `compute_90` -> ("compute", 9, 0, ""); sm_90a keeps "a"."""
    match = _ARCH.match(arch.strip())
    if match is None:
        return None
    number = int(match.group(2))
    return match.group(1), number // 10, number % 10, match.group(3)


def arch_span(arch_list: Sequence[str]) -> str:
    """The wheel's real (sm_) architectures, shortest: "sm_50..sm_86"."""
    sms = sorted({(p[1], p[2], p[3]) for a in arch_list if (p := parse_arch(a)) and p[0] == "sm"})
    if not sms:
        return "no sm_ architectures"
    names = [f"sm_{major}{minor}{suffix}" for major, minor, suffix in sms]
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


def kernels_for(arch_list: Sequence[str], capability: tuple[int, int]) -> str | None:
    """How a wheel runs on a card: "sass" (native), "ptx" (JIT-compiled) or None (no kernel image).

    A cubin for sm_XY runs on cards of the same major version and minor >= Y;
    PTX for compute_XY is compiled by the driver for any card >= X.Y. Arch-specific
    targets (sm_90a) run only on exactly that card.
    """
    major, minor = capability
    ptx = False
    for arch in arch_list:
        parsed = parse_arch(arch)
        if parsed is None:
            continue
        kind, a_major, a_minor, suffix = parsed
        if suffix:
            if kind == "sm" and (a_major, a_minor) == (major, minor):
                return "sass"
            continue
        if kind == "sm" and a_major == major and a_minor <= minor:
            return "sass"
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            ptx = True
    return "ptx" if ptx else None


def sm_name(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def wheel_suggestion(capability: tuple[int, int] | None) -> str:
    """Which torch wheel line to install for a card."""
    if capability is not None and capability >= (10, 0):
        return f"a CUDA 12.8+ build (pip install torch --index-url {TORCH_INDEX}/cu128)"
    if capability is not None and capability >= (9, 0):
        return f"a CUDA 12.x build (pip install torch --index-url {TORCH_INDEX}/cu126)"
    return f"a CUDA build for this card (pip install torch --index-url {TORCH_INDEX}/cu126)"


def parse_version(text: object) -> tuple[int, ...] | None:
    if not isinstance(text, str):
        return None
    numbers = [digits(p) for p in re.findall(r"[0-9]+", text)[:3]]
    return tuple(n for n in numbers if n is not None) if numbers and None not in numbers \
        else None


def driver_too_old(driver: str | None, cuda: str | None) -> tuple[int, int] | None:
    """The driver version a CUDA build needs, when the installed driver is older."""
    have, want = parse_version(driver), parse_version(cuda)
    if not have or not want or want[0] not in MIN_DRIVER_FOR_CUDA:
        return None
    need = MIN_DRIVER_FOR_CUDA[want[0]]
    return need if tuple(have[:2]) < need else None


def newest_cuda_for_driver(driver: str | None) -> int | None:
    have = parse_version(driver)
    if not have:
        return None
    fits = [cuda for cuda, need in MIN_DRIVER_FOR_CUDA.items() if tuple(have[:2]) >= need]
    return max(fits) if fits else None


# -- nvidia-smi -----------------------------------------------------------------------

def _smi_value(field: str) -> str | None:
    field = field.strip()
    if not field or field.startswith("[") or field.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    return field


def _smi_number(field: str) -> float | None:
    value = _smi_value(field)
    if value is None:
        return None
    try:
        return finite(float(value))
    except ValueError:
        return None


def _smi_flag(field: str) -> bool | None:
    """Yes/No, or a count (pending rows), as nvidia-smi prints them."""
    value = _smi_value(field)
    if value is None:
        return None
    if value.lower() in ("yes", "true"):
        return True
    if value.lower() in ("no", "false"):
        return False
    number = _smi_number(value)
    return None if number is None else number > 0


@dataclass(frozen=True)
class GpuHealth:
    """One card as nvidia-smi reports it; None where the card or driver does not say."""

    index: int
    name: str
    bus_id: str = ""
    driver: str | None = None
    memory_mib: float | None = None
    temp_c: float | None = None
    ecc_uncorrected: float | None = None
    retired_pending: bool | None = None
    link_gen: float | None = None
    link_gen_max: float | None = None
    link_width: float | None = None
    link_width_max: float | None = None
    link_under_load: bool = False
    throttle_mask: int | None = None
    compute_cap: tuple[int, int] | None = None
    remapped_pending: bool | None = None
    remapped_failure: bool | None = None


BASE_FIELDS = 12  # SMI_BASE in tui/onbox/preflight.py: eleven fields, then the name


def parse_smi_base(text: str) -> tuple[list[GpuHealth], int]:
    """Rows of SMI_BASE (name last, since a name may hold commas); and how many were unreadable."""
    gpus: list[GpuHealth] = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(",", BASE_FIELDS - 1)
        if len(parts) != BASE_FIELDS or digits(parts[0].strip()) is None \
                or len(parts[0].strip()) > 4:
            bad += 1
            continue
        (index, bus, driver, memory, temp, ecc, retired, gen, gen_max, width, width_max,
         name) = parts
        gpus.append(GpuHealth(
            index=int(index), name=plain(name, 80), bus_id=plain(bus, 40).lower(),
            driver=_smi_value(plain(driver, 40)), memory_mib=_smi_number(memory),
            temp_c=_smi_number(temp), ecc_uncorrected=_smi_number(ecc),
            retired_pending=_smi_flag(retired), link_gen=_smi_number(gen),
            link_gen_max=_smi_number(gen_max), link_width=_smi_number(width),
            link_width_max=_smi_number(width_max)))
    return gpus, bad


def _rows_by_index(text: str, width: int) -> dict[int, list[str]]:
    rows: dict[int, list[str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        index = digits(parts[0]) if len(parts[0]) <= 4 else None
        if len(parts) == width and index is not None:
            rows[index] = parts[1:]
    return rows


def parse_throttle(text: str) -> dict[int, int]:
    """`index, 0x0000000000000001` rows -> {index: mask}."""
    masks = {}
    for index, (value,) in _rows_by_index(text, 2).items():
        try:
            masks[index] = int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            continue
    return masks


def parse_compute_cap(text: str) -> dict[int, tuple[int, int]]:
    caps = {}
    for index, (value,) in _rows_by_index(text, 2).items():
        match = re.fullmatch(r"(\d{1,2})\.(\d)", value)
        if match:
            caps[index] = (int(match.group(1)), int(match.group(2)))
    return caps


def parse_remapped(text: str) -> dict[str, tuple[bool | None, bool | None]]:
    """`bus_id, pending, failure` rows -> {bus id (lower case): (pending, failure)}."""
    rows = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0]:
            rows[parts[0].lower()] = (_smi_flag(parts[1]), _smi_flag(parts[2]))
    return rows


def parse_pcie(text: str) -> dict[int, tuple[float | None, ...]]:
    return {index: tuple(_smi_number(v) for v in values)
            for index, values in _rows_by_index(text, 5).items()}


def throttle_reasons(mask: int) -> list[tuple[str, str]]:
    """Active reasons other than idle: (words, severity)."""
    return [(words, severity) for bit, words, severity in THROTTLE_BITS
            if mask & bit and bit != 0x1]


def _ok_output(query: object) -> str | None:
    """A tool's stdout when it ran and exited 0."""
    if isinstance(query, Mapping) and query.get("rc") == 0 and isinstance(query.get("out"), str):
        return query["out"]
    return None


def _tool_trouble(query: object) -> str:
    if not isinstance(query, Mapping):
        return "no answer"
    if "timeout" in query:
        return f"did not answer within {plain(query['timeout'], 20)} s"
    if "error" in query:
        return plain(query["error"], 200)
    err = plain(query.get("err"), 200) or plain(query.get("out"), 200)
    return f"exited {plain(query.get('rc'), 10)}: {err or 'no output'}"


def read_smi(smi: Mapping[str, Any], busy: Mapping[str, Any] | None
             ) -> tuple[list[GpuHealth], list[str]]:
    """Every card nvidia-smi reported, with what could not be read (notes, not findings)."""
    notes: list[str] = []
    base = _ok_output(smi.get("base"))
    if base is None:
        notes.append(f"nvidia-smi {_tool_trouble(smi.get('base'))}")
        return [], notes
    gpus, bad = parse_smi_base(base)
    if bad:
        notes.append(f"{bad} nvidia-smi line(s) could not be read")
    throttle_out = _ok_output(smi.get("throttle"))
    masks = parse_throttle(throttle_out) if throttle_out is not None else {}
    if throttle_out is None:
        notes.append("this driver does not report clock throttle reasons")
    caps_out = _ok_output(smi.get("compute_cap"))
    caps = parse_compute_cap(caps_out) if caps_out is not None else {}
    remapped_out = _ok_output(smi.get("remapped"))
    remapped = parse_remapped(remapped_out) if remapped_out is not None else {}
    busy_out = _ok_output(busy) if busy else None
    links = parse_pcie(busy_out) if busy_out is not None else {}
    result = []
    for gpu in gpus:
        pending, failure = remapped.get(gpu.bus_id, (None, None))
        link = links.get(gpu.index)
        extra: dict[str, Any] = {}
        if link is not None and len(link) == 4 and link[0] is not None:
            extra = {"link_gen": link[0], "link_gen_max": link[1] or gpu.link_gen_max,
                     "link_width": link[2], "link_width_max": link[3] or gpu.link_width_max,
                     "link_under_load": True}
        result.append(GpuHealth(**{**gpu.__dict__, **extra,
                                   "throttle_mask": masks.get(gpu.index),
                                   "compute_cap": caps.get(gpu.index),
                                   "remapped_pending": pending, "remapped_failure": failure}))
    return result, notes


def health_findings(gpus: Sequence[GpuHealth]) -> list[Finding]:
    """What nvidia-smi says is wrong with each card, each with what to do."""
    found: list[Finding] = []
    another = "rent another box (or reset the GPU, if it is yours)"
    for gpu in gpus:
        who = f"GPU {gpu.index} ({gpu.name})"
        code = f"gpu{gpu.index}"
        if gpu.ecc_uncorrected:
            found.append(Finding(ERROR, f"{code}.ecc", f"{who}: {gpu.ecc_uncorrected:g} "
                                 "uncorrected ECC errors since the driver loaded", another))
        if gpu.retired_pending:
            found.append(Finding(ERROR, f"{code}.retired_pages", f"{who}: memory pages are "
                                 "waiting to be retired (a reset is needed)", another))
        if gpu.remapped_failure:
            found.append(Finding(ERROR, f"{code}.remap_failure", f"{who}: a memory row "
                                 "remapping failed: the card's memory is faulty",
                                 "rent another box"))
        elif gpu.remapped_pending:
            found.append(Finding(ERROR, f"{code}.remap_pending", f"{who}: remapped memory "
                                 "rows are pending (a reset is needed)", another))
        if gpu.throttle_mask:
            reasons = throttle_reasons(gpu.throttle_mask)
            serious = [words for words, severity in reasons if severity == ERROR]
            if serious:
                found.append(Finding(ERROR, f"{code}.throttle", f"{who}: clocks held down by "
                                     f"{', '.join(serious)}",
                                     "its cooling or power is failing: it will train slowly; "
                                     "rent another box"))
        if gpu.temp_c is not None and gpu.temp_c >= TEMP_ERROR_C:
            found.append(Finding(ERROR, f"{code}.temperature", f"{who}: {gpu.temp_c:g} °C "
                                 "before any training", "its cooling is failing: rent another "
                                 "box"))
        elif gpu.temp_c is not None and gpu.temp_c >= TEMP_WARN_C:
            found.append(Finding(WARNING, f"{code}.temperature", f"{who}: {gpu.temp_c:g} °C "
                                 "before any training", "watch it under load: a hot card "
                                 "slows down"))
        found.extend(_link_findings(gpu, who, code))
    return found


def _link_findings(gpu: GpuHealth, who: str, code: str) -> list[Finding]:
    gen, gen_max, width, width_max = gpu.link_gen, gpu.link_gen_max, gpu.link_width, \
        gpu.link_width_max
    if gen is None or width is None or (gen_max is None and width_max is None):
        return []
    gen_low = gen_max is not None and gen < gen_max
    width_low = width_max is not None and width < width_max
    if not gen_low and not width_low:
        return []
    have = f"gen {gen:g} x{width:g}"
    can = f"gen {(gen_max or gen):g} x{(width_max or width):g}"
    slow = ("host-to-GPU copies run slower: a dataloader-heavy run waits on them; pick "
            "another box if that matters")
    if gpu.link_under_load:
        return [Finding(WARNING, f"{code}.pcie", f"{who}: PCIe link {have} under load, the "
                        f"card can do {can}", slow)]
    if width_low:
        return [Finding(WARNING, f"{code}.pcie", f"{who}: PCIe link x{width:g} of "
                        f"x{width_max:g} (read at rest)", slow)]
    return [Finding(INFO, f"{code}.pcie", f"{who}: PCIe link {have} at rest, the card can do "
                    f"{can} (cards lower the link speed when idle)")]


# -- the whole check --------------------------------------------------------------------

@dataclass(frozen=True)
class GpuCheck:
    """One card as torch used it: the matmul's outcome and time."""

    index: int
    name: str
    capability: tuple[int, int] | None
    memory: int | None
    kernels: str | None  # sass | ptx | None (no kernel image)
    matmul_ok: bool
    matmul_ms: float | None
    first_ms: float | None
    tflops: float | None
    error: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name,
                "capability": list(self.capability) if self.capability else None,
                "memory_bytes": self.memory, "kernels": self.kernels,
                "matmul_ok": self.matmul_ok, "matmul_ms": self.matmul_ms,
                "first_ms": self.first_ms, "tflops": self.tflops, "error": self.error}


@dataclass(frozen=True)
class CheckReport:
    """Everything `check` learned about one box, its findings and the verdict."""

    box: str
    python: str
    checked_at: float
    findings: tuple[Finding, ...]
    python_version: str | None = None
    executable: str | None = None
    torch: Mapping[str, Any] = field(default_factory=dict)
    gpus: tuple[GpuCheck, ...] = ()
    health: tuple[GpuHealth, ...] = ()
    libreyolo: Mapping[str, Any] = field(default_factory=dict)
    places: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    complete: bool = True
    has_gpu: bool = True  # False: the config says the box has no GPU (gpu = false)
    stand_in: str | None = None  # a demo box: nothing was checked, and why

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def verdict(self) -> Literal["ok", "warnings", "problems"]:
        """"problems" (exit 1), "warnings" or "ok" (exit 0)."""
        if self.errors:
            return "problems"
        return "warnings" if self.warnings else "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.errors else EXIT_OK

    @property
    def summary(self) -> str:
        """One line for a box header or the journal."""
        if self.stand_in is not None:
            return self.stand_in
        if self.errors:
            first = self.errors[0].message
            more = f" (+{len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
            return f"{first}{more}"
        cards = f"{len(self.gpus)} GPU" + ("s" if len(self.gpus) != 1 else "")
        if not self.has_gpu and not self.gpus:  # what the config said, not a verdict
            if self.warnings:
                return (f"no GPU, by config; {len(self.warnings)} warning(s): "
                        f"{self.warnings[0].message}")
            return f"no GPU, by config; torch {plain(self.torch.get('version'), 40)}"
        if self.warnings:
            return f"{cards} ok, {len(self.warnings)} warning(s): {self.warnings[0].message}"
        return f"{cards} ok, torch {plain(self.torch.get('version'), 40)}"

    def lines(self) -> list[str]:
        """The report as text, most important last (the verdict and its fixes)."""
        out = [f"box {self.box}: {self.python}"
               + (f" (Python {self.python_version})" if self.python_version else "")]
        if self.torch.get("version"):
            cuda = self.torch.get("cuda") or "none (CPU-only build)"
            available = self.torch.get("available")
            avail = "yes" if available is True else "no" if available is False else "?"
            out.append(f"torch {self.torch['version']}, CUDA build {cuda}, "
                       f"cuda available: {avail}"
                       + (f", kernels {self.torch['arch_span']}"
                          if self.torch.get("arch_span") else ""))
        by_index = {h.index: h for h in self.health}
        for gpu in self.gpus:
            out.append("  " + _gpu_line(gpu, by_index.get(gpu.index)))
        for health in self.health:
            if not any(g.index == health.index for g in self.gpus):
                out.append("  " + _gpu_line(None, health))
        if self.libreyolo.get("installed"):
            out.append(f"LibreYOLO {self.libreyolo.get('version') or '(version unknown)'}"
                       + (f": {self.libreyolo['checks_summary']}"
                          if self.libreyolo.get("checks_summary") else ""))
        elif self.libreyolo:
            out.append("LibreYOLO: not installed")
        for label in ("hf_home", "persistent"):
            where = self.places.get(label)
            if isinstance(where, Mapping):
                out.append(f"{'HF_HOME' if label == 'hf_home' else 'persistent'} "
                           f"{_place_words(where)}")
        out.extend(f"note: {note}" for note in self.notes)
        marks = {ERROR: "✗", WARNING: "!", INFO: "·"}
        out.append(f"verdict: {self.verdict}" + (
            f" ({len(self.errors)} problem(s), {len(self.warnings)} warning(s))"
            if self.findings else ""))
        for finding in sorted(self.findings, key=lambda f: SEVERITY_ORDER[f.severity]):
            out.append(f"  {marks[finding.severity]} {finding.message}")
            if finding.fix:
                out.append(f"      fix: {finding.fix}")
        return out


def _gpu_line(gpu: GpuCheck | None, health: GpuHealth | None) -> str:
    index = gpu.index if gpu is not None else health.index if health is not None else "?"
    name = gpu.name if gpu is not None else health.name if health is not None else ""
    words = [f"GPU {index} {name}"]
    if gpu is not None:
        if gpu.capability:
            words.append(sm_name(gpu.capability))
        if gpu.memory:
            words.append(f"{gpu.memory / 2**30:.1f} GiB")
        if gpu.matmul_ok and gpu.matmul_ms is not None:
            tflops = f", {gpu.tflops:.1f} TFLOPS" if gpu.tflops else ""
            words.append(f"matmul ok {gpu.matmul_ms:.2f} ms{tflops} "
                         f"(first {gpu.first_ms or 0:.0f} ms)")
        else:
            words.append("matmul FAILED")
    if health is not None:
        if health.temp_c is not None:
            words.append(f"{health.temp_c:g} °C")
        if health.link_gen is not None and health.link_width is not None:
            words.append(f"PCIe gen {health.link_gen:g} x{health.link_width:g}"
                         + (" under load" if health.link_under_load else " at rest"))
        if health.ecc_uncorrected is not None:
            words.append(f"ECC uncorrected {health.ecc_uncorrected:g}")
    return ", ".join(words)


def _place_words(where: Mapping[str, Any]) -> str:
    path = plain(where.get("path"), 200)
    real = plain(where.get("real"), 200)
    words = path + (f" -> {real}" if real and real != path else "")
    if where.get("mount"):
        words += f" (on {plain(where.get('fstype'), 20) or 'a'} filesystem at " \
                 f"{plain(where.get('mount'), 200)}"
        free = size(where.get("free"))
        words += f", {free / 1e9:.1f} GB free)" if free is not None else ")"
    if where.get("exists") is False:
        words += ", does not exist yet"
    return words


def _place(raw: object) -> dict[str, Any] | None:
    """A `place` answer, fields type-checked."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {"path": plain(raw.get("path"), 400)}
    for key in ("real", "mount", "fstype", "error"):
        if isinstance(raw.get(key), str):
            out[key] = plain(raw[key], 400)
    for key in ("dev", "free", "total"):
        number = size(raw.get(key))
        if number is not None and number >= 0:
            out[key] = number
    if isinstance(raw.get("exists"), bool):
        out["exists"] = raw["exists"]
    return out


def _under(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def persists(where: Mapping[str, Any], volume: Mapping[str, Any]) -> bool:
    """Whether a path lives on the persistent volume: under it, or on its filesystem."""
    if where.get("real") and volume.get("real") and _under(where["real"], volume["real"]):
        return True
    return where.get("dev") is not None and where.get("dev") == volume.get("dev")


def place_findings(host: Mapping[str, Any], box: str, persistent: str | None,
                   runs_roots: Sequence[str]) -> tuple[list[Finding], dict[str, Any]]:
    found: list[Finding] = []
    places: dict[str, Any] = {}
    hf = _place(host.get("hf_home"))
    if hf is not None:
        places["hf_home"] = hf
    roots = [p for p in (_place(r) for r in host.get("runs_roots") or []) if p]
    places["runs_roots"] = roots
    volume = _place(host.get("persistent")) if persistent else None
    if volume is not None:
        places["persistent"] = volume
    if not persistent:
        if hf is not None:
            found.append(Finding(INFO, "hf_home.unknown", f"HF_HOME is {_place_words(hf)}; "
                                 f"whether it survives a stop is unknown",
                                 f"set `persistent` for box {box} to its volume (RunPod: "
                                 f"/workspace) to have it checked"))
        return found, places
    if volume is None or volume.get("exists") is False or volume.get("error"):
        found.append(Finding(WARNING, "persistent.missing",
                             f"the persistent volume {persistent} does not exist on box {box}",
                             "fix `persistent` in the config, or attach the volume"))
        return found, places
    if hf is not None and not persists(hf, volume):
        found.append(Finding(WARNING, "hf_home.ephemeral",
                             f"HF_HOME ({hf['path']}) is not on the persistent volume "
                             f"{persistent}: a stop wipes the HF cache (staged data, downloads)",
                             f"export HF_HOME={posixpath.join(persistent, 'hf')} in the shell "
                             f"that trains"))
    for root in roots:
        if not persists(root, volume):
            found.append(Finding(WARNING, "runs_root.ephemeral",
                                 f"runs root {root['path']} is not on the persistent volume "
                                 f"{persistent}: a stop wipes its weights",
                                 f"train with project={posixpath.join(persistent, 'runs')} and "
                                 f"list it in runs_roots"))
    return found, places


def _torch_facts(raw: Mapping[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {"installed": bool(raw.get("installed"))}
    for key in ("version", "cuda", "file"):
        if isinstance(raw.get(key), str):
            facts[key] = plain(raw[key], 200)
    if isinstance(raw.get("available"), bool):
        facts["available"] = raw["available"]
    arch = [plain(a, 20) for a in raw.get("arch_list") or [] if isinstance(a, str)][:64]
    if arch:
        facts["arch_list"] = arch
        facts["arch_span"] = arch_span(arch)
    count = whole(raw.get("device_count"))
    if count is not None and 0 <= count <= 1024:
        facts["device_count"] = count
    return facts


def _gpu_check(raw: Mapping[str, Any], arch: Sequence[str]) -> GpuCheck | None:
    index = whole(raw.get("index"))
    if index is None or not 0 <= index < 1024:
        return None
    cap_raw = raw.get("capability")
    capability = None
    if isinstance(cap_raw, list) and len(cap_raw) == 2:
        major, minor = whole(cap_raw[0]), whole(cap_raw[1])
        if major is not None and minor is not None and 0 <= major < 100 and 0 <= minor < 100:
            capability = (major, minor)
    memory = whole(raw.get("memory"))
    mm = table(raw.get("matmul"))
    ok = bool(mm.get("finite")) and finite(mm.get("sum")) is not None
    best, first = finite(mm.get("best_s")), finite(mm.get("first_s"))
    n = whole(mm.get("n")) or 2000
    error = plain(raw["error"], 600) if isinstance(raw.get("error"), str) else None
    if ok:
        total, expected = finite(mm.get("sum")), n ** 3 / 4.0
        if total is None or abs(total - expected) > MATMUL_TOLERANCE * expected:
            ok = False
            error = error or (f"the matmul's result is off: sum {total:.4g}, expected "
                              f"{expected:.4g} (a faulty card or driver)")
    elif not error:
        error = f"the matmul's result is not finite ({plain(mm.get('sum'), 40)})" if mm \
            else "no matmul result"
    tflops = 2 * n ** 3 / best / 1e12 if ok and best and best > 0 else None
    return GpuCheck(index, plain(raw.get("name"), 80), capability,
                    memory if memory is not None and memory >= 0 else None,
                    kernels_for(arch, capability) if capability and arch else None, ok,
                    best * 1000 if ok and best is not None else None,
                    first * 1000 if ok and first is not None else None,
                    tflops if tflops is None or math.isfinite(tflops) else None, error)


NO_KERNEL = "no kernel image is available for execution on the device"
NO_GPU_BY_CONFIG = "no GPU, by config (gpu = false): runs train on the CPU"


def torch_findings(torch: Mapping[str, Any], gpus: Sequence[GpuCheck],
                   health: Sequence[GpuHealth], smi_absent: bool, python: str,
                   cuda_visible: str | None, warnings: Sequence[str], has_gpu: bool = True
                   ) -> list[Finding]:
    """What stands between this torch and training; `has_gpu=False` (the box's config says
    it has none): no CUDA is expected, and only a torch that is missing or broken is."""
    found: list[Finding] = []
    if not torch.get("installed"):
        return [Finding(ERROR, "torch.missing", f"torch not installed in {python}",
                        f"install torch for this card first ({wheel_suggestion(None)}), then "
                        f"pip install libreyolo; or set `python` for this box to the "
                        f"interpreter that has torch")]
    if torch.get("import_error"):
        return [Finding(ERROR, "torch.broken", f"torch is installed in {python} but does not "
                        f"import: {torch['import_error']}",
                        "reinstall torch for this card (pip install --force-reinstall torch "
                        f"--index-url {TORCH_INDEX}/cu126)")]
    version = torch.get("version", "?")
    if not has_gpu and (not torch.get("cuda") or not torch.get("available") or not gpus):
        return [Finding(INFO, "gpu.none_by_config", NO_GPU_BY_CONFIG,
                        "train with --device cpu (the launch form's device field: cpu)")]
    if not torch.get("cuda"):
        return [Finding(ERROR, "torch.cpu_only", f"torch {version} is a CPU-only build: it "
                        "cannot use a GPU",
                        f"install {wheel_suggestion(health[0].compute_cap if health else None)}"
                        ", then reinstall libreyolo so pip keeps that torch")]
    if not torch.get("available"):
        driver = next((h.driver for h in health if h.driver), None)
        need = driver_too_old(driver, torch.get("cuda"))
        said = f" (torch says: {plain(warnings[0], 300)})" if warnings else ""
        if health and need:
            newest = newest_cuda_for_driver(driver)
            older = f"a torch built for CUDA {newest}.x" if newest else "an older torch build"
            return [Finding(ERROR, "cuda.driver", f"CUDA not available: driver {driver} is "
                            f"older than torch {version}'s CUDA {torch.get('cuda')} needs "
                            f"(>= {need[0]}.{need[1]})",
                            f"install {older}, or rent a box with a newer driver")]
        if health:
            visible = f"; CUDA_VISIBLE_DEVICES={cuda_visible!r}" if cuda_visible is not None \
                else ""
            return [Finding(ERROR, "cuda.unavailable", f"CUDA not available although "
                            f"nvidia-smi sees {len(health)} GPU(s){visible}{said}",
                            "check CUDA_VISIBLE_DEVICES and that this container was started "
                            "with the GPUs (docker --gpus all)")]
        tail = " (and no nvidia-smi)" if smi_absent else ""
        return [Finding(ERROR, "cuda.unavailable", "CUDA not available: no GPU visible to "
                        f"this container{tail}",
                        "run on a box with a GPU passed into the container (docker --gpus all "
                        "/ the NVIDIA runtime); a stopped and restarted box may have lost its "
                        "GPU")]
    if torch.get("device_error"):
        return [Finding(ERROR, "cuda.devices", f"torch cannot list the GPUs: "
                        f"{torch['device_error']}", "reinstall torch for this card")]
    if not gpus:
        return [Finding(ERROR, "cuda.no_devices", "torch sees no GPU (device_count() == 0)",
                        "check CUDA_VISIBLE_DEVICES")]
    arch = torch.get("arch_list") or []
    for gpu in gpus:
        who = f"GPU {gpu.index} ({gpu.name})"
        no_kernel = (gpu.error and NO_KERNEL in gpu.error) or (
            gpu.capability is not None and arch and gpu.kernels is None and not gpu.matmul_ok)
        if no_kernel and gpu.capability is not None:
            found.append(Finding(ERROR, f"gpu{gpu.index}.no_kernel",
                                 f"no kernel image: this torch wheel has no kernels for "
                                 f"{sm_name(gpu.capability)} (compiled for "
                                 f"{arch_span(arch)}); install a torch build for this card",
                                 f"{who}: install {wheel_suggestion(gpu.capability)}"))
        elif no_kernel:
            found.append(Finding(ERROR, f"gpu{gpu.index}.no_kernel",
                                 f"no kernel image: this torch wheel has no kernels for {who} "
                                 f"(compiled for {arch_span(arch)}); install a torch build "
                                 "for this card", f"install {wheel_suggestion(None)}"))
        elif not gpu.matmul_ok:
            found.append(Finding(ERROR, f"gpu{gpu.index}.matmul",
                                 f"{who}: the 2000x2000 matmul failed: {gpu.error}",
                                 "do not train on this card: rent another box"))
        elif gpu.kernels == "ptx":
            found.append(Finding(INFO, f"gpu{gpu.index}.ptx",
                                 f"{who}: torch runs on it through PTX compiled at load time "
                                 f"(no native {sm_name(gpu.capability or (0, 0))} kernels): "
                                 "slow first steps", f"install {wheel_suggestion(gpu.capability)}"
                                 " for native kernels"))
    return found


def libreyolo_facts(raw: Mapping[str, Any], python: str
                    ) -> tuple[dict[str, Any], list[Finding]]:
    if not raw.get("installed"):
        return {"installed": False}, [Finding(
            ERROR, "libreyolo.missing", f"LibreYOLO is not installed in {python}",
            "pip install libreyolo (after torch, so pip keeps the CUDA torch; extras only as "
            "needed)")]
    facts: dict[str, Any] = {"installed": True,
                             "version": plain(raw.get("version"), 40) or None}
    checks = raw.get("checks")
    if isinstance(checks, Mapping):
        gpus = items(checks.get("gpu"))
        facts["checks"] = {k: plain(v, 200) if not isinstance(v, int | float | bool) else v
                           for k, v in checks.items()
                           if k in ("python", "torch", "cuda", "cudnn", "schema_version")}
        facts["checks"]["gpus"] = len(gpus)
        facts["checks_summary"] = (f"libreyolo checks: torch {plain(checks.get('torch'), 40)}, "
                                   f"CUDA {plain(checks.get('cuda'), 20) or 'none'}, "
                                   f"{len(gpus)} GPU(s)")
        return facts, []
    trouble = _tool_trouble(raw.get("checks_error"))
    return facts, [Finding(WARNING, "libreyolo.checks", f"`libreyolo checks --json` gave no "
                           f"answer: {trouble}", "run `libreyolo checks` on the box to see why")]


def judge_check(parts: Mapping[str, Any], *, box: str, python: str, checked_at: float,
                persistent: str | None = None, runs_roots: Sequence[str] = (),
                failure: Finding | None = None, has_gpu: bool = True) -> CheckReport:
    """The report for one check, from the parts the on-box program sent (untrusted)."""
    findings: list[Finding] = []
    notes: list[str] = []
    host = table(parts.get("host"))
    smi = parts.get("smi") if isinstance(parts.get("smi"), Mapping) else None
    torch_raw = parts.get("torch") if isinstance(parts.get("torch"), Mapping) else None
    busy = parts.get("pcie_busy") if isinstance(parts.get("pcie_busy"), Mapping) else None
    lib_raw = parts.get("libreyolo") if isinstance(parts.get("libreyolo"), Mapping) else None

    health: list[GpuHealth] = []
    smi_absent = False
    if smi is not None:
        if smi.get("absent"):
            smi_absent = True
            notes.append("no nvidia-smi on this box: no GPU health")
        else:
            health, smi_notes = read_smi(smi, busy)
            notes.extend(smi_notes)
            findings.extend(health_findings(health))

    torch: dict[str, Any] = {}
    gpus: list[GpuCheck] = []
    if torch_raw is not None:
        torch = _torch_facts(torch_raw)
        if isinstance(torch_raw.get("import_error"), str):
            torch["import_error"] = plain(torch_raw["import_error"], 600)
        for key in ("device_error", "available_error"):
            if isinstance(torch_raw.get(key), str):
                torch[key] = plain(torch_raw[key], 600)
        arch = torch.get("arch_list") or []
        for raw in (torch_raw.get("gpus") or [])[:64]:
            if isinstance(raw, Mapping) and (gpu := _gpu_check(raw, arch)) is not None:
                gpus.append(gpu)
        warns = [plain(w, 400) for w in torch_raw.get("cuda_warnings") or []
                 if isinstance(w, str)][:5]
        if torch.get("available_error"):
            warns.insert(0, torch["available_error"])
        visible = host.get("cuda_visible_devices")
        findings.extend(torch_findings(torch, gpus, health, smi_absent, python,
                                       plain(visible, 100) if isinstance(visible, str)
                                       else None, warns, has_gpu))
    libreyolo: dict[str, Any] = {}
    if lib_raw is not None:
        libreyolo, lib_findings = libreyolo_facts(lib_raw, python)
        findings.extend(lib_findings)
    place_found, places = place_findings(host, box, persistent, runs_roots)
    findings.extend(place_found)
    if failure is not None:
        findings.insert(0, failure)
    version = host.get("python")
    executable = host.get("executable")
    return CheckReport(
        box=box, python=python, checked_at=checked_at, findings=tuple(findings),
        python_version=plain(version, 20) if isinstance(version, str) else None,
        executable=plain(executable, 300) if isinstance(executable, str) else None,
        torch=torch, gpus=tuple(gpus), health=tuple(health), libreyolo=libreyolo,
        places=places, notes=tuple(notes), complete=failure is None, has_gpu=has_gpu)


# -- doctor ---------------------------------------------------------------------------

@dataclass(frozen=True)
class DoctorFinding:
    severity: str  # error | warning | info (LibreYOLO's own words)
    check_id: str
    message: str
    split: str | None = None
    count: int | None = None
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class DoctorReport:
    """LibreYOLO's `doctor --json` answer for one data set on one box (never re-judged)."""

    box: str
    data: str
    findings: tuple[DoctorFinding, ...] = ()
    summary: Mapping[str, int] = field(default_factory=dict)
    stats: Mapping[str, Any] = field(default_factory=dict)
    failure: str | None = None  # doctor could not run: why, and the fix
    libreyolo_version: str | None = None
    dropped: int = 0
    strict: bool = False  # --strict: warnings fail too
    libreyolo_exit: int | None = None  # LibreYOLO's own exit_code (it knows --strict)
    stand_in: str | None = None  # a demo box: the doctor did not run, and why

    @property
    def errors(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def exit_code(self) -> int:
        """1 on errors, on warnings too under --strict, or when LibreYOLO itself said 1
        (its verdict holds even where findings were trimmed on the box)."""
        if self.failure or self.errors or self.summary.get("errors") or self.libreyolo_exit:
            return EXIT_FAILED
        if self.strict and (self.warnings or self.summary.get("warnings")):
            return EXIT_FAILED
        return EXIT_OK

    def lines(self) -> list[str]:
        head = f"box {self.box}: libreyolo doctor {self.data}"
        if self.stand_in is not None:
            return [head, f"  · {self.stand_in}"]
        if self.failure:
            return [head, f"  ✗ {self.failure}"]
        counts = ", ".join(f"{self.summary.get(k, 0)} {k}" for k in ("errors", "warnings",
                                                                      "infos"))
        if self.strict:
            counts += " (--strict: warnings fail)"
        out = [head + (f" (LibreYOLO {self.libreyolo_version})" if self.libreyolo_version
                       else ""), f"  {counts}"]
        marks = {ERROR: "✗", WARNING: "!", INFO: "·"}
        for f in sorted(self.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 3)):
            where = f" [{f.split}]" if f.split else ""
            out.append(f"  {marks.get(f.severity, '?')} {f.check_id}{where}: {f.message}")
            out.extend(f"      {p}" for p in f.paths[:3])
            if len(f.paths) > 3:
                out.append(f"      ... and {len(f.paths) - 3} more")
        if self.dropped:
            out.append(f"  ({self.dropped} more findings not shown)")
        return out


def judge_doctor(raw: Mapping[str, Any] | None, *, box: str, data: str, python: str,
                 failure: str | None = None, strict: bool = False) -> DoctorReport:
    """Read LibreYOLO's doctor answer (untrusted): its findings as it wrote them; with
    `strict`, its warnings fail the exit code as they do LibreYOLO's own."""
    if failure is not None:
        return DoctorReport(box, data, failure=failure, strict=strict)
    if not isinstance(raw, Mapping):
        return DoctorReport(box, data, failure="the box sent no doctor answer")
    if not raw.get("installed"):
        return DoctorReport(box, data, failure=f"LibreYOLO is not installed in {python}: pip "
                            "install libreyolo there (after torch)")
    version = plain(raw.get("version"), 40) or None
    report = raw.get("report")
    if not isinstance(report, Mapping):
        failed = raw.get("failed")
        return DoctorReport(box, data, libreyolo_version=version,
                            failure=f"libreyolo doctor gave no JSON answer: "
                                    f"{_tool_trouble(failed)}")
    if "error" in report and "findings" not in report:
        suggestion = plain(report.get("suggestion"), 300)
        return DoctorReport(box, data, libreyolo_version=version, failure=(
            f"libreyolo doctor: {plain(report.get('error'), 60)}: "
            f"{plain(report.get('message'), 400)}" + (f" ({suggestion})" if suggestion else "")))
    findings = []
    for item in report.get("findings") or []:
        if not isinstance(item, Mapping):
            continue
        severity = item.get("severity")
        findings.append(DoctorFinding(
            severity=severity if severity in SEVERITY_ORDER else "info",
            check_id=plain(item.get("check_id"), 80) or "?",
            message=plain(item.get("message"), 600),
            split=plain(item.get("split"), 40) or None,
            count=whole(item.get("count")),
            paths=tuple(plain(p, 300) for p in (item.get("paths") or [])[:20]
                        if isinstance(p, str))))
    summary_raw = table(report.get("summary"))
    summary = {k: whole(summary_raw.get(k)) or 0 for k in ("errors", "warnings", "infos")}
    stats_raw = table(report.get("stats"))
    stats: dict[str, Any] = {}
    for key in ("yaml", "root"):
        if isinstance(stats_raw.get(key), str):
            stats[key] = plain(stats_raw[key], 300)
    nc = whole(stats_raw.get("nc"))
    if nc is not None:
        stats["nc"] = nc
    splits = stats_raw.get("splits")
    if isinstance(splits, Mapping):
        stats["splits"] = {plain(name, 40): {k: whole(v) for k, v in counts.items()
                                            if isinstance(k, str) and whole(v) is not None}
                           for name, counts in list(splits.items())[:10]
                           if isinstance(counts, Mapping)}
    return DoctorReport(box, data, tuple(findings), summary, stats,
                        libreyolo_version=version,
                        dropped=whole(report.get("findings_dropped")) or 0, strict=strict,
                        libreyolo_exit=whole(report.get("exit_code")))


# -- the panel's verdict in a box's header ---------------------------------------------------

@dataclass(frozen=True)
class CheckVerdict:
    """The last check of a box, as its header shows it: from a report or the journal."""

    verdict: str  # ok | warnings | problems | failed (the check itself did not finish)
    summary: str
    at: float | None


def verdict_of(report: CheckReport) -> CheckVerdict:
    if report.stand_in is not None:  # nothing was checked: no verdict, not a ✓
        return CheckVerdict("stand-in", report.stand_in, report.checked_at)
    verdict = report.verdict if report.complete else "failed"
    return CheckVerdict(verdict, report.summary, report.checked_at)


def last_check_verdicts(entries: Sequence[Mapping[str, Any]]) -> dict[str, CheckVerdict]:
    """Every box's last `check` in the journal (a restarted panel still shows it)."""
    found: dict[str, CheckVerdict] = {}
    for entry in entries:
        if entry.get("action") != "check" or not isinstance(entry.get("box"), str):
            continue
        outcome = entry.get("outcome")
        if outcome == "cancelled":  # the check before it still stands
            continue
        verdict = outcome if outcome in ("ok", "warnings", "problems", "failed") else "failed"
        found[entry["box"]] = CheckVerdict(str(verdict), plain(entry.get("message"), 300),
                                           finite(entry.get("time")))
    return found
