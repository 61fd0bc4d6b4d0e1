"""Logins as the in-process servers count them (benchmarks/scale.py --jump reads them):
boxes behind one jump host cost the jump host one login however many there are, and
each box one; a connection that is refused its login is no login."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import asyncssh
import pytest
from support.fleets import make_fleet, runs_root_with
from support.sshd import KeyPair

from tui.demo.servers import BoxServer
from tui.model.box import Connection
from tui.remote.watch import BoxWatcher


async def test_three_boxes_behind_one_jump_host_log_in_there_once(
        tmp_path: Path, client_key: KeyPair) -> None:
    root = runs_root_with(tmp_path, "yolox_completed")
    jump = BoxServer("jump", client_key.public_line, jump=True)
    boxes = [BoxServer(f"box{i}", client_key.public_line) for i in range(3)]
    for server in (jump, *boxes):
        await server.start()
    fleet = make_fleet(
        tmp_path,
        [{"name": b.name, "host": "127.0.0.1", "port": b.port, "user": "root",
          "identity_file": str(client_key.private_path), "runs_roots": [str(root)],
          "jump": f"root@127.0.0.1:{jump.port}"} for b in boxes],
        known_hosts=[jump.known_hosts_line(), *(b.known_hosts_line() for b in boxes)])
    watchers = [BoxWatcher(box, fleet) for box in fleet.boxes]
    try:
        for _ in range(2):
            states = await asyncio.gather(*(w.refresh() for w in watchers))
            assert all(s.connection is Connection.OK for s in states), \
                [s.error for s in states]
        assert jump.stats.logins == 1
        assert sorted(jump.stats.forwards) == sorted(b.port for b in boxes)
        assert [b.stats.logins for b in boxes] == [1, 1, 1]
    finally:
        await asyncio.gather(*(w.close() for w in watchers))
        for server in (jump, *boxes):
            await server.close()


async def test_a_refused_key_is_a_connection_and_no_login(client_key: KeyPair) -> None:
    box = BoxServer("box", client_key.public_line)
    await box.start()
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    try:
        with pytest.raises(asyncssh.PermissionDenied):
            conn = await asyncssh.connect(
                "127.0.0.1", box.port, username="root", client_keys=[stranger],
                known_hosts=None, agent_path=None, config=None)
            with contextlib.suppress(Exception):
                conn.close()
        assert (box.stats.connections, box.stats.logins) == (1, 0)
    finally:
        await box.close()
