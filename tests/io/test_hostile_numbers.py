"""One box's hostile numbers never take down the fleet, over real sshd boxes.

A box whose python3 alters its probe answers (tests/support/hostile_answers.py) lists
`weights/epoch_<5000 digits>.pt`, or answers with the fuzzer's hostile answers (fixed
seed); a second, good box is watched beside it. `status` (text and --json), `destroy`
(refused, then --force-unpushed), `watch` and the panel each report that box's answer
as bad, or the odd file as odd, and carry on with the other box: nothing raises.
A real file named `epoch_<245 digits>.pt` (as long as a file name may be) lies in the
hostile box's runs root too.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console
from support.fleets import box_entry, make_fleet, runs_root_with
from support.hostile_answers import (
    crafted_probe_env,
    hostile_answers,
    send_answer,
    send_huge_checkpoint,
)
from support.hub_server import HubServer
from support.pilot import box_text, until
from support.provider_servers import VastServer, vast_instance
from support.sshd import KeyPair, Sshd
from support.watch_output import WatchOutput

from tui.__main__ import main
from tui.actions.stage import fetch, stage
from tui.app import GpurentApp
from tui.model.config import FleetConfig

Factory = Callable[..., Sshd]
ROOT = Path(__file__).resolve().parents[2]
SEED = 22
FUZZ_SECONDS = 6.0
HUB_TOKEN = "hf_NumbersTestToken0123456789abcdefgh"
LONG_REAL = "epoch_" + "7" * 245 + ".pt"  # 254 bytes: a name a filesystem takes


@pytest.fixture
def vast(monkeypatch: pytest.MonkeyPatch) -> Iterator[VastServer]:
    monkeypatch.setenv("VAST_API_KEY", "vast-secret-key")
    monkeypatch.delenv("VAST_URL", raising=False)
    server = VastServer("vast-secret-key", [vast_instance(12345678)])
    server.start()
    yield server
    server.close()


def two_boxes(tmp_path: Path, sshd_factory: Factory, key: KeyPair, vast: VastServer,
              **top: object) -> tuple[FleetConfig, Path]:
    """A good box and a hostile one (on Vast, so it can be destroyed), each with a
    completed run and its checkpoints; and the hostile box's answer script."""
    script = tmp_path / "crafted.py"
    good = sshd_factory("good")
    bad = sshd_factory("bad", env=crafted_probe_env(tmp_path, script))
    roots = {}
    for name in ("good", "bad"):
        root = runs_root_with(tmp_path, "yolox_completed", name=f"runs-{name}")
        weights = root / "yolox_completed" / "weights"
        weights.mkdir()
        (weights / "best.pt").write_bytes(b"b" * 4096)
        (weights / "last.pt").write_bytes(b"l" * 4096)
        roots[name] = root
    (roots["bad"] / "yolox_completed" / "weights" / LONG_REAL).write_bytes(b"e" * 4096)
    # A run training under a live pid (this test's own): the sizing projects it.
    running = runs_root_with(tmp_path, "yolox_running", name="runs-bad") / "yolox_running"
    status = json.loads((running / "status.json").read_text())
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    later = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 3600))
    status.update(pid=os.getpid(), started_at=now, updated_at=later)  # not stalled for 1 h
    (running / "status.json").write_text(json.dumps(status))
    (running / "weights").mkdir()
    (running / "weights" / "last.pt").write_bytes(b"r" * 4096)
    fleet = make_fleet(
        tmp_path,
        [box_entry(good, key, "good", runs_roots=[str(roots["good"])],
                   push={"local_dir": str(tmp_path / "pushed"), "on_complete": True}),
         box_entry(bad, key, "bad", runs_roots=[str(roots["bad"])], provider="vast",
                   instance_id="12345678",
                   push={"local_dir": str(tmp_path / "pushed"), "every_epochs": 1})],
        known_hosts=[good.known_hosts_line(), bad.known_hosts_line()],
        providers={"vast": {"base_url": vast.url}}, **top)
    return fleet, script


def test_a_5000_digit_checkpoint_leaves_status_whole_and_is_named_odd(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, script = two_boxes(tmp_path, sshd_factory, client_key, vast)
    send_huge_checkpoint(script)
    assert main(["status", "--json", "--config", fleet.source]) == 0
    boxes = {b["name"]: b for b in json.loads(capsys.readouterr().out)["boxes"]}
    assert boxes["good"]["connection"] == "ok" and boxes["good"]["runs"]
    assert boxes["bad"]["connection"] == "ok"
    runs = {r["name"]: r for r in boxes["bad"]["runs"]}
    assert runs["yolox_running"]["health"] == "running"
    names = {w["name"] for w in runs["yolox_completed"]["weights"]}
    assert {"best.pt", "last.pt", LONG_REAL} <= names and any(len(n) > 5000 for n in names)
    for run, count in (("yolox_completed", 2), ("yolox_running", 1)):
        odd = [p for p in runs[run]["problems"] if p.startswith("odd checkpoint")]
        assert len(odd) == count and all(len(p) < 200 for p in odd), odd
    assert main(["status", "--config", fleet.source]) == 0
    text = capsys.readouterr().out
    assert "good" in text and "bad" in text and "Traceback" not in text


def test_destroy_names_the_odd_checkpoint_and_force_unpushed_destroys(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, script = two_boxes(tmp_path, sshd_factory, client_key, vast)
    send_huge_checkpoint(script)
    assert main(["destroy", "bad", "--yes", "--config", fleet.source]) == 3
    out = capsys.readouterr().out
    assert "refused" in out and "no push takes these" in out and "epoch_9999" in out
    assert vast.count("DELETE") == 0
    assert main(["destroy", "bad", "--yes", "--force-unpushed", "--config", fleet.source]) == 0
    assert "destroy bad: done" in capsys.readouterr().out
    assert vast.count("DELETE") == 1


def test_status_reports_each_fuzzed_answer_as_that_boxs_own(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer's answers (fixed seed, bounded time), sent by a real box: the hostile
    box is ok or probe_failed with words, the good one is ok, and the output is whole."""
    fleet, script = two_boxes(tmp_path, sshd_factory, client_key, vast)
    deadline = time.monotonic() + FUZZ_SECONDS
    for tried, (label, answer) in enumerate(hostile_answers(SEED)):
        if tried >= 3 and time.monotonic() > deadline:
            break
        send_answer(script, answer)
        code = main(["status", "--json", "--config", fleet.source])
        boxes = {b["name"]: b for b in json.loads(capsys.readouterr().out)["boxes"]}
        assert boxes["good"]["connection"] == "ok", label
        bad = boxes["bad"]
        assert (code, bad["connection"]) in ((0, "ok"), (1, "probe_failed")), (label, bad)
        if bad["connection"] == "probe_failed":
            assert "probe" in bad["error"] and len(bad["error"]) < 400, (label, bad["error"])
        main(["status", "--config", fleet.source])
        assert "Traceback" not in capsys.readouterr().out


def test_watch_keeps_watching_every_box_beside_the_hostile_one(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path) -> None:
    """Before, `watch` died on the 5000-digit name (a crash loop under systemd, and no
    milestones, budget actions or alerts for any box). Now it pushes the good box's
    completed run, says the hostile box's bad answers, and sees it recover."""
    fleet, script = two_boxes(tmp_path, sshd_factory, client_key, vast)
    send_huge_checkpoint(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "tui", "watch", "--config", fleet.source],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = WatchOutput(proc)
    try:
        out.wait_for("box bad: ok")
        out.wait_for("box good: milestone push of yolox_completed (run completed): done")
        time.sleep(2)  # more looks at the box listing the 5000-digit name
        for _, answer in bad_answers():
            send_answer(script, answer)
            time.sleep(2.5)
        out.wait_for("box bad: probe_failed")
        script.unlink()  # the box answers plainly again
        out.wait_for("box bad: ok")
        assert proc.poll() is None, out.text()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.rest()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "crashed" not in text, text
    assert text.rstrip().endswith("watch: stopped, every connection closed")


def bad_answers() -> list[tuple[str, dict[str, object]]]:
    """Two of the fuzzer's answers that are that box's bad answer: a 16610-bit number
    (no JSON reader takes it) and a NaN where a list belongs."""
    cases = list(itertools.islice(hostile_answers(SEED), 9, 11))
    assert all("hidden=nan" in label or "16610-bit" in label for label, _ in cases), cases
    return cases


def painted(app: GpurentApp) -> str:
    """Every character the panel would paint on the terminal now, without its styles."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor", record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_the_panel_stays_up_and_shows_every_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, vast: VastServer,
        isolated_dirs: Path) -> None:
    """Before, the panel exited on the 5000-digit name. The run view names it odd; the
    fuzzer's answers follow, and the good box stays on screen through them."""
    fleet, script = two_boxes(tmp_path, sshd_factory, client_key, vast)
    send_huge_checkpoint(script)
    app = GpurentApp(fleet)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "yolox_completed" in box_text(app, "bad")
                    and "yolox_completed" in box_text(app, "good"))
        run = next(r for r in app.states["bad"].runs if r.name == "yolox_completed")
        app.open_run("bad", run.path)
        await pilot.pause(0.5)
        shown = painted(app)
        (state,) = [line for line in shown.splitlines() if line.startswith("state ")]
        assert "odd checkpoint" in shown and "completed" in state.split("│")[0], shown
        await pilot.press("escape")
        for label, answer in [*itertools.islice(hostile_answers(SEED), 2), *bad_answers()]:
            send_answer(script, answer)
            await pilot.pause(1.2)
            assert app.is_running, label
            assert "yolox_completed" in box_text(app, "good")
        await until(pilot, lambda: app.states["bad"].connection == "probe_failed")
        assert "probe" in box_text(app, "bad")
        script.unlink()  # the box answers plainly again
        await until(pilot, lambda: app.states["bad"].connection == "ok")
        assert app.states["good"].connection == "ok"


PROGRESS_LIAR = textwrap.dedent(r'''
    import json, re, sys
    sys.set_int_max_str_digits(0)
    stdin = sys.stdin.read()
    nonce = re.search(r"NONCE = '([0-9a-f]+)'", stdin).group(1)
    def frame(obj):
        data = json.dumps(obj).encode()
        sys.stdout.buffer.write(b"\n--gpurent-%s %d\n" % (nonce.encode(), len(data)) + data)
    for done, total in ((10 ** 4000, 10 ** 4000), (10 ** 30, 10 ** 30), (9, 5), (True, 5)):
        frame({"progress": {"step": "download", "done": done, "total": total}})
    frame({"progress": {"step": "download", "done": 5, "total": 9}})
    frame({"done": True})
''')


async def test_a_fetchs_progress_numbers_are_bounded(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch's progress frames are the box's numbers too: a 4001-digit byte count
    (float() overflows on it, in the fetch screen's sizes), 10**30 bytes, more done than
    the total. Only the sane one is reported."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the loopback Hub is LFS
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    liar = tmp_path / "liar"
    liar.write_text(f"#!{sys.executable}\n{PROGRESS_LIAR}")
    liar.chmod(0o755)
    server = sshd_factory("box")
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, python=str(liar))],
                       known_hosts=[server.known_hosts_line()])
    steps: list[tuple[str, int, int]] = []
    with HubServer([], token=HUB_TOKEN) as hub:
        assert stage(folder, "me/data", endpoint=hub.url, token=HUB_TOKEN).verified
        report = await fetch(fleet, fleet.boxes[0], "me/data", endpoint=hub.url,
                             token=HUB_TOKEN, confirmed=True,
                             progress=lambda *a: steps.append(a))
    assert not report.verified
    assert steps == [("download", 5, 9)]
