"""Frames survive banners, chatter and any split of the stream; floods are refused."""

from __future__ import annotations

import zlib

import pytest

from tui.remote.framing import FrameError, FrameReader, frame, inflate, new_nonce, unframe

BANNER = b"Welcome to your vast.ai container! This session is tmux-managed...\r\n\x1b[0m"


def test_a_frame_inside_noise_is_found_exactly() -> None:
    nonce = new_nonce()
    payload = b'{"v": 1}\n--gpurent-notme 3\nabc'
    data = BANNER + frame(nonce, payload) + b"\nlogout\n"
    assert unframe(nonce, data, max_frame=1000) == payload


def test_every_split_of_the_stream_gives_the_same_frames() -> None:
    nonce = new_nonce()
    payloads = [b"", b"x", b"\n" * 5, bytes(range(256))]
    data = BANNER + b"".join(frame(nonce, p) + b"chatter" for p in payloads)
    for size in (1, 2, 3, 7, 64, len(data)):
        reader = FrameReader(nonce, max_frame=1000)
        got = []
        for i in range(0, len(data), size):
            got.extend(reader.feed(data[i:i + size]))
        assert got == payloads, size
        assert len(BANNER) <= reader.noise <= len(BANNER) + len(b"chatter") * 4


def test_another_nonce_is_noise() -> None:
    data = frame("a" * 24, b"forged") + frame("b" * 24, b"real")
    assert unframe("b" * 24, data, max_frame=100) == b"real"


def test_caps() -> None:
    nonce = new_nonce()
    with pytest.raises(FrameError, match="over the cap"):
        unframe(nonce, frame(nonce, b"x" * 101), max_frame=100)
    with pytest.raises(FrameError, match="not an answer"):
        unframe(nonce, b"y" * 5000 + frame(nonce, b"ok"), max_frame=100, max_noise=4096)
    with pytest.raises(FrameError, match="bad length"):
        unframe(nonce, b"--gpurent-" + nonce.encode() + b" 1e9\n", max_frame=100)
    with pytest.raises(FrameError, match="cut short"):
        unframe(nonce, frame(nonce, b"abcdef")[:-2], max_frame=100)
    with pytest.raises(FrameError, match="no answer"):
        unframe(nonce, BANNER, max_frame=100)


def test_noise_is_not_kept_in_memory() -> None:
    reader = FrameReader(new_nonce(), max_frame=10, max_noise=1 << 30)
    for _ in range(100):
        reader.feed(b"z" * 100_000)
    assert len(reader._buf) < 64


def test_inflate_is_bounded_before_it_allocates() -> None:
    bomb = zlib.compress(b"\0" * (16 << 20), 1)  # 16 MiB from ~70 KB, for a 1 MiB cap
    with pytest.raises(FrameError, match="over the cap"):
        inflate(bomb, 1 << 20)
    assert inflate(zlib.compress(b"x" * 100), 100) == b"x" * 100
    with pytest.raises(FrameError, match="not zlib"):
        inflate(b"{not zlib}", 100)
    with pytest.raises(FrameError, match="cut short"):
        inflate(zlib.compress(b"y" * 1000)[:-4], 10_000)


def test_what_follows_a_frame_is_kept_for_the_next_reader() -> None:
    first, second = new_nonce(), new_nonce()
    reader = FrameReader(first, max_frame=100)
    assert reader.feed(frame(first, b"one") + b"noise" + frame(second, b"two")[:5]) == [b"one"]
    nxt = FrameReader(second, max_frame=100)
    assert nxt.feed(reader.take_rest() + frame(second, b"two")[5:]) == [b"two"]
