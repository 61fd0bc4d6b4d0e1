"""A box that keeps what it was sent: its interpreter copies every program and parameters
read on stdin (where a Hub token would travel) to a file, for tests of which token went
to which box."""

from __future__ import annotations

import base64
import re
import sys
import zlib
from pathlib import Path


def recording_python(tmp_path: Path, name: str = "python") -> tuple[Path, Path]:
    """(the box's interpreter, the file of what it received). Programs read from stdin
    (`python -`) are copied; anything else (a detached watchdog) runs as it is."""
    received = tmp_path / "box-received"
    wrapper = tmp_path / "box-bin" / name
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = "-" ]; then tee -a "{received}" | '
                       f'"{sys.executable}" "$@"; else exec "{sys.executable}" "$@"; fi\n')
    wrapper.chmod(0o755)
    return wrapper, received


def received_text(received: Path) -> str:
    """What the box was sent, unpacked (programs and their parameters travel compressed)."""
    if not received.exists():
        return ""
    text = received.read_text(errors="replace")
    packed = re.findall(r"b85decode\('([^']*)'\)", text)
    return text + "".join(zlib.decompress(base64.b85decode(p)).decode(errors="replace")
                          for p in packed)
