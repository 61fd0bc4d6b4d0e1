"""The layering docs/architecture.md describes, enforced.

Every import in every module (lazy ones inside functions too) points down
the layer table below; docs/architecture.md's "Layers" says what each layer
holds and why. tests/io/test_imports.py checks the same at run time.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from support.imports import ROOT, all_modules, imports_of, module_name

# layer -> the project packages its modules may import (besides their own layer).
# Low to high: model < store < remote, providers < actions < runtime < demo < app/screens
# < CLI.
LAYERS: dict[str, tuple[str, ...]] = {
    "tui.model": (),
    "tui.store": ("tui.model",),
    "tui.onbox": (),
    "tui.remote": ("tui.model", "tui.store", "tui.onbox"),
    "tui.providers": ("tui.model", "tui.store"),
    "tui.actions": ("tui.model", "tui.store", "tui.onbox", "tui.remote", "tui.providers"),
    "tui.runtime": ("tui.model", "tui.store", "tui.remote", "tui.providers", "tui.actions"),
    "tui.demo": ("tui.model", "tui.store", "tui.onbox", "tui.remote", "tui.providers",
                 "tui.actions"),
    "widgets": ("tui.model",),
    "tui.app": ("tui", "widgets"),
    "tui.screens": ("tui", "widgets"),
    "tui.messages": ("tui.model",),
    "tui.memory": ("tui.model",),
    "tui.__main__": ("tui", "widgets"),
    "tui.cli": ("tui", "widgets"),
    "tui": (),  # tui/__init__.py
}
UI_ONLY = ("textual", "rich", "textual_plotext", "plotext")
IO_LIBS = ("asyncssh", "httpx", "httpx2", "huggingface_hub", "asyncio", "socket",
           "subprocess", "http", "urllib")


def layer_of(module: str) -> str:
    best = ""
    for layer in LAYERS:
        if (module == layer or module.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    assert best, f"{module} belongs to no layer: add it to LAYERS in {__file__}"
    return best


def project(name: str) -> bool:
    return name.split(".")[0] in ("tui", "widgets")


@pytest.mark.parametrize("path", all_modules(), ids=module_name)
def test_imports_point_down(path: Path) -> None:
    module = module_name(path)
    layer = layer_of(module)
    allowed = (layer, *LAYERS[layer])
    wrong = set()
    for name in imports_of(path):
        if not project(name):
            continue
        if name in ("tui", "widgets") and name in allowed:
            continue
        target = layer_of(name) if name not in ("tui",) else "tui"
        if name == "tui" and layer != "tui":
            continue  # `from tui import __version__`
        if not any(target == a or target.startswith(a + ".") for a in allowed):
            wrong.add(f"{name} ({target})")
    assert not wrong, f"{module} ({layer}) imports upward or sideways: {sorted(wrong)}"


@pytest.mark.parametrize("path", [p for p in all_modules()
                                  if layer_of(module_name(p)) not in
                                  ("tui.app", "tui.screens", "tui.__main__", "tui.cli", "widgets",
                                   "tui.messages")],
                         ids=module_name)
def test_below_the_ui_nothing_imports_textual(path: Path) -> None:
    tops = {n.split(".")[0] for n in imports_of(path)}
    assert not tops & set(UI_ONLY), module_name(path)


@pytest.mark.parametrize("path", sorted((ROOT / "widgets").glob("*_text.py")), ids=module_name)
def test_widget_text_formatters_are_rich_only(path: Path) -> None:
    """The text a widget draws is made without Textual: testable and reusable alone."""
    tops = {n.split(".")[0] for n in imports_of(path)}
    assert "textual" not in tops and "textual_plotext" not in tops, module_name(path)


@pytest.mark.parametrize("path", sorted((ROOT / "tui" / "model").rglob("*.py")),
                         ids=module_name)
def test_model_is_pure(path: Path) -> None:
    tops = {n.split(".")[0] for n in imports_of(path)}
    assert not tops & set(IO_LIBS), module_name(path)


@pytest.mark.parametrize("path", sorted((ROOT / "tui" / "onbox").glob("*.py")), ids=module_name)
def test_onbox_programs_are_stdlib_only_and_old_python_syntax(path: Path) -> None:
    """They run on the box's own python3, which may be 3.6."""
    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.NamedExpr | ast.Match), f"{path.name}:{node.lineno}"
        if isinstance(node, ast.JoinedStr):  # f-strings are 3.6, but `=` specifiers are not
            assert "=}" not in ast.unparse(node), f"{path.name}:{node.lineno}"
    tops = {n.split(".")[0] for n in imports_of(path)} - {"tui"}
    # Imported late, inside functions, and only where needed: huggingface_hub for a
    # Hub push or fetch, torch by the check (which survives its absence).
    assert tops <= sys.stdlib_module_names | {"huggingface_hub", "torch"}, tops
    # The prelude only: programs.program_source puts its text in place of that import.
    assert not {n for n in imports_of(path)
                if project(n) and n.split(".")[:3] != ["tui", "onbox", "prelude"]}
    assert "from __future__ import annotations" not in source


def test_only_two_import_packages_are_shipped() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'packages = ["tui", "widgets"]' in text
    assert 'gpurent-tui = "tui.cli.main:main"' in text


@pytest.mark.parametrize("path", [p for p in all_modules()
                                  if layer_of(module_name(p)) == "tui.screens"],
                         ids=module_name)
def test_no_screen_imports_the_app(path: Path) -> None:
    """Screens read a view and send requests up as messages (tui/screens/view.py): the
    app imports the screens, never the other way round."""
    assert not [n for n in imports_of(path) if n == "tui.app" or n.startswith("tui.app.")], \
        module_name(path)
