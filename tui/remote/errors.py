"""BoxError: a box that gave no answer, with the state it puts the box in and the words
a person can act on."""

from __future__ import annotations

import errno
import socket

from tui.model.box import Connection


class BoxError(Exception):
    """A refresh (or program) that got no answer, with the state it puts the box in."""

    def __init__(self, connection: Connection, message: str) -> None:
        super().__init__(message)
        self.connection = connection
        self.message = message


_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused (is sshd running, is the port right?)",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "TCP connect timed out",
    errno.ECONNRESET: "connection reset",
}


def describe_os_error(exc: OSError) -> str:
    """Words for a failed TCP connect; asyncio's own text hides the errno's meaning."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror})"
    if exc.errno in _ERRNO_WORDS:
        return _ERRNO_WORDS[exc.errno]
    return exc.strerror or str(exc) or type(exc).__name__
