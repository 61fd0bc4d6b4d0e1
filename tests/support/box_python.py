"""Interpreters for a test box: a venv without torch, or one with a stand-in `torch`
(and a stand-in `libreyolo` CLI, for a box that passes the check).

No GPU is lent to the test suite, so the GPU paths of `check` run against a
stand-in `torch` package put on a box interpreter's path. It answers the few
calls the check makes (version, CUDA build, is_available, arch list, device
properties, rand, matmul, sum, synchronize) from a JSON file beside it, and
fails the way real torch fails: a wheel without kernels for the card raises
torch's own error text from its first kernel (`torch.rand` on the device).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# torch's real text (c10/cuda/CUDAException.cpp around cudaGetErrorString) for a
# wheel built without kernels for the card's architecture.
NO_KERNEL_IMAGE = (
    "CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")

_TORCH_INIT = r'''
"""A stand-in for torch on a test box: answers from standin.json beside it."""
import json as _json
import os as _os
import time as _time

_CFG = _json.load(open(_os.path.join(_os.path.dirname(__file__), "standin.json")))
__version__ = _CFG.get("version", "2.14.1+cu130")


class AcceleratorError(RuntimeError):
    pass


class _Version:
    cuda = _CFG.get("cuda", "13.0")


version = _Version()


class _Props:
    def __init__(self, memory):
        self.total_memory = memory


class _Tensor:
    def __init__(self, n, device):
        self.n, self.device = n, device

    def __matmul__(self, other):
        _time.sleep(_CFG.get("matmul_sleep", 0.0))
        return _Tensor(self.n, self.device)

    def sum(self):
        return _Scalar(_CFG.get("sum", self.n ** 3 / 4.0))


class _Scalar:
    def __init__(self, value):
        self.value = value

    def __float__(self):
        return float(self.value)


def _gpu(index):
    return _CFG["gpus"][index]


class cuda:
    @staticmethod
    def is_available():
        return bool(_CFG.get("available", True))

    @staticmethod
    def device_count():
        return len(_CFG.get("gpus", []))

    @staticmethod
    def get_arch_list():
        return list(_CFG.get("arch_list", []))

    @staticmethod
    def get_device_name(index):
        return _gpu(index)["name"]

    @staticmethod
    def get_device_capability(index):
        return tuple(_gpu(index)["capability"])

    @staticmethod
    def get_device_properties(index):
        return _Props(_gpu(index).get("memory", 24 << 30))

    @staticmethod
    def synchronize(index=None):
        pass


def rand(*shape, device="cpu"):
    index = int(str(device).split(":")[1]) if ":" in str(device) else 0
    if _gpu(index).get("crash"):  # a driver fault that takes the process down
        import signal
        _os.kill(_os.getpid(), signal.SIGSEGV)
    error = _gpu(index).get("error")
    if error:
        raise AcceleratorError(error)
    return _Tensor(shape[0], device)
'''


def make_venv(directory: Path) -> Path:
    """A venv of this machine's Python without its site-packages (so without torch).

    Returns the venv's python, for the box's `python` key.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True,
                   capture_output=True)
    return directory / "bin" / "python"


def site_packages(python: Path) -> Path:
    found = sorted((python.parent.parent / "lib").glob("python3*/site-packages"))
    assert found, f"no site-packages beside {python}"
    return found[0]


def install_standin_torch(python: Path, config: dict[str, Any]) -> None:
    """Put the stand-in torch into the venv of `python`, answering as `config` says."""
    package = site_packages(python) / "torch"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_TORCH_INIT)
    (package / "standin.json").write_text(json.dumps(config))


def gpu(name: str, capability: tuple[int, int], *, error: str | None = None,
        memory: int = 80 << 30, crash: bool = False) -> dict[str, Any]:
    return {"name": name, "capability": list(capability), "error": error, "memory": memory,
            "crash": crash}


_LIBREYOLO_CLI = r'''
"""A stand-in for LibreYOLO's CLI: `checks --json` answers from checks.json beside it."""
import json
import os
import sys


def entrypoint():
    here = os.path.dirname(__file__)
    if sys.argv[1:2] == ["checks"]:
        with open(os.path.join(here, "checks.json")) as f:
            sys.stdout.write(f.read() + "\n")
        return 0
    sys.stderr.write("stand-in libreyolo: %s not supported\n" % sys.argv[1:])
    return 2
'''


def install_standin_libreyolo(python: Path, checks: dict[str, Any],
                              version: str = "1.6.0") -> None:
    """A `libreyolo` package whose `checks --json` prints `checks` (and its dist-info)."""
    site = site_packages(python)
    package = site / "libreyolo"
    (package / "cli").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (package / "cli" / "__init__.py").write_text(_LIBREYOLO_CLI)
    (package / "cli" / "checks.json").write_text(json.dumps(checks))
    info = site / f"libreyolo-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: libreyolo\nVersion: {version}\n")
