"""DESIGN.md's layering, enforced: each layer imported alone in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
            for p in ROOT.glob("tui/**/__init__.py")}


def modules_of(package: str) -> list[str]:
    base = ROOT / package.replace(".", "/")
    return sorted(f"{package}.{p.stem}" for p in base.glob("*.py") if p.stem != "__init__")


def loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return set(out.split())


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("module", ["tui.model", *modules_of("tui.model")])
def test_model_is_pure(module: str) -> None:
    loaded = loaded_after_import(module)
    assert not top(loaded) & {"textual", "asyncssh", "httpx", "huggingface_hub", "widgets",
                              "asyncio", "socket", "subprocess"}
    assert not {n for n in loaded if n.startswith(("tui.remote", "tui.actions", "tui.app",
                                                   "tui.screens", "tui.providers"))}


def textual_free_modules() -> list[str]:
    """Every module of tui except the app and its screens (the only Textual code)."""
    found = []
    for path in sorted((ROOT / "tui").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        if name.startswith(("tui.app", "tui.screens")) or "probe_script" in name:
            continue
        found.append(name)
    return found


@pytest.mark.parametrize("module", textual_free_modules())
def test_io_layers_and_cli_do_not_load_textual(module: str) -> None:
    loaded = loaded_after_import(module)
    assert "textual" not in top(loaded)
    assert not {n for n in loaded if n.startswith(("tui.app", "tui.screens", "widgets"))}


def test_widgets_never_import_tui() -> None:
    assert not {n for n in loaded_after_import("widgets") if n.split(".")[0] == "tui"}


def test_probe_is_stdlib_only_and_old_python_syntax() -> None:
    source = (ROOT / "tui" / "remote" / "probe_script.py").read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
        assert not isinstance(node, ast.NamedExpr | ast.Match)
    assert imported and imported <= sys.stdlib_module_names
    assert "from __future__ import annotations" not in source


def test_only_two_import_packages_are_shipped() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'packages = ["tui", "widgets"]' in text
    assert 'gpurent-tui = "tui.__main__:main"' in text
