"""How a program of tui/onbox reaches a box: packed once, loaded by a one-line loader.

Two ways to start one, both read through stdin so nothing of the program or
its input ever appears on a remote command line:

- one-shot, `python3 -`: stdin is a short loader that unpacks the program,
  sets `NONCE` and replaces `sys.stdin` with the input given, then runs it.
  Works on every box that runs `python3 -` (the demo's and the tests' boxes
  run nothing else).
- long-lived, `SERVE_COMMAND`: a fixed `python3 -c` line that executes the
  first line of stdin (the loader); every later line of stdin is the program's
  to read, so it can answer request after request without starting again.

Either way the program writes its answers as frames (tui.remote.framing)
with the nonce it was given.

What is sent is always `program_source(name)`: what the program takes from
tui/onbox/prelude.py (the frame writer, `alive`, JSON files) followed by the
program, whose import of the prelude is cut out, so each program runs on the
box as one stdlib-only namespace. Every caller that sends a program, or ships
one as a file (the watchdog's folder), takes its text from there.
"""

from __future__ import annotations

import ast
import base64
import functools
import zlib
from importlib import resources

ONE_SHOT_COMMAND = "python3 -"
SERVE_CODE = "import sys;exec(sys.stdin.buffer.readline())"
SERVE_COMMAND = f"python3 -c '{SERVE_CODE}'"


PRELUDE = "tui.onbox.prelude"


def _onbox_text(name: str) -> str:
    return resources.files("tui.onbox").joinpath(f"{name}.py").read_text()


def prelude_imports(source: str) -> tuple[frozenset[str], str]:
    """The names a program takes from the prelude, and the program with those import
    statements blanked (the prelude's text stands before it on the box); its lines keep
    their numbers, so a traceback from the box points at the program's own line."""
    lines = source.splitlines(keepends=True)
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module == PRELUDE:
            names.update(alias.name for alias in node.names)
            for at in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[at] = "\n"
    return frozenset(names), "".join(lines)


def prelude_for(names: frozenset[str]) -> str:
    """The prelude's definitions `names` need, with what those use in turn and the
    modules they use, in the prelude's order: the probe, sent on every one-shot refresh, carries
    the frame writer and not the watchdog's file helpers."""
    source = _onbox_text("prelude")
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    defines: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defines[node.name] = node
        elif isinstance(node, ast.Assign):
            defines.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    needed: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in defines and name not in needed:
            needed.add(name)
            todo.extend(n.id for n in ast.walk(defines[name]) if isinstance(n, ast.Name))
    used = [node for node in body if any(defines.get(name) is node for name in needed)]
    names_used = {n.id for node in used for n in ast.walk(node) if isinstance(n, ast.Name)}
    kept = [node for node in body if node in used or (
        isinstance(node, ast.Import | ast.ImportFrom)
        and any((a.asname or a.name).split(".")[0] in names_used for a in node.names))]
    return "".join("".join(lines[n.lineno - 1:n.end_lineno]) + "\n" for n in kept)


@functools.cache
def program_source(name: str) -> str:
    """The program `tui/onbox/<name>.py` as a box runs it: what it takes from the
    prelude, then the program itself."""
    names, program = prelude_imports(_onbox_text(name))
    return prelude_for(names) + "\n\n" + program


@functools.lru_cache(maxsize=16)
def packed(text: str) -> str:
    """Source (or input) compressed and base85'd: one quote-free line, ~45% of the text."""
    return base64.b85encode(zlib.compress(text.encode(), 9)).decode("ascii")


def _packed_bytes(data: bytes) -> str:
    return base64.b85encode(zlib.compress(data, 6)).decode("ascii")


def one_shot_payload(source: str, nonce: str, stdin: bytes = b"") -> bytes:
    """What `python3 -` reads: the program runs as `__main__` with `NONCE` set and
    `sys.stdin` reading `stdin` (text, or bytes through `sys.stdin.buffer`)."""
    return (
        "import sys,io,base64,zlib\n"
        f"NONCE = {nonce!r}\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(zlib.decompress(base64.b85decode("
        f"{_packed_bytes(stdin)!r}))), encoding='utf-8', errors='replace')\n"
        f"exec(compile(zlib.decompress(base64.b85decode({packed(source)!r})), "
        "'<gpurent-onbox>', 'exec'))\n"
    ).encode()


def serve_loader(source: str) -> bytes:
    """The first stdin line for SERVE_COMMAND: unpack and run the program, whose own
    entry call (at the end of `source`) then reads the following lines."""
    return (f"import base64,zlib;exec(compile(zlib.decompress(base64.b85decode("
            f"{packed(source)!r})),'<gpurent-onbox>','exec'))\n").encode()
