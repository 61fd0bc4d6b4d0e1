"""The on-box watchdog over a real sshd: armed, then left alone with no panel running.

It must see a run stall (a SIGSTOPped trainer: its pid lives on), push the
run to the loopback Hub and accept it only once the Hub lists every file with
the sha256 hashed on the box, then run the box's own stop command; fire on
its wall-clock limit; outlive the SSH connection; stop Vast and RunPod boxes
with the instance's own scoped key (never the account key, which never reaches
the box) and never destroy with unverified weights; act on nothing in a dry
run; go away with --remove. Limits are fractions of a minute so it takes seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fleets import box_entry, make_fleet
from support.hub_server import HubServer
from support.libreyolo_train import wait_for
from support.provider_servers import (
    RunPodServer,
    VastServer,
    runpod_pod,
    runpod_too_many,
    vast_instance,
)
from support.sshd import KeyPair, Sshd
from support.stand_in_trainer import EPOCH_TRAINER
from support.token_box import received_text, recording_python

from tui.__main__ import main
from tui.actions.watchdog import GuardRequest, install_guard
from tui.model.config import FleetConfig
from tui.model.status_doc import status_document
from tui.model.watchdog import fold_guard, guard_summary, parse_on
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession
from tui.remote.watch import BoxWatcher
from tui.store.journal import Journal
from widgets.fleet_text import BoxView, box_lines

Factory = Callable[..., Sshd]
TOKEN = "hf_WatchdogTestToken0123456789abcdef"
REPO = "me/guarded-runs"
SYSTEM_PATH = "/usr/bin:/bin"
POLL = 0.2


def python3_dir(tmp_path: Path) -> Path:
    """A `python3` that is this test run's interpreter (it has huggingface_hub)."""
    bindir = tmp_path / "venv-bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return bindir


def guard_dir(tmp_path: Path, name: str = "box") -> Path:
    return tmp_path / f"home-{name}" / ".gpurent-tui" / "guard"


def state_of(tmp_path: Path, name: str = "box") -> dict:
    try:
        return json.loads((guard_dir(tmp_path, name) / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def ended_state(tmp_path: Path, name: str = "box") -> dict:
    """The state once the watchdog saved that it ended (its last write before it exits)."""
    return wait_for(lambda: (s := state_of(tmp_path, name)).get("ended") and s, timeout=20,
                    interval=0.05)


def guard_pid(tmp_path: Path, name: str = "box") -> int:
    return json.loads((guard_dir(tmp_path, name) / "guard.pid").read_text())["pid"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[Callable[[Path, int, float], subprocess.Popen]]:
    started: list[subprocess.Popen] = []

    def start(run: Path, epochs: int, seconds: float) -> subprocess.Popen:
        script = tmp_path / "epoch_trainer.py"
        script.write_text(EPOCH_TRAINER)
        proc = subprocess.Popen([sys.executable, str(script), str(run), str(epochs),
                                 str(seconds)])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


def manual_fleet(tmp_path: Path, server: Sshd, key: KeyPair, **extra: object) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, runs_roots=[str(tmp_path / "runs")],
                                           **extra)],
                      known_hosts=[server.known_hosts_line()])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_a_stalled_run_is_pushed_verified_then_the_box_stopped_with_no_panel(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, trainer: Callable,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    stopped = tmp_path / "stopped.log"
    fleet = manual_fleet(tmp_path, server, client_key, push={"hf_repo": REPO},
                         stop_command=f"echo stopped >> {stopped}")
    box = fleet.boxes[0]
    run = tmp_path / "runs" / "shapes"
    proc = trainer(run, 1000, 0.15)
    wait_for(lambda: (run / "weights" / "best.pt").exists(), timeout=10)
    with HubServer([REPO], token=TOKEN) as hub:
        session = BoxSession(box, fleet, host_key_store(fleet))
        try:
            report = await install_guard(
                fleet, box, GuardRequest(max_hours=1.0, no_progress_minutes=0.05,
                                         poll_seconds=POLL, hf_endpoint=hub.url),
                Journal(), session=session, confirmed=True)
            assert report.code == 0, report.lines
            assert report.lines[0].startswith("box box: guarded: stops in 1h00m or after "
                                              "3 s without progress"), report.lines
            assert "stops with: its own stop_command" in "\n".join(report.lines)
            watcher = BoxWatcher(box, fleet)
            try:
                state = await watcher.refresh()
            finally:
                await watcher.close()
            assert state.guard is not None and state.guard.armed
            doc = status_document([state], 0.0)["boxes"][0]["guard"]
            assert doc["summary"].startswith("guarded: stops in") and doc["running"]
            # The SSH connection dies; the panel is gone: nobody watches but the box.
            assert server.cut_connections() >= 1
        finally:
            await session.close()
        pid = guard_pid(tmp_path)
        assert TOKEN not in Path(f"/proc/{pid}/cmdline").read_text()
        wait_for(lambda: state_of(tmp_path).get("last_progress_at"), timeout=10)
        os.kill(proc.pid, signal.SIGSTOP)  # a hung loop: the pid lives, nothing moves
        paused_at = (run / "weights" / "best.pt").read_bytes()
        wait_for(stopped.exists, timeout=20, interval=0.1)
        assert stopped.read_text() == "stopped\n"
        assert alive(proc.pid)  # it was never about the pid
        # the command ran; its outcome is saved when it has ended ("stop sending" till then),
        # and the watchdog's end with it
        done = ended_state(tmp_path)
    assert done["fired"]["trigger"] == "stalled", done
    steps = [(d["action"], d["outcome"]) for d in done["did"]]
    assert steps == [("fired", "acting"), ("push", "verified"), ("stop", "ran")], steps
    stored = hub.state.repos[REPO]
    assert stored["shapes/weights/best.pt"].sha256 == hashlib.sha256(paused_at).hexdigest()
    assert stored["shapes/weights/last.pt"].sha256 == sha(run / "weights" / "last.pt")
    assert stored["shapes/status.json"].sha256 == sha(run / "status.json")
    assert len(hub.state.commits) == 1
    # It outlived the cut connection to act, and having acted it ended (nothing is left
    # to watch): its pid is gone, its state says so.
    assert done["pid"] == pid and done["ended"] == "exited after acting"
    wait_for(lambda: not alive(pid), timeout=5, interval=0.05)
    folder = guard_dir(tmp_path)
    assert not (folder / "secrets.json").exists()  # read once, then held in memory only
    for path in folder.iterdir():
        assert TOKEN not in path.read_text(), path.name
    (entry,) = Journal().entries
    assert entry["action"] == "guard" and entry["outcome"] == "armed"
    assert TOKEN not in json.dumps(entry)


def test_max_hours_fires_after_a_dry_run_that_acted_on_nothing(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}"})
    stopped = tmp_path / "stopped.log"
    (tmp_path / "runs").mkdir()
    fleet = manual_fleet(tmp_path, server, client_key,
                         stop_command=f"echo stopped >> {stopped}")
    base = ["--config", fleet.source, "guard", "box", "--poll-seconds", str(POLL)]
    assert main([*base, "--max-hours", "0.0005", "--dry-run", "--on", "timeout=stop"]) == 0
    assert "guarded (dry run): would stop in" in capsys.readouterr().out
    dry = ended_state(tmp_path)
    assert dry["fired"]["trigger"] == "timeout" and dry["dry_run"]
    assert [d["outcome"] for d in dry["did"]] == ["dry_run", "dry_run"]
    assert "would run its stop_command" in dry["did"][-1]["detail"]
    assert not stopped.exists()
    assert dry["ended"] == "exited after its dry run"
    first = guard_pid(tmp_path)
    wait_for(lambda: not alive(first), timeout=5, interval=0.05)
    # Armed again for real: the ended dry-run watchdog is replaced.
    assert main([*base, "--max-hours", "0.0005", "--on", "timeout=stop"]) == 0
    out = capsys.readouterr().out
    assert "the watchdog there had already ended (exited after its dry run)" in out, out
    wait_for(stopped.exists, timeout=15, interval=0.1)
    # The stop command's file appears before the watchdog saves how the command ended
    # (its 'sending' step, saved before the command, is replaced then): wait for its end.
    done = ended_state(tmp_path)
    assert done["fired"]["trigger"] == "timeout" and not done["dry_run"]
    assert [(d["action"], d["outcome"]) for d in done["did"]] == [("fired", "acting"),
                                                                  ("stop", "ran")]
    outcomes = [(e["action"], e["outcome"]) for e in Journal().entries]
    assert outcomes == [("guard", "dry_run"), ("guard", "armed")]
    assert main([*base, "--remove"]) == 0
    assert "the watchdog had already ended (exited after acting)" in capsys.readouterr().out
    assert not guard_dir(tmp_path).exists()
    assert Journal().entries[-1]["action"] == "guard-remove"


def test_no_run_found_is_nothing_verified_so_it_stops_and_never_destroys(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty (or wrong) runs root, push,destroy: nothing was pushed, so nothing was
    verified; the box is stopped, its disk kept. Its stop is saved as being sent before
    the stop command runs (the panel may see nothing later: the box goes down)."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    done, seen = tmp_path / "done.log", tmp_path / "seen-when-stopping.json"
    (tmp_path / "runs").mkdir()
    state = guard_dir(tmp_path) / "state.json"
    fleet = manual_fleet(tmp_path, server, client_key, push={"hf_repo": REPO},
                         stop_command=f"cp {state} {seen}; echo stop >> {done}",
                         destroy_command=f"echo destroy >> {done}")
    with HubServer([REPO], token=TOKEN) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert main(["--config", fleet.source, "guard", "box", "--poll-seconds", str(POLL),
                     "--max-hours", "0.0005", "--on", "timeout=push,destroy", "--yes"]) == 0
        wait_for(done.exists, timeout=15, interval=0.1)
        final = ended_state(tmp_path)
        assert hub.state.commits == []
    assert done.read_text() == "stop\n"
    steps = [(d["action"], d["outcome"]) for d in final["did"]]
    assert steps == [("fired", "acting"), ("push", "skipped"), ("destroy", "refused"),
                     ("stop", "ran")], final["did"]
    assert "no run found under the runs roots" in final["did"][1]["detail"]
    sending = json.loads(seen.read_text())["did"][-1]
    assert (sending["action"], sending["outcome"]) == ("stop", "sending"), sending


def fake_nvidia_smi(bindir: Path, util: int) -> None:
    exe = bindir / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, {util}, 10, 81559, 31, 70'\n")
    exe.chmod(0o755)


def test_idle_gpus_with_no_run_progressing_fire_and_remove_takes_it_away(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    bindir = python3_dir(tmp_path)
    fake_nvidia_smi(bindir, 0)
    server = sshd_factory(env={"PATH": f"{bindir}:{SYSTEM_PATH}"})
    stopped = tmp_path / "stopped.log"
    (tmp_path / "runs").mkdir()
    fleet = manual_fleet(tmp_path, server, client_key,
                         stop_command=f"echo stopped >> {stopped}")
    base = ["--config", fleet.source, "guard", "box", "--poll-seconds", str(POLL)]
    assert main([*base, "--max-hours", "2", "--no-progress-minutes", "0.03",
                 "--on", "idle=stop"]) == 0
    wait_for(stopped.exists, timeout=15, interval=0.1)
    final = ended_state(tmp_path)  # saved after the command ended, not when its file appears
    assert final["fired"]["trigger"] == "idle"
    assert [(d["action"], d["outcome"]) for d in final["did"]][-1] == ("stop", "ran")
    assert main([*base, "--remove"]) == 0
    assert not alive(final["pid"]) and not guard_dir(tmp_path).exists()
    assert main([*base, "--remove"]) == 0
    assert "no watchdog there; nothing to remove" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["vast", "runpod", "vast-account-key", "vast-stop",
                                  "runpod-destroy"])
async def test_the_provider_path_uses_the_instances_own_key_and_never_destroys_unverified(
        case: str, tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        trainer: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    """vast, runpod-destroy: every run done, pushed and verified, destroyed with the
    instance's own key. runpod: push,destroy with nowhere to push: never a destroy, a stop
    instead. vast-account-key: no key of its own on the box, so only --use-account-key
    stops it. vast-stop: a plain stop with the instance's own key."""
    provider = case.split("-")[0]
    destroys = case in ("vast", "runpod-destroy")
    account, scoped = f"{provider}-ACCOUNT-key-0123456789", f"{provider}-instance-key-42"
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    if provider == "vast":
        api = VastServer(account, [vast_instance(4242), vast_instance(5555)])
        env = {"CONTAINER_API_KEY": scoped, "CONTAINER_ID": "4242"}
        instance, other = "4242", "5555"
        monkeypatch.setenv("VAST_API_KEY", account)
    else:
        api = RunPodServer(account, [runpod_pod("pod42"), runpod_pod("pod55")])
        if case == "runpod":
            api.fail(runpod_too_many("0"))  # its first stop is refused: sent again, not lost
        env = {"RUNPOD_API_KEY": scoped, "RUNPOD_POD_ID": "pod42"}
        instance, other = "pod42", "pod55"
        monkeypatch.setenv("RUNPOD_API_KEY", account)
    api.scope(scoped, instance)
    use_account = case == "vast-account-key"
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1", **({} if use_account else env)})
    (tmp_path / "runs").mkdir()
    push = {"push": {"hf_repo": REPO}} if destroys else {}
    rules = ["done=push,destroy"] if destroys else ["timeout=stop"] if case == "vast-stop" \
        else ["timeout=push,destroy"]
    with api, HubServer([REPO], token=TOKEN) as hub:
        fleet = make_fleet(tmp_path, [box_entry(server, client_key, provider=provider,
                                                instance_id=instance, **push,
                                                runs_roots=[str(tmp_path / "runs")])],
                           known_hosts=[server.known_hosts_line()],
                           providers={provider: {"base_url": api.url}})
        request = GuardRequest(max_hours=1.0 if destroys else 0.0005,
                               actions=parse_on(rules), poll_seconds=POLL,
                               hf_endpoint=hub.url, use_account_key=use_account)
        said: list[str] = []
        report = await install_guard(fleet, fleet.boxes[0], request, Journal(),
                                     say=said.append, confirmed=True)
        assert report.code == 0, report.lines
        if destroys:  # a run the watchdog sees running, then finishing
            trainer(tmp_path / "runs" / "r1", 2, 0.5)
        final = "destroy" if destroys else "stop"
        done = ended_state(tmp_path)
        assert done["did"][-1]["action"] == final, done["did"]
        assert api.instances[other] == (vast_instance(5555) if provider == "vast"
                                        else runpod_pod("pod55"))
    steps = [(d["action"], d["outcome"]) for d in done["did"]]
    auths = {r.headers.get("authorization") for r in api.requests}
    if destroys:
        assert steps == [("fired", "acting"), ("push", "verified"), ("destroy", "done")]
        if provider == "vast":
            assert instance not in api.instances  # gone: read back as HTTP 404
            assert "HTTP 404" in done["did"][-1]["detail"]
        else:  # RunPod keeps a terminated pod a while
            assert api.instances[instance]["status"] == "TERMINATED"
            assert "the provider reads terminated" in done["did"][-1]["detail"]
            assert api.count("DELETE") == 1 and api.count("POST") == 0
        assert hub.state.repos[REPO]["r1/weights/best.pt"].sha256 == \
            sha(tmp_path / "runs" / "r1" / "weights" / "best.pt")
    elif case == "vast-stop":
        assert steps == [("fired", "acting"), ("stop", "done")], done["did"]
        assert api.instances[instance]["actual_status"] == "stopped"
        assert api.count("PUT") == 1 and api.count("DELETE") == 0
    else:
        assert steps == [("fired", "acting"), ("push", "skipped"), ("destroy", "refused"),
                         ("stop", "done")], done["did"]
        assert "not verified" in done["did"][2]["detail"]
        obj = api.instances[instance]
        assert obj.get("actual_status", obj.get("status")) in ("stopped", "EXITED")
        assert api.count("DELETE") == 0
        if provider == "runpod":
            assert api.count("POST") == 2 and "after 2 tries" in done["did"][-1]["detail"]
    assert done["did"][-1]["answer"].startswith("HTTP 20")
    if use_account:
        assert auths == {f"Bearer {account}"}
        assert "the account-wide key sent with --use-account-key" in done["can_stop"]
        assert any("every instance of your account" in line for line in said)
    else:
        assert auths == {f"Bearer {scoped}"}
        assert f"(this instance's own key) for instance {instance}" in "\n".join(report.lines)
    assert not (guard_dir(tmp_path) / "secrets.json").exists()
    for path in guard_dir(tmp_path).iterdir():
        assert account not in path.read_text() and scoped not in path.read_text(), path


def test_a_scoped_key_is_refused_for_another_instance() -> None:
    import httpx2

    with VastServer("acct", [vast_instance(1), vast_instance(2)]) as api:
        api.scope("inst-1", 1)
        own = httpx2.get(f"{api.url}/api/v0/instances/1/",
                         headers={"Authorization": "Bearer inst-1"})
        other = httpx2.put(f"{api.url}/api/v0/instances/2/", json={"state": "stopped"},
                           headers={"Authorization": "Bearer inst-1"})
        listing = httpx2.get(f"{api.url}/api/v1/instances/",
                             headers={"Authorization": "Bearer inst-1"})
    assert own.status_code == 200 and other.status_code == 403 and listing.status_code == 403
    assert api.instances["2"]["actual_status"] == "running"


HOSTILE_STATES: list[tuple[str, bytes, str]] = [
    ("huge", b'{"v": 1, "x": "' + b"A" * 70000 + b'"}', "over 64 KiB"),
    ("malformed", b'{"v": 1, "armed": tr', "not JSON"),
    ("deep", b"[" * 5000 + b"]" * 5000, "guard state unreadable"),
    ("not an object", b"[1, 2]", "not a JSON object"),
    ("controls", json.dumps({
        "v": 1, "armed": False, "fired": {"trigger": "stalled\x1b]0;pwn\x07", "at": 1e300,
                                          "why": "\x1b[2J" + "w" * 5000},
        "did": [{"action": "stop", "outcome": "done\x1b[31m", "detail": "\x07" * 10,
                 "answer": 7}] * 200 + ["junk", 3],
        "max_hours": "soon", "beat_seconds": -1, "armed_at": float("1e308"),
    }).encode(), "guard fired"),
]


async def test_a_hostile_state_file_marks_only_the_guard_line(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, trainer: Callable) -> None:
    server = sshd_factory()
    fleet = manual_fleet(tmp_path, server, client_key)
    run = tmp_path / "runs" / "r1"
    trainer(run, 3, 0.01).wait(10)
    folder = guard_dir(tmp_path)
    folder.mkdir(parents=True)
    watcher = BoxWatcher(fleet.boxes[0], fleet)
    try:
        for label, data, words in HOSTILE_STATES:
            (folder / "state.json").write_bytes(data)
            state = await watcher.refresh()
            assert state.connection == "ok", (label, state.error)
            assert [r.name for r in state.runs] == ["r1"] and state.runs[0].health == "completed"
            assert state.guard is not None, label
            lines = box_lines(BoxView(state), "", 0.0).lines
            guard = lines[1].text.plain
            assert words in guard, (label, guard)
            assert len(guard) <= 400 and guard.isprintable(), label
            assert all("\x1b" not in line.text.plain for line in lines)
            assert "r1" in "".join(line.text.plain for line in lines[2:])
        (folder / "state.json").unlink()
        os.mkfifo(folder / "state.json")  # a reader that opened it would hang
        state = await asyncio.wait_for(watcher.refresh(), 20)
        assert state.guard is not None and "not a regular file" in (state.guard.error or "")
        (folder / "state.json").unlink()
        (folder / "state.json").write_bytes(HOSTILE_STATES[-1][1])
        once = BoxWatcher(fleet.boxes[0], fleet)
        once.session.keep_probe = False  # the one-shot probe reads it the same way
        try:
            shot = await once.refresh()
        finally:
            await once.close()
        assert shot.guard is not None and shot.guard.fired is not None
        assert shot.guard == (await watcher.refresh()).guard
        (folder / "state.json").unlink()
        state = await watcher.refresh()
        assert state.guard is None and state.guard_sig is None
    finally:
        await watcher.close()


def test_a_dry_run_destroy_says_its_condition_and_an_incomplete_look_only_stops(
        tmp_path: Path, trainer: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchdog's own decision, run here on its folder: a run pushed and verified on
    the loopback Hub is still not destroyed when a runs root could not be looked at."""
    import huggingface_hub.constants

    from tui.onbox import guard

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    for var in ("HF_ENDPOINT", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_TELEMETRY"):
        monkeypatch.setenv(var, "1")  # the watchdog sets them; they are put back after
    run = tmp_path / "runs" / "r1"
    trainer(run, 2, 0.01).wait(10)
    done = tmp_path / "done.log"
    with HubServer([REPO], token=TOKEN) as hub:
        for dry in (True, False):
            folder = tmp_path / f"guard-{dry}"
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps({
                "id": "x", "provider": "manual", "dry_run": dry, "hf_repo": REPO,
                "hf_endpoint": hub.url, "actions": {"timeout": ["push", "destroy"]},
                "stop_command": f"echo stop >> {done}",
                "destroy_command": f"echo destroy >> {done}"}))
            (folder / "secrets.json").write_text(json.dumps({"hf_token": TOKEN}))
            watchdog = guard.Guard(str(folder))
            assert not (folder / "secrets.json").exists()
            watchdog.watch.runs = [(str(run), str(run.parent), "r1")]
            watchdog.watch.picture = ["runs root /mnt/volume: FileNotFoundError"]
            watchdog.act("timeout", "the wall-clock limit of 1 h is reached", None)
            did = [(d["action"], d["outcome"]) for d in watchdog.did]
            state = json.loads((folder / "state.json").read_text())
            assert TOKEN not in json.dumps(state)
            if dry:
                assert did == [("fired", "dry_run"), ("push", "dry_run"),
                               ("destroy", "refused"), ("stop", "dry_run")]
                assert not done.exists() and hub.state.commits == []
            else:
                assert did == [("fired", "acting"), ("push", "verified"),
                               ("destroy", "refused"), ("stop", "ran")], watchdog.did
                assert "the look at the runs is incomplete" in watchdog.did[2]["detail"]
                assert done.read_text() == "stop\n"


def test_an_arming_that_fails_says_why_and_leaves_no_secret_on_the_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    server = sshd_factory()
    (tmp_path / "runs").mkdir()
    fleet = manual_fleet(tmp_path, server, client_key, push={"hf_repo": REPO},
                         python="/nonexistent/bin/python3", stop_command="true")
    assert main(["--config", fleet.source, "guard", "box", "--max-hours", "1", "--yes"]) == 1
    out = capsys.readouterr()
    assert "guard box: cannot start /nonexistent/bin/python3" in out.out
    assert "sends your Hugging Face token" in out.err  # said before it was sent
    assert not (guard_dir(tmp_path) / "secrets.json").exists()
    assert not any(TOKEN in p.read_text() for p in guard_dir(tmp_path).iterdir())
    (entry,) = Journal().entries
    assert entry["outcome"] == "failed" and "cannot start" in entry["error"]
    assert TOKEN not in json.dumps(entry)


def test_a_watchdog_whose_stop_command_ran_records_it_and_exits(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As in the field: a manual box's stop_command exits 0 and the box stays up. The
    watchdog has acted; it records that and exits instead of living on for ever. Armed again
    afterwards it works, and --remove on the ended one says it had already ended."""
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}"})
    stopped = tmp_path / "stopped.log"
    (tmp_path / "runs").mkdir()
    fleet = manual_fleet(tmp_path, server, client_key,
                         stop_command=f"echo stopped >> {stopped}")
    base = ["--config", fleet.source, "guard", "box", "--poll-seconds", str(POLL)]
    assert main([*base, "--max-hours", "0.0005", "--on", "timeout=stop"]) == 0
    capsys.readouterr()
    wait_for(stopped.exists, timeout=15, interval=0.1)
    final = ended_state(tmp_path)
    assert [(d["action"], d["outcome"]) for d in final["did"]] == [("fired", "acting"),
                                                                   ("stop", "ran")]
    assert final["ended"] == "exited after acting" and not final["armed"]
    assert final.get("staying") is None
    wait_for(lambda: not alive(final["pid"]), timeout=5, interval=0.05)
    assert stopped.read_text() == "stopped\n"  # it ran once, and nothing runs it again
    view = fold_guard(final, (guard_dir(tmp_path) / "state.json").stat().st_mtime)
    words, level = guard_summary(view, view.heartbeat + 3600)  # an hour later: no heartbeat
    assert words.endswith("; guard exited after acting") and level == "acted", words
    assert status_document_guard(view)["running"] is False
    # Armed again after it ended: a fresh watchdog runs, and says what it replaced.
    assert main([*base, "--max-hours", "1"]) == 0
    out = capsys.readouterr().out
    assert "the watchdog there had already ended (exited after acting)" in out, out
    again = wait_for(lambda: (s := state_of(tmp_path)).get("armed") and s, timeout=10)
    assert again["pid"] != final["pid"] and alive(again["pid"]) and again["did"] == []
    assert main([*base, "--remove"]) == 0
    assert "the watchdog was stopped" in capsys.readouterr().out
    assert not alive(again["pid"])
    # Ended on its own, then removed: it says so rather than "stopped".
    assert main([*base, "--max-hours", "0.0005", "--on", "timeout=stop"]) == 0
    ended = ended_state(tmp_path)
    wait_for(lambda: not alive(ended["pid"]), timeout=5, interval=0.05)
    capsys.readouterr()
    assert main([*base, "--remove"]) == 0
    out = capsys.readouterr().out
    assert "the watchdog had already ended (exited after acting)" in out, out
    assert not guard_dir(tmp_path).exists()


def test_a_failed_stop_command_is_retried_said_in_the_state_then_given_up(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A stop_command exiting 1: recorded as failed, tried again after a pause (the state
    says it stays and why, and the panel shows it), and after the last try the watchdog
    records that it gave up, the box maybe still billing, and exits."""
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}"})
    tries = tmp_path / "tries.log"
    (tmp_path / "runs").mkdir()
    fleet = manual_fleet(tmp_path, server, client_key,
                         stop_command=f"echo try >> {tries}; echo no such pool >&2; exit 1")
    request = GuardRequest(max_hours=0.0005, actions=parse_on(["timeout=stop"]),
                           poll_seconds=POLL, retry_seconds=2.0)
    report = asyncio.run(install_guard(fleet, fleet.boxes[0], request, Journal()))
    assert report.code == 0, report.lines
    staying = wait_for(lambda: (s := state_of(tmp_path)).get("staying") and s, timeout=15,
                       interval=0.05)
    assert staying["staying"]["attempt"] == 2 and staying["staying"]["attempts"] == 3
    assert [(d["action"], d["outcome"]) for d in staying["did"]] == [("fired", "acting"),
                                                                     ("stop", "failed")]
    assert "exit 1: no such pool" in staying["did"][-1]["answer"]
    assert alive(staying["pid"])  # it stays, and says so
    view = fold_guard(staying, staying["staying"]["retry_at"] - 2.0)
    words, _ = guard_summary(view, staying["staying"]["retry_at"] - 1.5)
    assert "; staying: retrying the stop in 1s (attempt 2 of 3)" in words, words
    final = ended_state(tmp_path)
    assert [(d["action"], d["outcome"]) for d in final["did"]] == [
        ("fired", "acting"), ("stop", "failed"), ("stop", "failed"), ("stop", "failed")]
    assert final["ended"] == "exited: the stop failed 3 times; the box may still be billing"
    assert final.get("staying") is None
    wait_for(lambda: not alive(final["pid"]), timeout=5, interval=0.05)
    assert tries.read_text() == "try\n" * 3
    words, level = guard_summary(fold_guard(final, 0.0), 3600.0)
    assert words.endswith("; guard exited: the stop failed 3 times; the box may still be "
                          "billing") and level == "bad", words


def status_document_guard(view: object) -> dict:
    from tui.model.watchdog import GuardView, guard_document

    assert isinstance(view, GuardView)
    doc = guard_document(view, (view.heartbeat or 0.0) + 3600)
    assert doc is not None
    return doc


def test_a_stop_no_try_could_change_is_not_retried(tmp_path: Path) -> None:
    """No stop_command on a manual box: the failure is recorded once and the watchdog ends
    at once, saying it cannot stop the box, rather than waiting to try what cannot work."""
    from tui.onbox import guard

    folder = tmp_path / "guard"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "id": "x", "provider": "manual", "actions": {"timeout": ["stop"]},
        "retry_seconds": 60}))
    watchdog = guard.Guard(str(folder))
    watchdog.act("timeout", "the wall-clock limit of 1 h is reached", None)
    state = json.loads((folder / "state.json").read_text())
    assert [(d["action"], d["outcome"]) for d in state["did"]] == [("fired", "acting"),
                                                                   ("stop", "failed")]
    assert state["ended"] == ("exited: it cannot stop this box (no stop_command for this "
                              "box)") and state["staying"] is None


# -- which token goes to the box (tui.model.token_rule) ------------------------------------

def token_recording_fleet(tmp_path: Path, sshd_factory: Factory,
                          key: KeyPair) -> tuple[FleetConfig, Path]:
    """A manual box with an hf_repo whose `python3` keeps what it was sent."""
    python3, received = recording_python(tmp_path, "python3")
    server = sshd_factory(env={"PATH": f"{python3.parent}:{SYSTEM_PATH}"})
    (tmp_path / "runs").mkdir()
    return manual_fleet(tmp_path, server, key, push={"hf_repo": REPO},
                        stop_command="true"), received


def test_a_dry_run_or_stop_only_watchdog_is_sent_no_token_and_asks_nobody(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No step of these can push, so the Hub token stays here, and nobody is asked."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    fleet, received = token_recording_fleet(tmp_path, sshd_factory, client_key)
    base = ["--config", fleet.source, "guard", "box", "--poll-seconds", "30",
            "--max-hours", "1"]
    try:
        assert main([*base, "--dry-run"]) == 0
        assert "guard.py" in received_text(received) and TOKEN not in received_text(received)
        said = capsys.readouterr()
        assert "guarded (dry run)" in said.out and f"(push to {REPO})" in said.out
        assert "a dry run: no Hub token was sent" in said.out
        assert "Hugging Face token" not in said.err
        assert main([*base, "--on", "done|stalled|idle|timeout=stop"]) == 0
        assert TOKEN not in received_text(received)
        said = capsys.readouterr()
        assert "no step pushes (every trigger only stops)" in said.out
        assert "Hugging Face token" not in said.err
        assert [e["token_sent"] for e in Journal().entries] == [None, None]
    finally:
        assert main(["--config", fleet.source, "guard", "box", "--remove"]) == 0


def test_a_watchdog_that_pushes_asks_before_the_first_token(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As push asks: off a terminal nothing is sent and it exits 2 unless --yes; once the
    token went (journaled), arming again asks nobody."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    fleet, received = token_recording_fleet(tmp_path, sshd_factory, client_key)
    base = ["--config", fleet.source, "guard", "box", "--poll-seconds", "30",
            "--max-hours", "1"]
    try:
        assert main(base) == 2
        said = capsys.readouterr().out
        assert "Arming this watchdog sends your Hugging Face token from HF_TOKEN" in said
        assert f"to box box, so the watchdog can push to {REPO}" in said
        assert "not armed: pass --yes" in said
        assert received_text(received) == "" and Journal().entries == []
        assert main([*base, "--yes"]) == 0
        capsys.readouterr()
        assert TOKEN in received_text(received)
        assert Journal().entries[-1]["token_sent"] == "HF_TOKEN"
        assert TOKEN not in json.dumps(Journal().entries)
        assert main(base) == 0  # asked once
        assert "sends your Hugging Face token" not in "".join(capsys.readouterr())
    finally:
        assert main(["--config", fleet.source, "guard", "box", "--remove"]) == 0


def finished_run(tmp_path: Path, trainer: Callable, *extra: str) -> Path:
    """A run the stand-in trainer finished (best.pt, last.pt, its history), with more
    files written into its weights/ (`epoch_10.pt`, `best_ema.pt`), each of its own bytes."""
    run = tmp_path / "runs" / "r1"
    trainer(run, 2, 0.01).wait(10)
    for name in extra:
        (run / "weights" / name).write_bytes(f"{name} of r1".encode() * 64)
    return run


def push_destroy(tmp_path: Path, server: Sshd, key: KeyPair, hub: HubServer,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    """Arm `timeout=push,destroy` on a manual box whose commands write into done.log."""
    done = tmp_path / "done.log"
    fleet = manual_fleet(tmp_path, server, key, push={"hf_repo": REPO},
                         stop_command=f"echo stop >> {done}",
                         destroy_command=f"echo destroy >> {done}")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    assert main(["--config", fleet.source, "guard", "box", "--poll-seconds", str(POLL),
                 "--max-hours", "0.0005", "--on", "timeout=push,destroy", "--yes"]) == 0
    return done


def test_a_destroying_watchdog_pushes_the_epoch_snapshots_too_and_verifies_them(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, trainer: Callable,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """push,destroy: the box and every epoch_<N>.pt on it go, so the push takes them (as
    `push --epochs` does) and the Hub must hold each with the hash taken on the box."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run = finished_run(tmp_path, trainer, "epoch_10.pt")
    with HubServer([REPO], token=TOKEN) as hub:
        done = push_destroy(tmp_path, server, client_key, hub, monkeypatch)
        final = ended_state(tmp_path)
    steps = [(d["action"], d["outcome"]) for d in final["did"]]
    assert steps == [("fired", "acting"), ("push", "verified"), ("destroy", "ran")], steps
    assert done.read_text() == "destroy\n"
    stored = hub.state.repos[REPO]
    for name in ("best.pt", "last.pt", "epoch_10.pt"):
        assert stored[f"r1/weights/{name}"].sha256 == sha(run / "weights" / name), name
    assert not final.get("kept")


def test_a_weights_file_no_push_takes_stops_the_box_instead_and_is_named(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, trainer: Callable,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """best_ema.pt is in no push (only best.pt, last.pt and epoch_<N>.pt are): a destroy
    would lose it, so the watchdog stops the box (disk kept) and its state names the file,
    as does the panel's guard line."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    finished_run(tmp_path, trainer, "best_ema.pt")
    with HubServer([REPO], token=TOKEN) as hub:
        done = push_destroy(tmp_path, server, client_key, hub, monkeypatch)
        final = ended_state(tmp_path)
    steps = [(d["action"], d["outcome"]) for d in final["did"]]
    assert steps == [("fired", "acting"), ("push", "verified"), ("destroy", "refused"),
                     ("stop", "ran")], steps
    assert done.read_text() == "stop\n"
    assert "weights/best_ema.pt" in final["did"][2]["detail"]
    (kept,) = final["kept"]
    assert kept["run"] == "r1" and kept["files"] == ["weights/best_ema.pt"]
    assert "no push takes" in kept["why"]
    assert "r1/weights/best_ema.pt" not in hub.state.repos[REPO]
    view = fold_guard(final, (guard_dir(tmp_path) / "state.json").stat().st_mtime)
    words, _ = guard_summary(view, view.heartbeat)
    assert "kept on the box: r1: weights/best_ema.pt (no push takes" in words, words


def test_files_the_hub_did_not_verify_are_named_and_the_box_only_stopped(
        tmp_path: Path, trainer: Callable, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchdog's own decision, run here on its folder: the Hub refuses the token, so
    nothing was verified; every file the push meant to take (epoch snapshots included) is
    named as kept, and the box is stopped, not destroyed."""
    import huggingface_hub.constants

    from tui.onbox import guard

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    for var in ("HF_ENDPOINT", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_TELEMETRY"):
        monkeypatch.setenv(var, "1")  # the watchdog sets them; they are put back after
    run = finished_run(tmp_path, trainer, "epoch_10.pt")
    done = tmp_path / "done.log"
    folder = tmp_path / "guard"
    folder.mkdir()
    with HubServer([REPO], token=TOKEN) as hub:
        (folder / "config.json").write_text(json.dumps({
            "id": "x", "provider": "manual", "hf_repo": REPO, "hf_endpoint": hub.url,
            "actions": {"timeout": ["push", "destroy"]},
            "stop_command": f"echo stop >> {done}",
            "destroy_command": f"echo destroy >> {done}"}))
        (folder / "secrets.json").write_text(json.dumps({"hf_token": "hf_NotTheHubsToken"}))
        watchdog = guard.Guard(str(folder))
        watchdog.watch.runs = [(str(run), str(run.parent), "r1")]
        watchdog.act("timeout", "the wall-clock limit of 1 h is reached", None)
    did = [(d["action"], d["outcome"]) for d in watchdog.did]
    assert did == [("fired", "acting"), ("push", "failed"), ("destroy", "refused"),
                   ("stop", "ran")], watchdog.did
    assert done.read_text() == "stop\n"
    state = json.loads((folder / "state.json").read_text())
    (kept,) = state["kept"]
    assert kept["run"] == "r1" and "not verified" in kept["why"]
    assert {"weights/best.pt", "weights/last.pt", "weights/epoch_10.pt"} <= set(kept["files"])
    assert "hf_NotTheHubsToken" not in json.dumps(state)
