"""The panel's own guard, against a real sshd box and the loopback Vast stand-in: a
completed run pushed with no key pressed, what is still unpushed, a box its provider
stopped behind our back named in its header."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet, runs_root_with
from support.pilot import box_text, until
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd

from tui.app import GpurentApp
from tui.model.cost import usd
from tui.model.unpushed import at_stake
from tui.screens.confirm import ConfirmScreen
from tui.store.journal import Journal


async def test_the_panel_pushes_a_completed_run_unasked_and_names_a_preempted_box(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", "vast-key")
    server = sshd_factory()
    root = runs_root_with(tmp_path, "yolox_completed", "yolox_failed")
    weights = root / "yolox_completed" / "weights"
    weights.mkdir()
    (weights / "best.pt").write_bytes(b"b" * 4096)
    (weights / "last.pt").write_bytes(b"l" * 4096)
    (root / "yolox_failed" / "weights").mkdir()
    (root / "yolox_failed" / "weights" / "last.pt").write_bytes(b"f" * 4096)
    dest = tmp_path / "pushed"
    bare = runs_root_with(tmp_path, "yolox_failed", name="bare")  # pushed nowhere at all
    # Outbid: Vast reads the instance exited, and no stop of ours is in the journal.
    # A watchdog was armed on "guarded" and the panel never saw it act: its stop, or the
    # provider's? (the watchdog's own `stop done` is written when the box is already gone)
    Journal().record(box="guarded", action="guard", outcome="armed")
    with VastServer("vast-key", [vast_instance(7, actual_status="exited",
                                               cur_state="stopped"),
                                 vast_instance(8, actual_status="exited",
                                               cur_state="stopped")]) as vast:
        config = make_fleet(tmp_path, [
            box_entry(server, client_key, "alpha", runs_roots=[str(root)],
                      push={"local_dir": str(dest), "on_complete": True},
                      pricing={"running_usd_per_hr": 2.0}),
            box_entry(server, client_key, "nowhere", runs_roots=[str(bare)],
                      pricing={"running_usd_per_hr": 2.0}),
            {**box_entry(server, client_key, "outbid"), "port": 1, "provider": "vast",
             "instance_id": "7"},
            {**box_entry(server, client_key, "guarded"), "port": 1, "provider": "vast",
             "instance_id": "8"},
        ], known_hosts=[server.known_hosts_line()], refresh_seconds=1,
            providers={"vast": {"base_url": vast.url}})
        app = GpurentApp(config)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: "milestone push (run completed) done" in
                        box_text(app, "alpha"))
            pushes = [e for e in app.journal.entries if e["action"] == "push"]
            assert len(pushes) == 1 and pushes[0]["verified"] is True
            assert pushes[0]["run"] == "yolox_completed"
            assert (dest / "alpha" / "yolox_completed" / "weights" / "best.pt").exists()
            await until(pilot, lambda: "verified" in box_text(app, "alpha"))
            text = box_text(app, "alpha")
            # The failed run was never pushed: what a crash of the box would cost is shown.
            assert "unpushed: 2 epochs" in text, text
            assert text.count("unpushed:") == 1, text
            # The money a crash would cost now, and on a box with no push destination too
            # (the one with the most at stake): its epochs' own times x its rate.
            for name in ("alpha", "nowhere"):
                failed = next(r for r in app.states[name].runs if r.name == "yolox_failed")
                stake = at_stake(failed, None, 2.0)
                assert stake is not None and stake.usd is not None and stake.usd > 0
                await until(pilot, lambda n=name: "unpushed: 2 epochs, " in box_text(app, n))
                assert f"unpushed: 2 epochs, {usd(stake.usd)} of GPU time" in \
                    box_text(app, name), box_text(app, name)
            await until(pilot, lambda: "stopped by the provider (outbid / preempted?)" in
                        box_text(app, "outbid"))
            assert "S starts it again" in box_text(app, "outbid")
            await until(pilot, lambda: "stopped by its watchdog or the provider?: S starts "
                        "it again" in box_text(app, "guarded"))
            assert "preempted" not in box_text(app, "guarded")
            # No run of it to put the cursor on: the palette offers start and destroy.
            offered = {c.title: c for c in app.get_system_commands(app.screen)}
            assert "Destroy outbid" in offered
            assert offered["Destroy guarded"].help.startswith(
                "stopped by its watchdog or the provider?")
            offered["Start outbid"].callback()
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.title_text == "Start outbid?"
            await pilot.press("escape")
            await pilot.press("q")
