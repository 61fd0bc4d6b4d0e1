"""Frames: how an answer from a box is told apart from whatever else its shell prints.

Rented images print login banners, motd lines and shell chatter on stdout
(and stderr) around every command. Every program we run on a box therefore
writes each answer as a frame:

    \\n--gpurent-<nonce> <length>\\n<length bytes of payload>

where `<nonce>` is a fresh random token the client put in its request, so
noise cannot be mistaken for a frame, and `<length>` lets the client take
exactly the payload and nothing around it. `FrameReader` finds frames in a
byte stream fed in pieces, ignores everything else, and bounds what it keeps:
a frame longer than `max_frame` or more than `max_noise` bytes of noise is an
error, so a box that floods cannot take the client's memory with it.

The on-box side is two lines (`frame` in tui/onbox/prelude.py, packed with every program);
`frame()` here is the same, for tests and the panel's own stand-ins.
"""

from __future__ import annotations

import re
import secrets
import zlib

PREFIX = b"--gpurent-"
MAX_LENGTH_DIGITS = 12
_NONCE = re.compile(r"[A-Za-z0-9]{8,64}")


class FrameError(ValueError):
    """The stream cannot hold a valid frame: too big, too noisy, or malformed."""


def new_nonce() -> str:
    """A per-request token: 24 url-safe-ish characters, letters and digits only."""
    return secrets.token_hex(12)


def frame(nonce: str, payload: bytes) -> bytes:
    """One frame, as the programs on the box write it."""
    return b"\n" + PREFIX + nonce.encode("ascii") + b" " + str(len(payload)).encode() + b"\n" \
        + payload


class FrameReader:
    """Incremental: `feed(data)` returns every payload completed by `data`, in order."""

    def __init__(self, nonce: str, *, max_frame: int, max_noise: int = 1 << 20) -> None:
        if not _NONCE.fullmatch(nonce):
            raise ValueError("a nonce is 8-64 letters and digits")
        self.header = PREFIX + nonce.encode("ascii") + b" "
        self.max_frame = max_frame
        self.max_noise = max_noise
        self.noise = 0          # bytes seen that belong to no frame
        self._buf = bytearray()
        self._want: int | None = None  # payload bytes still to come for the open frame

    def take_rest(self) -> bytes:
        """What was fed after the last whole frame (for a reader of the next nonce)."""
        if self._want is not None:
            raise FrameError("the answer was cut short")
        rest, self._buf = bytes(self._buf), bytearray()
        return rest

    @property
    def in_frame(self) -> bool:
        """True while a frame's header has been read and its payload is incomplete."""
        return self._want is not None

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while True:
            if self._want is None and not self._find_header():
                return out
            assert self._want is not None
            if len(self._buf) < self._want:
                return out
            out.append(bytes(self._buf[:self._want]))
            del self._buf[:self._want]
            self._want = None

    def _find_header(self) -> bool:
        at = self._buf.find(self.header)
        if at < 0:
            # Keep only what could still be the start of a header (and the newline
            # before it); the rest is noise.
            keep = len(self.header)
            if len(self._buf) > keep:
                self._skip(len(self._buf) - keep)
            return False
        end = self._buf.find(b"\n", at + len(self.header))
        if end < 0:
            if len(self._buf) - at > len(self.header) + MAX_LENGTH_DIGITS + 1:
                raise FrameError("a frame header without a length")
            self._skip(at)
            return False
        digits = bytes(self._buf[at + len(self.header):end])
        if not digits.isdigit() or len(digits) > MAX_LENGTH_DIGITS:
            raise FrameError(f"a frame header with a bad length {digits[:20]!r}")
        length = int(digits)
        if length > self.max_frame:
            raise FrameError(f"an answer of {length} bytes, over the cap of {self.max_frame}")
        # The newline before the header belongs to the frame, not to the noise.
        start = at - 1 if at and self._buf[at - 1] == 0x0A else at
        self._skip(start)
        del self._buf[:at - start + len(self.header) + len(digits) + 1]
        self._want = length
        return True

    def _skip(self, count: int) -> None:
        """Drop `count` bytes of noise, and refuse to go on past the noise cap."""
        if count <= 0:
            return
        del self._buf[:count]
        self.noise += count
        if self.noise > self.max_noise:
            raise FrameError(f"more than {self.max_noise} bytes of output that is not an "
                             "answer (a shell printing without end?)")


def inflate(data: bytes, limit: int) -> bytes:
    """zlib-decompress `data`, refusing to produce more than `limit` bytes.

    zlib packs up to ~1000:1, so a 1 MB answer could otherwise become a 1 GB
    string in the client: the output is bounded before it is allocated.
    """
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise FrameError(f"the answer is not zlib data ({exc})") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise FrameError(f"the answer decompresses to more than {limit} bytes, over the cap")
    if not inflater.eof:
        raise FrameError("the answer's zlib data is cut short")
    return out


def unframe(nonce: str, data: bytes, *, max_frame: int, max_noise: int = 1 << 20) -> bytes:
    """The one frame in a whole output (a one-shot program); FrameError if there is none."""
    reader = FrameReader(nonce, max_frame=max_frame, max_noise=max_noise)
    frames = reader.feed(data)
    if not frames:
        if reader.in_frame:
            raise FrameError("the answer was cut short")
        raise FrameError("no answer in the output")
    return frames[0]
