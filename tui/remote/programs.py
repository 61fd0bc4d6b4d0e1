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
"""

from __future__ import annotations

import base64
import functools
import zlib

ONE_SHOT_COMMAND = "python3 -"
SERVE_CODE = "import sys;exec(sys.stdin.buffer.readline())"
SERVE_COMMAND = f"python3 -c '{SERVE_CODE}'"


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
