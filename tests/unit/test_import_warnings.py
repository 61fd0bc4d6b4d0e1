"""What importing gpurent-tui prints: nothing of asyncssh's DSA deprecation.

A fresh install gets cryptography 51, which warns once per DSA type asyncssh 2.24 names
at import: some fifteen lines on stderr before every command's own words. The same
warning raised anywhere else still shows."""

from __future__ import annotations

import subprocess
import sys

WARN = ("import tui, warnings\n"
        "warnings.warn_explicit('DSA is deprecated and support will be removed in a future "
        "release.', UserWarning, 'asyncssh/crypto/misc.py', 32, module='asyncssh.crypto.misc')\n"
        "warnings.warn_explicit('DSA is deprecated', UserWarning, 'elsewhere.py', 7, "
        "module='elsewhere')\n")


def test_asyncssh_dsa_deprecation_is_not_printed_but_others_are() -> None:
    done = subprocess.run([sys.executable, "-W", "default", "-c", WARN],
                          capture_output=True, text=True, timeout=60, check=True)
    assert "asyncssh/crypto/misc.py" not in done.stderr
    assert "elsewhere.py:7" in done.stderr
