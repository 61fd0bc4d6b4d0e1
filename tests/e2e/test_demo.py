"""The built-in demo fleet: real SSH servers on loopback replaying recorded LibreYOLO runs.

The fleet is checked headless with the core's own watchers, then the pure
re-timing is checked with an injected clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest
from support.nvidia_smi import fake_nvml

from tui.__main__ import main
from tui.actions.flows import destroy, power, push_runs
from tui.actions.monitor import MonitorError, close_monitor, open_monitor
from tui.actions.preflight import check_box, doctor_box, report_lines
from tui.demo import real
from tui.demo.fleet import BOXES_UP_FOR, DemoFleet
from tui.demo.procs import PID_START_MARGIN, choose_keeper, process_start
from tui.demo.providers import DEMO_API_KEY
from tui.demo.recording import RECORDINGS, YOLO9_25, YOLOX_40, YOLOX_FAILED, load_recording
from tui.demo.replay import PLACEHOLDER_BYTES, Lane, RunReplay
from tui.demo.scenario import BOXES, LANES, BoxSpec, LaneSpec, Mode, first_timing, gpu_lines
from tui.demo.timeline import (
    iso_utc,
    plan_timing,
    results_csv,
    retime_log,
    retime_metrics_line,
    retime_status,
    summary_document,
)
from tui.model.box import BoxState, Connection, parse_gpu_rows
from tui.model.config import BoxConfig, FleetConfig
from tui.model.preflight import verdict_of
from tui.model.runs import Health, parse_time
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.remote.watch import BoxWatcher, snapshot_fleet
from tui.store.journal import Journal

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0  # an injected "now" for the pure tests


def children() -> set[int]:
    """Processes (zombies included) whose parent is this test process."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


# --- the fleet, headless --------------------------------------------------------------------


@pytest.fixture
def young_keeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process started just now: the only one the hung run may name (not an ancestor of
    this test, whose age depends on how long this machine has been up)."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def test_every_health_appears_and_nothing_is_left_behind(
        tmp_path: Path, young_keeper: subprocess.Popen[bytes]) -> None:
    before = children() - {young_keeper.pid}
    start = process_start(young_keeper.pid)
    demo = DemoFleet(keepers=lambda: [(young_keeper.pid, start)])
    async with demo as fleet:
        root = demo.root
        assert root is not None and root.is_dir()
        boxes = await snapshot_fleet(fleet)
        assert [b.connection for b in boxes] == [Connection.OK] * 3, [b.error for b in boxes]
        runs = [run for box in boxes for run in box.runs]
        healths = {run.health for run in runs}
        assert {Health.RUNNING, Health.COMPLETED, Health.FAILED, Health.DEAD} <= healths
        hung = next(r for r in runs if r.name == "sweep-yolox-n-lr01")
        assert hung.pid == demo.keeper_pid == young_keeper.pid
        # Its process is too young for a run silent 14 minutes: the run is placed so that
        # its process is not taken for a reused pid, and stalls later; alive meanwhile.
        assert demo.stall_at is not None and demo.stall_at > time.time() + 5 * 60
        assert hung.health is Health.RUNNING and hung.pid_alive is True
        running = [r for r in runs if r.health is Health.RUNNING and r is not hung]
        assert len(running) >= 4 and len({r.current_epoch for r in running}) >= 3
        assert all(r.pid == os.getpid() and r.pid_alive for r in running)
        dead = next(r for r in runs if r.health is Health.DEAD)
        assert dead.pid == demo.dead_pid and dead.pid_alive is False
        failed = next(r for r in runs if r.health is Health.FAILED)
        assert failed.error == {"type": "RuntimeError", "message": "injected failure at epoch 5"}
        done = next(r for r in runs if r.health is Health.COMPLETED)
        assert {"best.pt", "last.pt", "epoch_40.pt"} <= {w.name for w in done.weights}
        assert all(w.size == PLACEHOLDER_BYTES for w in done.weights)
        assert all(len(b.gpus) == len(s.gpus) and b.gpu_note is None
                   for b, s in zip(boxes, BOXES, strict=True))
        assert {b.provider for b in fleet.boxes} == {"vast", "runpod", "manual"}
        assert fleet.boxes[0].pricing is not None and fleet.host_keys == "strict"
        assert fleet.ssh_config == "" and fleet.known_hosts is not None
    assert not root.exists()
    assert children() - {young_keeper.pid} <= before


async def test_runs_advance_between_two_refreshes() -> None:
    demo = DemoFleet()
    async with demo as fleet:
        watcher = BoxWatcher(fleet.box("vast-4090x2"), fleet)
        try:
            first = await watcher.refresh(catch_up=True)
            await asyncio.sleep(3.5)
            second = await watcher.refresh()
        finally:
            await watcher.close()
    epochs = {r.name: (r.current_epoch, len(r.history)) for r in first.runs}
    moved = [r for r in second.runs if r.health is Health.RUNNING
             and (r.current_epoch or 0) > (epochs[r.name][0] or 0)
             and len(r.history) > epochs[r.name][1]]
    assert moved, [(r.name, r.current_epoch) for r in second.runs]
    assert watcher.session.last_bytes_in < 8000  # only what changed came back


async def test_jump_served_box_answers_through_the_jump() -> None:
    demo = DemoFleet()
    async with demo as fleet:
        lab = fleet.box("lab-3090")
        assert lab.jump is not None and demo.jump is not None
        watcher = BoxWatcher(lab, fleet)
        try:
            state = await watcher.refresh()
        finally:
            await watcher.close()
        assert state.connection is Connection.OK and state.runs, state.error
        assert demo.servers["lab-3090"].port in demo.jump.stats.forwards
        assert demo.jump.stats.connections >= 1
        async with asyncssh.connect("127.0.0.1", demo.jump.port, username="demo",
                                    client_keys=[lab.identity_file],
                                    known_hosts=fleet.known_hosts, config=None) as conn:
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.open_connection("192.0.2.1", 22)  # not loopback: refused
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.run("true")  # a jump host opens no sessions


async def test_boxes_run_python3_dash_only() -> None:
    demo = DemoFleet()
    async with demo as fleet:
        box = fleet.box("vast-4090x2")
        async with asyncssh.connect("127.0.0.1", box.port, username="root",
                                    client_keys=[box.identity_file],
                                    known_hosts=fleet.known_hosts, config=None) as conn:
            refused = await conn.run("ls /", encoding=None, check=False)
            assert refused.exit_status == 127
            assert b"only `python3 -` runs here" in refused.stderr
            script = b"import sys; sys.stdout.buffer.write(bytes(range(256))); sys.exit(3)\n"
            ran = await conn.run("python3 -", input=script, encoding=None, check=False)
            assert ran.exit_status == 3 and ran.stdout == bytes(range(256))
        assert demo.servers["vast-4090x2"].stats.refused_commands == 1


async def test_boxes_serve_their_own_files_read_only_over_sftp() -> None:
    demo = DemoFleet()
    async with demo as fleet:
        box = fleet.box("runpod-a100")
        run = demo.runs_roots[box.name] / "mosaic-off-yolox-n"
        async with asyncssh.connect("127.0.0.1", box.port, username="root",
                                    client_keys=[box.identity_file],
                                    known_hosts=fleet.known_hosts, config=None,
                                    agent_path=None) as conn, conn.start_sftp_client() as sftp:
            async with sftp.open(str(run / "status.json"), "rb") as f:
                assert await f.read() == (run / "status.json").read_bytes()
            for outside in ("/etc/hostname", str(demo.runs_roots["vast-4090x2"]),
                            str(run / ".." / ".." / ".." / ".." / "id_ed25519")):
                with pytest.raises(asyncssh.SFTPPermissionDenied):
                    await sftp.stat(outside)
            with pytest.raises(asyncssh.SFTPPermissionDenied):
                await sftp.open(str(run / "new.txt"), "wb")
            with pytest.raises(asyncssh.SFTPPermissionDenied):
                await sftp.remove(str(run / "status.json"))
        assert (run / "status.json").exists() and not (run / "new.txt").exists()


async def test_the_fleet_is_taken_down_when_the_body_raises() -> None:
    before = children()
    demo = DemoFleet()
    with pytest.raises(RuntimeError, match="panel crashed"):
        async with demo:
            root = demo.root
            raise RuntimeError("panel crashed")
    assert root is not None and not root.exists()
    assert children() <= before


async def look_once(fleet: FleetConfig, box: BoxConfig) -> BoxState:
    watcher = BoxWatcher(box, fleet)
    try:
        return await watcher.refresh(catch_up=True)
    finally:
        await watcher.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_every_action_ends_in_a_true_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the keys p, s, S and D do, headless: push -> verified at both destinations,
    stop (the box goes down, its runs' processes with it), start (it comes back; on the
    marketplace whose GPU was rented out meanwhile it fails), destroy (push first)."""
    demo = DemoFleet(settle_seconds=1.0)
    async with demo as fleet:
        for var, value in demo.env.items():
            monkeypatch.setenv(var, value)
        journal = Journal()
        vast = fleet.box("vast-4090x2")
        pushed = await push_runs(fleet, vast, journal, run_names=["baseline-yolox-n"])
        assert pushed.code == 0, pushed.lines
        run_dir = demo.runs_roots["vast-4090x2"] / "baseline-yolox-n"
        local = demo.pushed / "vast-4090x2" / "baseline-yolox-n"
        for name in ("weights/best.pt", "weights/last.pt", "status.json"):
            assert sha256(local / name) == sha256(run_dir / name)
        assert demo.hub is not None
        hub_files = demo.hub.state.repos["demo/rects-checkpoints"]
        assert hub_files["baseline-yolox-n/weights/best.pt"].sha256 == \
            sha256(run_dir / "weights/best.pt")

        stopped = await power(fleet, vast, "stop", journal)
        assert stopped.code == 0 and "it reads stopped" in stopped.lines[0], stopped.lines
        down = await look_once(fleet, vast)
        assert down.connection is Connection.UNREACHABLE  # a stopped box answers no SSH
        assert down.gpu_busy is None  # nor any busy figure
        started = await power(fleet, vast, "start", journal)
        assert started.code == 0 and "it reads running" in started.lines[0], started.lines
        back = await look_once(fleet, vast)
        assert back.connection is Connection.OK
        was_running = {r.name for r in back.runs if r.state == "running"}
        assert was_running and all(r.health is Health.DEAD for r in back.runs
                                   if r.name in was_running)  # the stop killed them
        # Its GPUs idle since: its driver's samples began afresh after the stop, all 0 %.
        assert back.gpu_busy is not None and back.gpu_busy.pct == 0
        assert back.gpu_busy.span < 14

        gone = await destroy(fleet, vast, journal, push_first=True)
        assert gone.code == 0, gone.lines
        assert "the provider no longer has it" in gone.lines[-1]
        assert "18442117" not in demo.providers["vast"].instances

        runpod = fleet.box("runpod-a100")
        assert (await power(fleet, runpod, "stop", journal)).code == 0
        refused = await power(fleet, runpod, "start", journal)
        assert refused.code == 1
        assert "not enough free GPUs" in refused.lines[0] and "still stopped" in refused.lines[0]
        assert demo.providers["runpod"].instances["k7v2q9x1dm3n0p"]["status"] == "EXITED"

        lab = fleet.box("lab-3090")
        assert (await power(fleet, lab, "stop", journal)).code == 0  # its stop_command
        async with asyncio.timeout(10):
            while demo.servers["lab-3090"].listening:
                await asyncio.sleep(0.1)
    outcomes = [(e["box"], e["action"], e["outcome"]) for e in journal.entries]
    assert outcomes[:3] == [("vast-4090x2", "push", "done")] * 2 + [("vast-4090x2", "stop",
                                                                    "done")]
    assert outcomes[-4:] == [("vast-4090x2", "destroy", "done"), ("runpod-a100", "stop", "done"),
                             ("runpod-a100", "start", "failed"), ("lab-3090", "stop", "done")]


def driver_busy_pct(box: BoxSpec, at: float, own_start: float | None) -> float:
    """The box's GPU busy % as its driver would average the demo's own rows at `at`: each
    GPU sampled every 200 ms over the 14 s before (71 samples, as the H200 recording in
    tests/data/nvidia-smi-h200 holds), each sample what the box's csv rows read at that
    instant, training while the scenario's live lane on that GPU trained; nvidia-smi prints
    each GPU's mean as a whole %, and the box's figure is the mean of its GPUs'."""
    trains = []
    for lane in LANES:
        if lane.box == box.name and lane.gpu is not None:
            assert lane.mode is Mode.LIVE  # the scenario trains on GPUs in live lanes only
            timing = first_timing(load_recording(lane.recording), lane, at,
                                  own_start=own_start)
            assert timing.times[-1] > at  # its first run still trains at `at`
            trains.append((lane.gpu, timing.times[0], timing.times[-1]))
    samples: list[list[float]] = [[] for _ in box.gpus]
    for k in range(71):
        t = (math.floor(at / 0.2) - k) * 0.2
        busy = {gpu: "train" for gpu, start, end in trains if start <= t < end}
        rows, note = parse_gpu_rows(gpu_lines(box, busy, t))
        assert note is None
        for row in rows:
            assert row.util_pct is not None
            samples[row.index].append(row.util_pct)
    means = [float(f"{sum(s) / len(s):.0f}") for s in samples]
    return sum(means) / len(means)


async def test_the_boxes_gpu_busy_and_idle_money_follow_their_own_readings(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's boxes answer the probe's busy reading (`nvidia-smi -q -d UTILIZATION`):
    the money line, `status --json` and `costs --json` say how busy each box's GPUs were
    over the last 14 s and what the idle share of its billed running money cost. The demo
    clock stands still, so the figure follows from the scenario alone."""
    from tui.cli.watching import _status
    from tui.model.status_doc import status_document
    from widgets.money_text import box_money_line

    at = time.time()
    expected = {box.name: driver_busy_pct(box, at, process_start(os.getpid()))
                for box in BOXES}
    assert expected["vast-4090x2"] > 50 and expected["runpod-a100"] > 50  # they train
    demo = DemoFleet(clock=lambda: at)
    async with demo as fleet:
        for var, value in demo.env.items():
            monkeypatch.setenv(var, value)
        boxes, cost, _ = await _status(fleet, [])
        now = time.time()
        doc = {b["name"]: b for b in status_document(boxes, now, cost)["boxes"]}
        assert await asyncio.to_thread(
            main, ["costs", "--json", "--config", str(demo.root / "fleet.toml")]) == 0
        costs = {b["name"]: b for b in json.loads(capsys.readouterr().out)["boxes"]}
    for box in boxes:
        pct, spec = expected[box.name], next(s for s in BOXES if s.name == box.name)
        rate = spec.pricing["running_usd_per_hr"]
        assert box.gpu_busy is not None and box.gpu_busy.span == pytest.approx(14.0)
        assert box.gpu_busy.pct == pytest.approx(pct)
        figure = doc[box.name]
        assert figure["gpu_busy_pct"] == round(pct, 1)
        assert figure["gpu_busy_covered_s"] == pytest.approx(14.0)
        billed_s = figure["cost"]["gpu_busy_billed_s"]
        if spec.provider != "manual":  # rented 5 h before the demo began
            assert billed_s == pytest.approx(BOXES_UP_FOR, abs=120)
        assert figure["gpu_idle_usd"] == pytest.approx(
            rate * billed_s / 3600 * (1 - pct / 100), abs=1e-4)
        line = box_money_line(cost.boxes[box.name], now, box.busy)
        assert line is not None and f"GPU {pct:.0f}% busy over 14 s of " in line.plain
        assert " idle)" in line.plain
        ledger = costs[box.name]  # what the meter recorded, read back from the ledger
        assert ledger["gpu_busy_pct"] == pytest.approx(pct, abs=0.05)
        assert ledger["gpu_idle_usd"] == pytest.approx(
            rate * ledger["gpu_busy_billed_s"] / 3600 * (1 - pct / 100), abs=2e-4)


async def test_a_demo_box_never_reads_this_machines_gpus_through_nvml(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where this machine has NVML (here the stand-in libnvidia-ml.so.1 tests/support
    builds, 1 GPU, half its samples 99 % busy), a demo box's probe would read it before
    its stand-in nvidia-smi and show this machine's GPUs as the box's: the demo box's own
    library path holds a libnvidia-ml.so.1 that will not load, so the box's figure is the
    scenario's."""
    nvml = fake_nvml(tmp_path / "lib")
    if nvml is None:
        pytest.skip("no C compiler to build the stand-in libnvidia-ml.so.1")
    for var, value in nvml.items():
        monkeypatch.setenv(var, value)
    at = time.time()
    box = BOXES[0]
    expected = driver_busy_pct(box, at, process_start(os.getpid()))
    async with DemoFleet(clock=lambda: at) as fleet:
        state = await look_once(fleet, fleet.box(box.name))
    assert state.gpu_busy is not None and state.gpu_busy.pct == pytest.approx(expected)


async def test_a_push_of_a_run_the_replay_is_still_writing_verifies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first p most people press is on a running run: its epochs end every 2 s, so
    one ended between the push's listing and its upload, and the Hub's sha256 read
    "differs (training still writing?)". Three pushes in a row verify at both places."""
    demo = DemoFleet(settle_seconds=1.0)
    async with demo as fleet:
        for var, value in demo.env.items():
            monkeypatch.setenv(var, value)
        journal = Journal()
        vast = fleet.box("vast-4090x2")
        for _ in range(3):
            pushed = await push_runs(fleet, vast, journal, run_names=["rects-yolox-n"])
            assert pushed.code == 0, pushed.lines
    hub = [e for e in journal.entries if str(e["destination"]).startswith("hf://")]
    assert len(hub) == 3 and all(e["verified"] for e in hub)


async def test_check_doctor_and_monitor_on_a_demo_box_say_one_calm_line() -> None:
    """g, G and w on a replaying box: no torch or LibreYOLO there. One line says so and
    how to see a real run, never "torch not installed", a red verdict or a traceback."""
    demo = DemoFleet(settle_seconds=1.0)
    async with demo as fleet:
        lab = fleet.box("lab-3090")
        session = BoxSession(lab, fleet, host_key_store(fleet))
        try:
            report = await check_box(session, lab)
            doctor = await doctor_box(session, lab, "/root/data/rects.yaml")
            with pytest.raises(MonitorError) as monitor:
                handle = await open_monitor(session, lab, str(demo.runs_roots["lab-3090"]
                                                              / "smoke-yolox-n"))
                await close_monitor(session, handle)
        finally:
            await session.close()
    words = "`gpurent-tui demo --real` trains a real run"
    assert report.errors == [] and words in report.summary
    assert verdict_of(report).verdict == "stand-in"
    assert report_lines(report) == [report.summary]
    assert doctor.exit_code == 0 and words in doctor.lines()[-1]
    assert words in monitor.value.message and "Traceback" not in monitor.value.message
    for text in (report.summary, *doctor.lines(), monitor.value.message):
        assert "not installed" not in text and "CUDA" not in text


async def test_provider_apis_answer_on_loopback_with_the_demo_key() -> None:
    from tui.providers import ProviderError, make_client

    demo = DemoFleet()
    async with demo as fleet:
        env = {**os.environ, **demo.env}
        assert env["VAST_API_KEY"] == env["RUNPOD_API_KEY"] == DEMO_API_KEY
        assert all(env[f"XDG_{k}_HOME"].startswith(str(demo.root)) for k in ("DATA", "STATE"))
        assert set(fleet.providers) == {"vast", "runpod"}
        assert all(url.startswith("http://127.0.0.1:") for url in fleet.providers.values())
        for box in fleet.boxes:
            if box.provider == "manual":
                continue
            assert box.instance_id is not None
            client = make_client(box.provider, fleet, env=env)
            try:
                info = await client.get(box.instance_id)
            finally:
                await client.aclose()
            spec = next(s for s in BOXES if s.name == box.name)
            assert info.state == "running" and info.num_gpus == len(spec.gpus)
            assert info.running_usd_per_hr == spec.pricing["running_usd_per_hr"]
            assert info.disk_gb == spec.pricing["disk_gb"]
        stranger = make_client("vast", fleet, env={**env, "VAST_API_KEY": "someone-else"})
        try:
            with pytest.raises(ProviderError) as refused:
                await stranger.get("18442117")
        finally:
            await stranger.aclose()
        assert refused.value.kind == "auth"


def test_demo_modules_do_not_load_textual() -> None:
    modules = sorted(f"tui.demo.{p.stem}" for p in (ROOT / "tui" / "demo").glob("*.py"))
    code = f"import sys, {', '.join(modules)}; print('\\n'.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    assert not {n for n in loaded if n.split(".")[0] in ("textual", "widgets")
                or n.startswith(("tui.app", "tui.screens"))}


def test_real_demo_without_libreyolo_exits_2(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(real, "NEEDS", ("libreyolo_is_not_installed_here",))
    assert main(["demo", "--real"]) == 2
    assert "pip install -e '.[train]'" in capsys.readouterr().err


def test_cli_demo_cleans_up_when_the_panel_raises(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    import tui.app

    seen: dict[str, str | None] = {}

    class Crashing:
        def __init__(self, fleet: object) -> None:
            self.fleet = fleet
            seen.update((v, os.environ.get(v)) for v in ("XDG_STATE_HOME", "VAST_API_KEY"))

        async def run_async(self) -> None:
            raise RuntimeError("panel crashed")

    monkeypatch.setattr(tui.app, "GpurentApp", Crashing)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("VAST_API_KEY", "the-users-real-key")
    state = os.environ["XDG_STATE_HOME"]
    with pytest.raises(RuntimeError, match="panel crashed"):
        main(["demo"])
    assert not list(tmp_path.glob("gpurent-demo-*"))
    # The panel ran with the demo's ledger dir and key; the process got its own back.
    assert seen["VAST_API_KEY"] == DEMO_API_KEY
    assert (seen["XDG_STATE_HOME"] or "").startswith(str(tmp_path / "gpurent-demo-"))
    assert os.environ["VAST_API_KEY"] == "the-users-real-key"
    assert os.environ["XDG_STATE_HOME"] == state


# --- recordings and the pure re-timing -------------------------------------------------------


def test_recordings_are_small_text_with_every_epoch() -> None:
    data = ROOT / "tui" / "demo_data"
    assert sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) < 300_000
    for key in RECORDINGS:
        rec = load_recording(key)
        kinds = [p.kind for p in rec.phases]
        epochs = [p.epoch for p in rec.phases if p.kind == "epoch"]
        assert kinds[0] == "start" and epochs == list(range(1, len(epochs) + 1))
        assert len(rec.rows) == len(epochs)
    assert load_recording(YOLOX_40).outcome == "completed"
    assert load_recording(YOLOX_FAILED).phases[-1].status["error"]["type"] == "RuntimeError"


def test_schedule_keeps_the_pace_and_the_seed() -> None:
    rec = load_recording(YOLOX_40)
    timing = plan_timing(rec, NOW, 2.0, seed=7)
    assert timing == plan_timing(rec, NOW, 2.0, seed=7)
    assert timing.epoch_seconds != plan_timing(rec, NOW, 2.0, seed=8).epoch_seconds
    assert timing.started == timing.times[0] == NOW
    assert list(timing.times) == sorted(timing.times)
    assert len(timing.times) == len(rec.phases) and len(timing.epoch_seconds) == 40
    assert all(0.5 * 2.0 * 0.8 <= s <= 2.0 * 2.0 * 1.2 for s in timing.epoch_seconds)
    assert 1.5 < sum(timing.epoch_seconds) / 40 < 2.5
    later = timing.shifted(100.0)
    assert later.started == NOW + 100 and later.since_start(5) == timing.since_start(5)


@pytest.mark.parametrize("key", RECORDINGS)
def test_retimed_status_has_libreyolos_shape_and_the_demos_times(key: str) -> None:
    rec = load_recording(key)
    timing = plan_timing(rec, NOW, 2.0, seed=1)
    paths = [(rec.save_dir, "/demo/runs/x")]
    for index, phase in enumerate(rec.phases):
        status = retime_status(rec, timing, index, pid=4242, paths=paths)
        assert set(status) == set(phase.status)  # same keys as LibreYOLO wrote at that point
        assert status["pid"] == 4242 and status["save_dir"] == "/demo/runs/x"
        assert status["started_at"] == iso_utc(NOW)
        assert parse_time(status["updated_at"]) == int(timing.times[index])
        elapsed = timing.times[index] - NOW
        assert status["elapsed_seconds"] == pytest.approx(elapsed, abs=1e-3)
        if phase.kind == "epoch":
            done = timing.epoch_seconds[:phase.epoch]
            assert status["epoch_seconds"] == done[-1]
            assert status["mean_epoch_seconds"] == pytest.approx(sum(done) / len(done))
            left = rec.total_epochs - phase.epoch
            assert status["eta_seconds"] == pytest.approx(status["mean_epoch_seconds"] * left)
            for same in ("train_loss", "metrics", "best_metric", "current_epoch", "progress"):
                assert status[same] == phase.status[same]
        if phase.kind == "completed":
            assert status["total_seconds"] >= elapsed
            assert status["checkpoints"]["best"] == "/demo/runs/x/weights/best.pt"
        if phase.kind == "failed":
            assert "completed_epochs" not in status and status["progress"] == 0.0


def test_metrics_lines_keep_everything_but_the_time() -> None:
    rec = load_recording(YOLO9_25)
    line = retime_metrics_line(rec.metrics_lines[3], 2.5)
    row = json.loads(line)
    assert row == {**rec.rows[3], "time": 2.5}
    assert list(row) == list(rec.rows[3])  # LibreYOLO's column order
    assert line == json.dumps(row)


def test_results_csv_and_summary_rebuild_from_the_rows() -> None:
    rec = load_recording(YOLO9_25)
    assert results_csv(rec, 25, rec.epoch_times) == rec.results_csv
    phase = next(p for p in rec.phases if p.kind == "epoch" and p.epoch == 7)
    assert results_csv(rec, 7, rec.epoch_times) == rec.results_csv[:phase.results]
    summary = summary_document(rec, [1.0] * 25, 99.0, [(rec.save_dir, "/r")])
    assert summary is not None and summary["total_seconds"] == 99.0
    assert summary["logged_epochs"] == list(range(1, 26)) and summary["save_dir"] == "/r"
    assert [e["epoch_seconds"] for e in summary["results"]["epoch_metrics"]] == [1.0] * 25
    assert summary_document(load_recording(YOLOX_40), [], 1.0, []) is None  # yolox writes none


def test_log_stamps_spread_over_the_phase_and_paths_move() -> None:
    segment = (b"2026-12-02 10:25:54 | INFO     | Epoch 1 - Average loss: 1.9107\n"
               b"2026-12-02 10:25:55 | INFO     | Checkpoint saved: /rec/runs/a/weights/last.pt\n")
    out = retime_log(segment, NOW, NOW + 10, [("/rec/runs/a", "/demo/runs/b")]).decode()
    stamps = [time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
              for line in out.splitlines()]
    assert stamps == [NOW + 5, NOW + 10]
    assert "/demo/runs/b/weights/last.pt" in out and "/rec/" not in out


def test_first_runs_open_where_the_scenario_says() -> None:
    rec = load_recording(YOLOX_40)
    live = LaneSpec("b", "l", YOLOX_40, Mode.LIVE, 2.0, 1, at_epoch=23)
    timing = first_timing(rec, live, NOW, own_start=NOW - 5)
    index = rec.phase_of_epoch(23)
    assert timing.times[index] <= NOW < timing.times[index + 1]
    assert timing.started >= NOW - 5 - PID_START_MARGIN  # the demo's pid is not "reused"
    done = LaneSpec("b", "d", YOLOX_40, Mode.DONE, 90.0, 2, ago=3600.0)
    assert first_timing(rec, done, NOW).times[-1] == pytest.approx(NOW - 3600)
    hung = LaneSpec("b", "h", YOLOX_40, Mode.HUNG, 40.0, 3, ago=840.0, stop_epoch=17)
    old_keeper = first_timing(rec, hung, NOW, keeper_start=NOW - 86400)
    assert old_keeper.times[rec.phase_of_epoch(17)] == pytest.approx(NOW - 840)
    young_keeper = first_timing(rec, hung, NOW, keeper_start=NOW - 60)
    assert young_keeper.started == NOW - 60 - PID_START_MARGIN  # stalls later instead


def test_keeper_is_the_nearest_process_old_enough() -> None:
    candidates = [(300, NOW - 10), (200, NOW - 3000), (1, NOW - 90000)]
    assert choose_keeper(candidates, NOW - 1500) == (200, NOW - 3000)
    assert choose_keeper(candidates, NOW - 1e6) == (1, NOW - 90000)  # none: the oldest
    assert choose_keeper([(9, None)], NOW) == (9, None)  # no /proc: the probe cannot tell


def test_gpu_readings_parse_as_nvidia_smi_rows() -> None:
    box = BOXES[0]
    rows, note = parse_gpu_rows(gpu_lines(box, {0: "train", 1: "hung"}, NOW))
    assert note is None and [r.name for r in rows] == [g.name for g in box.gpus]
    assert rows[0].util_pct is not None and rows[0].util_pct > 80
    assert rows[1].util_pct == 0 and (rows[1].mem_used_mib or 0) > 10000


def test_the_utilisation_answer_has_nvidia_smis_layout() -> None:
    """A demo box's `-q -d UTILIZATION` answer is laid out line for line as the H200's
    (tests/data/nvidia-smi-h200/util-17.txt): the same keys, indents and units; the probe's
    own parser reads one [avg %, 14 s] per GPU from it."""
    from tui.demo.utilization import utilization_text
    from tui.onbox.probe import parse_util_query

    def shape(text: str) -> list[str]:
        return [line.split(":")[0] + ("%" if line.endswith("%") else "")
                + (" sec" if line.endswith(" sec") else "")
                for line in text.splitlines()
                if not line.startswith(("GPU 0", "Timestamp", "Driver", "CUDA", "Attached"))]

    real = (ROOT / "tests" / "data" / "nvidia-smi-h200" / "util-17.txt").read_text()
    lab = next(b for b in BOXES if len(b.gpus) == 1)
    ours = utilization_text(lab, lambda t: {0: "train"}, NOW)
    assert shape(ours) == shape(real)
    vast = next(b for b in BOXES if len(b.gpus) == 2)
    busy = parse_util_query(utilization_text(vast, lambda t: {0: "train"}, NOW))
    assert [span for _, span in busy] == [14.0, 14.0]
    assert busy[0][0] > 80 and busy[1][0] == 0  # the training GPU, the idle one


def test_replay_writes_only_what_is_due(tmp_path: Path) -> None:
    rec = load_recording(YOLOX_40)
    timing = plan_timing(rec, NOW, 2.0, seed=3)
    run = tmp_path / "runs" / "r"
    replay = RunReplay(rec, run, timing, pid=77, data_dir="/data")
    assert replay.advance(NOW - 1) == 0 and not run.exists()
    replay.advance(timing.times[rec.phase_of_epoch(12)])
    status = json.loads((run / "status.json").read_text())
    assert status["current_epoch"] == 12 and status["state"] == "running"
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == list(range(1, 13))
    assert [json.loads(x)["time"] for x in lines] == list(timing.epoch_seconds[:12])
    assert {p.name for p in (run / "weights").iterdir()} == {"best.pt", "last.pt", "epoch_10.pt"}
    assert (run / "weights" / "last.pt").read_bytes().startswith(b"gpurent-tui demo placeholder")
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
    assert str(run) in (run / "train.log").read_text() and "name: r" in (
        run / "train_config.yaml").read_text()
    replay.advance(timing.times[-1])
    assert replay.finished and json.loads((run / "status.json").read_text())["state"] == \
        "completed"


def test_a_failing_live_run_fails_once_and_starts_no_other(tmp_path: Path) -> None:
    """A lane replaying a failure fails once; starting over under a new name every half
    minute, it raised a "run failed" alert each time, a stream of failures in a demo."""
    spec = next(lane for lane in LANES if lane.recording == YOLOX_FAILED and lane.mode is Mode.LIVE)
    rec = load_recording(spec.recording)
    lane = Lane(spec, rec, tmp_path, "/data", plan_timing(rec, NOW, spec.pace, spec.seed),
                pid=5, live_pid=5, last_phase=None)
    end = lane.replay.end_time
    assert lane.step(end) is None and lane.step(end + 3600) is None
    assert [p.name for p in tmp_path.iterdir()] == [spec.name]
    status = json.loads((tmp_path / spec.name / "status.json").read_text())
    assert status["state"] == "failed"


def test_a_live_lane_starts_over_under_a_new_name(tmp_path: Path) -> None:
    spec = next(lane for lane in LANES if lane.recording == YOLOX_40 and lane.mode is Mode.LIVE)
    rec = load_recording(spec.recording)
    lane = Lane(spec, rec, tmp_path, "/data", plan_timing(rec, NOW, spec.pace, spec.seed),
                pid=5, live_pid=5, last_phase=None)
    wait = spec.repeat_after or 0.0
    end = lane.replay.end_time
    assert lane.step(end) == pytest.approx(end + wait)  # finished: waits, then starts over
    for cycle in (2, 3):
        lane.step(end + wait)
        assert lane.replay.run_dir.name == f"{spec.name}-{cycle}"
        assert lane.replay.timing.started == end + wait
        end = lane.replay.end_time
        assert lane.step(end) == pytest.approx(end + wait)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{spec.name}-2", f"{spec.name}-3"]  # the oldest finished run is pruned
    status = json.loads((tmp_path / f"{spec.name}-3" / "status.json").read_text())
    assert status["state"] == "completed" and status["pid"] == 5
    assert status["started_at"] == iso_utc(lane.replay.timing.started)


@pytest.mark.training
async def test_real_training_box_and_its_process_goes_with_the_fleet() -> None:
    if real.real_training_problem() and not os.environ.get("CI"):
        pytest.skip("needs the train extra (pip install -e '.[train]')")
    demo = DemoFleet(real=True)
    async with demo as fleet:
        assert demo.training is not None and demo.training.proc is not None
        proc = demo.training.proc
        status_file = demo.training.run_dir / "status.json"
        async with asyncio.timeout(90):
            while not status_file.exists():
                assert proc.poll() is None, (demo.root / "real-training.log").read_text()
                await asyncio.sleep(0.2)
        boxes = await snapshot_fleet(fleet)
        lab = next(b for b in boxes if b.name == "lab-3090")
        trained = next(r for r in lab.runs if r.name == real.RUN_NAME)
        assert trained.pid == proc.pid and trained.pid_alive is True
        assert trained.health is Health.RUNNING
    assert proc.poll() is not None and demo.training.proc is None


async def test_a_finished_runs_unpushed_money_does_not_follow_the_runs_training_now(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's baseline finished 3 h ago, alone on its box: its "unpushed ... of GPU
    time" is the whole box's rate over its epochs, whether the two live runs beside it are
    training now or not (it read $0.38 with them and $0.76 without)."""
    from dataclasses import replace

    from tui.cli.watching import _status
    from tui.model.status_doc import box_document

    demo = DemoFleet()
    async with demo as fleet:
        for var, value in demo.env.items():
            monkeypatch.setenv(var, value)
        boxes, cost, _ = await _status(fleet, [])
    box = next(b for b in boxes if b.name == "vast-4090x2")
    assert sum(r.health is Health.RUNNING for r in box.runs) >= 2
    done = next(r for r in box.runs if r.name == "baseline-yolox-n")
    assert done.health is Health.COMPLETED

    def unpushed(state: BoxState) -> float:
        doc = box_document(state, cost.boxes["vast-4090x2"], {})
        figure = next(r for r in doc["runs"] if r["name"] == "baseline-yolox-n")
        assert figure["unpushed_epochs"] == 40
        return float(figure["unpushed_usd"])

    crowded = unpushed(box)
    alone = unpushed(replace(box, runs=(done,)))
    assert crowded == pytest.approx(alone) and crowded > 0
