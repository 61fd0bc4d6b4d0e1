"""A box at rest, watched over a real sshd: looked at once a minute while it is silent,
running again at the first answer (started from the provider's console, say)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.model.box import Connection
from tui.model.rest import REST_PROBE_SECONDS, Rest
from tui.remote.watch import BoxWatcher


async def test_a_box_at_rest_is_looked_at_rarely_and_runs_again_when_it_answers(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "b")],
                       known_hosts=[server.known_hosts_line()])
    now = [1_800_000_000.0]
    watcher = BoxWatcher(fleet.boxes[0], fleet, clock=lambda: now[0], jitter=lambda: 0.0)
    rest: list[Rest | None] = [None]
    watcher.resting = lambda: rest[0]
    try:
        assert (await watcher.refresh()).connection is Connection.OK
        server.stop()  # the box was stopped
        down = await watcher.refresh()
        assert down.connection is not Connection.OK and down.rest is None
        assert watcher.next_delay() < 5  # not at rest: the usual backoff
        rest[0] = Rest("stopped", "you", now[0])  # our stop, seen to land, journalled
        resting = await watcher.refresh()
        assert resting.rest == rest[0]
        assert watcher.next_delay() == REST_PROBE_SECONDS
        server.start()  # started again from the provider's console
        back = await watcher.refresh()
        assert back.connection is Connection.OK and back.rest is None
        assert watcher.next_delay() == fleet.refresh_seconds
    finally:
        await watcher.close()
