"""The on-box programs as a box gets them: what each takes from the prelude, then the
program, packed by one function (tui.remote.programs.program_source) for every caller."""

from __future__ import annotations

import ast
import io
import sys
from pathlib import Path

import pytest
from support.imports import ROOT

from tui.remote import framing
from tui.remote.programs import prelude_for, prelude_imports, program_source

ONBOX = ROOT / "tui" / "onbox"
PROGRAMS = sorted(p.stem for p in ONBOX.glob("*.py") if p.stem not in ("__init__", "prelude"))
PRELUDE = (ONBOX / "prelude.py").read_text()


def top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_packed_program_is_what_it_takes_from_the_prelude_then_itself(name: str) -> None:
    own = (ONBOX / f"{name}.py").read_text()
    taken, program = prelude_imports(own)
    assert taken, f"{name} takes nothing from the prelude"
    assert taken <= top_level_names(ast.parse(PRELUDE)), taken
    text = program_source(name)
    assert text.endswith(program)
    # The program's lines keep their numbers after the prelude (a traceback reads true).
    assert program.count("\n") == own.count("\n")
    head = text[:-len(program)]
    for node in ast.parse(head).body:  # the prelude's own statements, nothing else
        assert ast.get_source_segment(head, node) in PRELUDE
    tree = ast.parse(text, feature_version=(3, 6))  # what an old box python reads
    assert taken <= top_level_names(tree)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= sys.stdlib_module_names | {"huggingface_hub", "torch"}, imported


def test_the_prelude_sends_only_what_a_program_uses() -> None:
    """The probe goes with every one-shot refresh: it carries the frame writer alone;
    what a name needs comes along (send: the stream, the lock, the nonce, frame, its count)."""
    probe = top_level_names(ast.parse(prelude_for(frozenset({"frame"}))))
    assert probe == {"frame"}
    assert top_level_names(ast.parse(prelude_for(frozenset({"send"})))) == {
        "send", "frame", "_OUT", "_LOCK", "_NONCE", "_WROTE"}


def test_only_the_prelude_import_is_cut() -> None:
    source = ("import os\nfrom tui.onbox.prelude import (\n    emit,\n    send,\n)\n"
              "x = 1\n")
    assert prelude_imports(source) == (frozenset({"emit", "send"}),
                                       "import os\n" + "\n" * 4 + "x = 1\n")


def test_the_prelude_writes_the_frames_the_client_reads() -> None:
    """The frame writer on the box and tui.remote.framing agree byte for byte."""
    namespace: dict[str, object] = {"NONCE": "n0nce0123"}
    exec(compile(PRELUDE, "prelude", "exec"), namespace)
    out = io.BytesIO()
    namespace["_OUT"] = out
    emit = namespace["emit"]
    assert callable(emit)
    emit({"stage": "hash", "n": [1, 2]})
    payload = b'{"stage":"hash","n":[1,2]}'
    assert out.getvalue() == framing.frame("n0nce0123", payload) == (
        b"\n--gpurent-n0nce0123 26\n" + payload)
    assert framing.unframe("n0nce0123", b"banner\n" + out.getvalue(), max_frame=100) == payload


def test_the_watchdog_ships_packed_programs() -> None:
    """guard.py starts probe.py and push.py from its folder on the box: each file there
    is a packed program, whole without the package."""
    from tui.actions.watchdog import SHIPPED

    for file in SHIPPED:
        assert Path(file).suffix == ".py"
        assert "tui.onbox" not in "".join(
            line for line in program_source(Path(file).stem).splitlines()
            if line.startswith(("import", "from")))
