"""BoxSession.run_program reads every frame a program writes, however the writes fall into
reads: several frames in one write, a frame split across writes (on-box programs that
report step by step, like `check` and `fetch`, depend on it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

PROGRAM = r'''
import sys, time
def frame(payload):
    return b"\n--gpurent-" + NONCE.encode() + b" " + str(len(payload)).encode() + b"\n" + payload
out = sys.stdout.buffer
out.write(b"banner\n" + frame(b"one") + frame(b"two") + frame(b"three")[:9])
out.flush()
time.sleep(0.3)
out.write(frame(b"three")[9:] + frame(b"four")[:-2])
out.flush()
time.sleep(0.3)
out.write(frame(b"four")[-2:] + frame(b"five"))
out.flush()
'''


async def test_every_frame_arrives_in_order(tmp_path: Path, sshd_factory: Callable[..., Sshd],
                                            client_key: KeyPair) -> None:
    server = sshd_factory("box")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key)],
                       known_hosts=[server.known_hosts_line()])
    session = BoxSession(fleet.boxes[0], fleet, host_key_store(fleet))
    seen: list[bytes] = []
    try:
        result = await session.run_program(PROGRAM, timeout=20, max_frames=None,
                                           on_frame=seen.append)
    finally:
        await session.close()
    assert result.frames == [b"one", b"two", b"three", b"four", b"five"]
    assert seen == result.frames and result.exit_status == 0
