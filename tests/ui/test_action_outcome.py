"""How an action ended, on the box's line and in its toast: an unconfirmed stop is not a
failure. Its command may have worked and the box may still be billing: the panel says
"unknown: may still be billing" (a warning), never "failed" (which invites a second stop)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from rich.cells import cell_len
from rich.console import Console
from support.fleets import box_entry, make_fleet
from support.sshd import KeyPair, Sshd

from tui.app import GpurentApp
from tui.model.config import parse_config
from tui.model.token_rule import decide
from widgets.action_text import action_ended, ended_text

Factory = Callable[..., Sshd]


def test_done_failed_and_unknown_read_apart() -> None:
    done, failed, unknown = (action_ended(0, "done"), action_ended(1, "failed"),
                             action_ended(1, "unknown"))
    assert (done.verdict, done.severity) == ("done", "information")
    assert (failed.verdict, failed.severity) == ("failed", "error")
    assert (unknown.verdict, unknown.severity) == ("unknown: may still be billing", "warning")
    assert "red" not in unknown.style and "yellow" in unknown.style
    # A push has no power outcome: a non-zero code is a failure, as before.
    assert action_ended(1, None).verdict == "failed"
    text = ended_text("stop", 1, "unknown", ["stop lab: unknown: may still be billing. ..."],
                      "10:03")
    assert text.plain.startswith("? stop unknown: may still be billing 10:03\n")
    assert "failed" not in text.plain


def test_the_token_note_is_one_short_line_on_the_box_line() -> None:
    """A first push's token note is a paragraph (the dialog and the CLI show it whole); the
    box's line said it all again over a dozen rows at 80x24, above the push's outcome."""
    fleet = parse_config('[[box]]\nname = "vast-4090x2"\nhost = "h"\n[box.push]\n'
                         'hf_repo = "demo/rects-checkpoints"\n', "f.toml")
    notice = decide(fleet.boxes[0], "push", uses_token=True, entries=[]).notice
    assert notice is not None and len(notice) > 300
    failed = ("vast-4090x2/rects-yolox-n -> hf://demo/rects-checkpoints/rects-yolox-n/: "
              "failed, NOT verified: the Hub said no")
    text = ended_text("push", 1, None, [notice, failed], "10:03")
    lines = text.plain.split("\n")
    assert len(lines) == 3
    assert lines[1] == ("This push sends your Hugging Face token from HF_TOKEN (or "
                        "huggingface_hub's saved token) to box vast-4090x2")
    assert "stranger" not in text.plain
    assert cell_len(lines[1]) <= 2 * 78  # two rows at most, at 80x24
    assert lines[2] == failed  # the outcome itself is said whole


def painted(app: GpurentApp) -> str:
    size = app.size
    console = Console(width=size.width, height=size.height, file=io.StringIO(),
                      force_terminal=True, record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_an_unconfirmed_manual_stop_reads_unknown_not_failed_on_the_panel(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        isolated_dirs: Path) -> None:
    server = sshd_factory()
    fleet = make_fleet(tmp_path, [box_entry(
        server, client_key, "lab", runs_roots=[str(tmp_path)], stop_command="true",
        pricing={"running_usd_per_hr": 0.5})], known_hosts=[server.known_hosts_line()])
    app = GpurentApp(fleet)
    async with app.run_test(size=(120, 30)) as pilot:
        app.board.observe_timeout, app.board.poll_interval = 1.0, 0.2  # it still answers SSH
        app.power("lab", "stop")
        await pilot.pause(0.1)
        for _ in range(600):
            if "lab" not in app.busy:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        shown = painted(app)
        assert "? stop unknown: may still be billing" in shown, shown
        assert "stop failed" not in shown and "lab: stop failed" not in shown
        toasts = [(n.message, n.severity) for n in app._notifications]
        assert ("lab: stop unknown: may still be billing", "warning") in toasts, toasts
        entry = app.journal.entries[-1]
        assert (entry["action"], entry["outcome"]) == ("stop", "unknown")
