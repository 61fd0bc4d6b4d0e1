"""Stop, start and destroy against loopback provider APIs and a real sshd: done only when seen."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fleets import box_entry, make_fleet
from support.provider_servers import (
    VAST_TOO_FREQUENT,
    Fault,
    LambdaServer,
    ProviderServer,
    RunPodServer,
    VastServer,
    lambda_instance,
    runpod_pod,
    runpod_too_many,
    vast_instance,
)
from support.pty_only_box import PtyOnlyBox
from support.sshd import KeyPair, Sshd

from tui.actions.power import PowerOutcome, destroy_box, in_flight, start_box, stop_box
from tui.model.config import FleetConfig
from tui.providers import make_client
from tui.remote.channel import PTY_ONLY_FIX
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

KEYS = {"vast": "vast-KEY-5e1f0c9a7b", "runpod": "rpa_KEY_93c1d2e4f5",
        "lambda": "secret_KEY_77ab01"}
VAST_ID, POD_ID, LAMBDA_ID = "12345678", "x7k2m9q4p1", "0920582c7ff041399e34823a0be62549"
IDS = {"vast": VAST_ID, "runpod": POD_ID, "lambda": LAMBDA_ID}
SERVERS: dict[str, type[ProviderServer]] = {
    "vast": VastServer, "runpod": RunPodServer, "lambda": LambdaServer}
SEEDS = {"vast": vast_instance, "runpod": runpod_pod, "lambda": lambda_instance}


class FakeTime:
    """An injected clock and sleep: sleeping moves the clock, waits for nothing, may run a hook."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.hooks: list[Callable[[], None]] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.hooks:
            self.hooks.pop(0)()

    def clock(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every provider's key in the environment, no proxy, no VAST_URL."""
    for name, var in (("vast", "VAST_API_KEY"), ("runpod", "RUNPOD_API_KEY"),
                      ("lambda", "LAMBDA_API_KEY")):
        monkeypatch.setenv(var, KEYS[name])
    for var in ("VAST_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@pytest.fixture
def serve() -> Iterator[Callable[..., ProviderServer]]:
    """Start a provider's loopback API (the seed instance unless others are given)."""
    started: list[ProviderServer] = []

    def start(provider: str, *objs: dict[str, Any]) -> ProviderServer:
        server = SERVERS[provider](KEYS[provider], objs or [SEEDS[provider]()])
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.close()


def fleet_for(tmp_path: Path, server: ProviderServer, **box: Any) -> FleetConfig:
    """One box on `server`'s provider, the provider's base_url pointing at the server."""
    entry = {"name": "gpu-a", "host": "127.0.0.1", "provider": server.provider,
             "instance_id": IDS[server.provider], **box}
    return make_fleet(tmp_path, [entry], providers={server.provider: {"base_url": server.url}})


async def act(action: str, tmp_path: Path, server: ProviderServer, fake: FakeTime,
              **kwargs: Any) -> PowerOutcome:
    fleet = fleet_for(tmp_path, server)
    run = {"stop": stop_box, "start": start_box, "destroy": destroy_box}[action]
    outcome = await run(fleet.boxes[0], fleet, sleep=fake.sleep, clock=fake.clock, **kwargs)
    assert outcome.action == action and outcome.box == "gpu-a"
    assert all(key not in outcome.message for key in KEYS.values())
    assert in_flight("gpu-a") is None
    return outcome


def methods(server: ProviderServer) -> list[str]:
    return [r.method for r in server.requests]


# --- happy paths: done once the effect reads back ---


async def test_vast_stop_is_done_only_once_it_reads_stopped(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.settle_gets = 3  # three reads still see the container up
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert (out.state_before, out.state_after) == ("running", "stopped")
    assert methods(server) == ["GET", "PUT", "GET", "GET", "GET", "GET"]
    put = server.requests[1]
    assert put.path == f"/api/v0/instances/{VAST_ID}/" and put.json() == {"state": "stopped"}
    assert fake.sleeps == [3.0] * 4
    assert out.message.startswith(f"stopped box gpu-a (vast instance {VAST_ID}): it reads "
                                  "stopped.")
    assert "the disk still bills $0.0694/hr" in out.message
    assert "may not get the same GPUs back" in out.message


@pytest.mark.parametrize(("gpus", "words"), [
    (None, "Running with 8 GPUs, billing $3.48/hr."),
    (4, "started box gpu-a (vast instance 12345678), but now 4 GPUs instead of 8"),
])
async def test_vast_start_rereads_the_gpus(tmp_path: Path, serve: Callable[..., ProviderServer],
                                           fake: FakeTime, gpus: int | None, words: str) -> None:
    server = serve("vast", vast_instance(actual_status="stopped", intended_status="stopped",
                                         cur_state="stopped"))
    server.settle_gets, server.start_gpus = 1, gpus
    out = await act("start", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert (out.state_before, out.state_after) == ("stopped", "running")
    assert (out.gpus_before, out.gpus_after) == (8, gpus or 8)
    assert words in out.message
    assert server.requests[1].json() == {"state": "running"}


async def test_vast_destroy_is_done_when_the_instance_is_gone(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.settle_gets = 1
    out = await act("destroy", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert (out.state_before, out.state_after) == ("running", "destroyed")
    assert methods(server) == ["GET", "DELETE", "GET", "GET"]
    assert server.requests[1].path == f"/api/v0/instances/{VAST_ID}/"
    assert "the provider no longer has it" in out.message
    assert "Nothing is billed any more" in out.message


async def test_runpod_stop_start_and_destroy(tmp_path: Path,
                                             serve: Callable[..., ProviderServer],
                                             fake: FakeTime) -> None:
    server = serve("runpod")
    server.settle_gets = 1
    stopped = await act("stop", tmp_path, server, fake)
    assert stopped.outcome == "done", stopped.message
    pod = server.instances[POD_ID]
    assert (pod["status"], pod["cost"], pod["ssh"]) == ("EXITED", 0.0, None)
    assert "the disk still bills $0.0274/hr" in stopped.message  # 100 GB x $0.20 / 730 h

    server.start_gpus = 0  # a resumed pod may get zero GPUs
    started = await act("start", tmp_path, server, fake)
    assert started.outcome == "done", started.message
    assert (started.gpus_before, started.gpus_after) == (2, 0)
    assert "but now 0 GPUs instead of 2" in started.message
    assert "it bills $1.38/hr" in started.message

    destroyed = await act("destroy", tmp_path, server, fake)
    assert destroyed.outcome == "done", destroyed.message
    assert (destroyed.state_before, destroyed.state_after) == ("running", "destroyed")
    assert "it reads destroyed" in destroyed.message
    posts = [r for r in server.requests if r.method == "POST"]
    assert [(r.path, r.json()) for r in posts] == [
        (f"/v2/pods/{POD_ID}/action", {"action": "stop"}),
        (f"/v2/pods/{POD_ID}/action", {"action": "start"})]
    assert server.count("DELETE") == 1 and server.instances[POD_ID]["status"] == "TERMINATED"


@pytest.mark.parametrize("removes", [False, True])
async def test_lambda_destroy(tmp_path: Path, serve: Callable[..., ProviderServer],
                              fake: FakeTime, removes: bool) -> None:
    server = serve("lambda")
    server.settle_gets, server.destroy_removes = 2, removes
    out = await act("destroy", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert methods(server) == ["GET", "POST", "GET", "GET", "GET"]
    post = server.requests[1]
    assert post.path == "/api/v1/instance-operations/terminate"
    assert post.json() == {"instance_ids": [LAMBDA_ID]}
    assert out.state_after == "destroyed"


# --- refused and failed: nothing sent, or nothing changed ---


@pytest.mark.parametrize("action", ["stop", "start"])
async def test_lambda_stop_and_start_are_refused_without_a_request(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime,
        action: str) -> None:
    server = serve("lambda")
    out = await act(action, tmp_path, server, fake)
    assert out.outcome == "refused"
    assert "Lambda cannot stop an instance: destroy it or keep it running" in out.message
    assert "Nothing was sent" in out.message
    assert server.requests == [] and fake.sleeps == []


async def test_runpod_409_is_not_allowed_and_changes_nothing(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("runpod", runpod_pod(actions=["terminate"]))  # a pod on a network volume
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "failed"
    assert "not allowed now (HTTP 409" in out.message
    assert "Nothing was changed; the box is still running and billing $1.38/hr" in out.message
    assert methods(server) == ["GET", "POST"] and fake.sleeps == []
    assert server.instances[POD_ID]["status"] == "RUNNING"


async def test_a_long_retry_after_on_stop_fails_and_says_when(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("runpod")
    server.fail(dataclasses.replace(runpod_too_many("120"), method="POST"))
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "failed"
    assert "rate limited" in out.message and "120 s before the next try" in out.message
    assert "Nothing was changed" in out.message and server.count("POST") == 1


async def test_an_unknown_instance_is_not_sent_anything(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast", vast_instance(999))
    out = await act("destroy", tmp_path, server, fake)
    assert out.outcome == "failed"
    assert "not found" in out.message and "Nothing was sent" in out.message
    assert "instance_id" in out.message
    assert methods(server) == ["GET"]


async def test_already_in_the_wished_state_sends_nothing(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast", vast_instance(actual_status="stopped", intended_status="stopped",
                                         cur_state="stopped"))
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "done" and "already stopped: nothing was sent" in out.message
    assert methods(server) == ["GET"]


async def test_a_box_without_instance_id_is_refused(tmp_path: Path,
                                                    serve: Callable[..., ProviderServer],
                                                    fake: FakeTime) -> None:
    server = serve("vast")
    fleet = make_fleet(tmp_path, [{"name": "gpu-a", "host": "127.0.0.1", "provider": "vast"}],
                       providers={"vast": {"base_url": server.url}})
    out = await destroy_box(fleet.boxes[0], fleet, sleep=fake.sleep, clock=fake.clock)
    assert out.outcome == "refused" and "no instance_id" in out.message
    assert server.requests == []


# --- rate limits: a refusal is safe to retry ---


async def test_429_on_stop_honours_retry_after(tmp_path: Path,
                                               serve: Callable[..., ProviderServer],
                                               fake: FakeTime) -> None:
    server = serve("runpod")
    server.fail(dataclasses.replace(runpod_too_many("2"), method="POST"))
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert server.count("POST") == 2
    assert fake.sleeps[0] == 2.0


async def test_vast_429_on_destroy_backs_off_then_deletes_once(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.fail(dataclasses.replace(VAST_TOO_FREQUENT, method="DELETE"))
    out = await act("destroy", tmp_path, server, fake)
    assert out.outcome == "done", out.message
    assert methods(server) == ["GET", "DELETE", "DELETE", "GET"]
    assert fake.sleeps == pytest.approx([0.15, 3.0])


# --- unknown: sent, but the effect cannot be seen ---


async def test_destroy_then_the_api_goes_down_is_unknown(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.settle_gets = 1000
    fake.hooks.append(server.close)  # the API goes away right after the DELETE
    out = await act("destroy", tmp_path, server, fake, observe_timeout=30.0)
    assert out.outcome == "unknown"
    assert out.message.startswith(f"destroy sent to box gpu-a (vast instance {VAST_ID}) but "
                                  "not confirmed: ")
    assert "cannot reach" in out.message
    assert "It may still be billing $3.48/hr: check the provider's console." in out.message
    assert server.count("DELETE") == 1 and methods(server) == ["GET", "DELETE"]
    assert sum(fake.sleeps) >= 30.0
    assert (out.state_before, out.state_after) == ("running", None)


@pytest.mark.parametrize("answer", [
    Fault(200, {"success": False, "msg": "API key not found"}),  # Vast's refused key
    Fault(200, {"instances": None}),                              # an empty answer
    Fault(401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}),
], ids=["key-not-found", "no-instance", "401"])
async def test_only_a_404_or_a_destroyed_state_proves_a_destroy(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime,
        answer: Fault) -> None:
    """"not found" in the words of a refused key read as proof the instance was gone:
    the destroy was reported done while the box kept billing."""
    server = serve("vast")
    server.settle_gets = 1000  # the instance is still there, whatever the API says
    fake.hooks.append(lambda: server.fail(*[dataclasses.replace(answer, method="GET")] * 20))
    out = await act("destroy", tmp_path, server, fake, observe_timeout=12.0)
    assert out.outcome == "unknown", out.message
    assert "may still be billing" in out.message and out.state_after != "destroyed"
    assert server.count("DELETE") == 1


async def test_an_effect_never_seen_in_time_is_unknown(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.settle_gets = 1000
    out = await act("stop", tmp_path, server, fake, observe_timeout=12.0)
    assert out.outcome == "unknown"
    assert "it still reads stopping after 12 s" in out.message
    assert (out.state_before, out.state_after) == ("running", "stopping")
    assert server.count("PUT") == 1 and server.count("GET") == 5
    assert fake.sleeps == [3.0] * 4


async def test_a_timed_out_stop_is_unknown_and_never_repeated(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.fail(Fault(delay=30, method="PUT"))
    fleet = fleet_for(tmp_path, server)
    async with make_client("vast", fleet, timeout=0.3, sleep=fake.sleep) as client:
        out = await stop_box(fleet.boxes[0], fleet, client=client, sleep=fake.sleep,
                             clock=fake.clock)
    assert out.outcome == "unknown"
    assert "no answer" in out.message and "within 0.3 s" in out.message
    assert "it still reads running" in out.message and "$3.48/hr" in out.message
    assert methods(server) == ["GET", "PUT", "GET"]


async def test_a_5xx_on_destroy_is_not_retried(tmp_path: Path,
                                               serve: Callable[..., ProviderServer],
                                               fake: FakeTime) -> None:
    server = serve("runpod")
    server.fail(dataclasses.replace(server.error_fault(502, "bad gateway"), method="DELETE"))
    out = await act("destroy", tmp_path, server, fake)
    assert out.outcome == "unknown"
    assert "not retried" in out.message and "it still reads running" in out.message
    assert server.count("DELETE") == 1


async def test_a_key_refused_while_watching_is_unknown_at_once(
        tmp_path: Path, serve: Callable[..., ProviderServer], fake: FakeTime) -> None:
    server = serve("vast")
    server.settle_gets = 1000

    def revoke() -> None:
        server.key = "rotated"
    fake.hooks.append(revoke)
    out = await act("stop", tmp_path, server, fake)
    assert out.outcome == "unknown"
    assert "the API key was refused" in out.message and "VAST_API_KEY" in out.message
    assert methods(server) == ["GET", "PUT", "GET"]  # polling again would not help


# --- one action per box at a time ---


async def test_a_double_press_sends_one_delete(tmp_path: Path,
                                               serve: Callable[..., ProviderServer],
                                               fake: FakeTime) -> None:
    server = serve("runpod")
    server.settle_gets = 2
    fleet = fleet_for(tmp_path, server)
    box = fleet.boxes[0]
    first, second = await asyncio.gather(
        destroy_box(box, fleet, sleep=fake.sleep, clock=fake.clock),
        destroy_box(box, fleet, sleep=fake.sleep, clock=fake.clock))
    assert first.outcome == "done", first.message
    assert second.outcome == "refused"
    assert second.message.startswith("a destroy of box gpu-a is already in progress")
    assert server.count("DELETE") == 1

    # a stop pressed while a destroy is on its way is refused too, and sends nothing
    server.add(runpod_pod())
    running = asyncio.create_task(destroy_box(box, fleet, sleep=fake.sleep, clock=fake.clock))
    await asyncio.sleep(0)
    assert in_flight("gpu-a") == "destroy"
    late = await stop_box(box, fleet, sleep=fake.sleep, clock=fake.clock)
    assert late.outcome == "refused" and "a destroy of box gpu-a" in late.message
    assert (await running).outcome == "done"
    assert server.count("DELETE") == 2 and server.count("POST") == 0
    assert in_flight("gpu-a") is None


# --- manual boxes: their own commands over SSH ---


def manual_fleet(tmp_path: Path, server: Sshd, key: KeyPair, **commands: str) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, name="own-box", **commands)],
                      known_hosts=[server.known_hosts_line()])


async def test_manual_stop_command_runs_over_the_session_but_exit_0_is_not_the_effect(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    """A command that exits 0 while the box keeps answering SSH has not been seen to stop
    it: the outcome is unknown, and the meter keeps billing (it used to read "done")."""
    marker = tmp_path / "box-was-stopped"
    server = sshd_factory()
    fleet = manual_fleet(tmp_path, server, client_key, stop_command=f"touch '{marker}'",
                         pricing={"running_usd_per_hr": 2.5})
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        out = await stop_box(box, fleet, ssh=session, observe_timeout=1.0, poll_interval=0.2)
        assert session.connected and session.connects == 1  # the session is the caller's
    finally:
        await session.close()
    assert marker.exists()
    assert out.outcome == "unknown", out.message
    assert "command ran; effect not observed" in out.message
    assert "it still answers SSH" in out.message and "set observe_command" in out.message
    assert "billing $2.50/hr" in out.message
    assert out.state_after is None


async def test_manual_destroy_is_done_once_the_box_stops_answering(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    # The command takes the box off the network (here: it ends the box's sshd listener).
    fleet = manual_fleet(tmp_path, server, client_key,
                         destroy_command=f"kill $(cat '{server.pid_path}')")
    out = await destroy_box(fleet.boxes[0], fleet, observe_timeout=20.0, poll_interval=0.2)
    assert out.outcome == "done", out.message
    assert out.state_after == "destroyed"
    assert "its command exited 0, and the box no longer answers SSH" in out.message


async def test_manual_observe_command_decides(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    gone = tmp_path / "console-says-gone"
    fleet = manual_fleet(tmp_path, server, client_key, destroy_command="true",
                         observe_command=f"echo looking at $GPURENT_BOX; test -e '{gone}'")
    box = fleet.boxes[0]
    out = await destroy_box(box, fleet, observe_timeout=0.6, poll_interval=0.2)
    assert out.outcome == "unknown", out.message
    assert "command ran; effect not observed" in out.message
    assert "observe_command exited 1: looking at own-box" in out.message
    gone.touch()
    out = await destroy_box(box, fleet, observe_timeout=5.0, poll_interval=0.2)
    assert out.outcome == "done" and out.state_after == "destroyed", out.message
    assert "its observe_command exited 0" in out.message


async def test_manual_command_failure_shows_exit_status_and_stderr(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = manual_fleet(tmp_path, server, client_key,
                         destroy_command="echo 'cloud says: no such machine' >&2; exit 3",
                         pricing={"running_usd_per_hr": 2.5})
    out = await destroy_box(fleet.boxes[0], fleet)  # opens and closes its own session
    assert out.outcome == "failed"
    assert "the destroy_command of box own-box exited 3: cloud says: no such machine" \
        in out.message
    assert "still running and billing $2.50/hr" in out.message


async def test_manual_command_that_drops_the_connection_is_unknown(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = manual_fleet(tmp_path, server, client_key, stop_command="kill -9 $PPID")
    out = await stop_box(fleet.boxes[0], fleet, observe_timeout=1.0, poll_interval=0.2)
    assert out.outcome == "unknown", out.message
    assert "command ran; effect not observed" in out.message
    assert "its command was sent but it ended without an exit status" in out.message


async def test_manual_stop_on_an_endpoint_that_refuses_commands_says_how_to_reach_it(
        tmp_path: Path, client_key: KeyPair) -> None:
    """RunPod's basic proxy refuses every command: nothing ran, and the words give the fix."""
    proxy = PtyOnlyBox(client_key.public_line)
    await proxy.start()
    try:
        fleet = make_fleet(tmp_path, [{
            "name": "pod", "host": "127.0.0.1", "port": proxy.port, "user": "root",
            "identity_file": str(client_key.private_path), "stop_command": "true"}],
            known_hosts=[proxy.known_hosts_line()])
        out = await stop_box(fleet.boxes[0], fleet, observe_timeout=1.0, poll_interval=0.2)
    finally:
        await proxy.close()
    assert out.outcome == "failed", out.message
    assert "refused to run a command" in out.message and PTY_ONLY_FIX in out.message
    assert "Nothing was run" in out.message
    assert proxy.refused == ["true"]


@pytest.mark.parametrize("force", [
    "true",
    'echo "Error: Your SSH client doesn\'t support PTY"; exit 1',
    'echo "Error: Your SSH client doesn\'t support PTY" >&2; exit 1',
], ids=["silent", "complaint-on-stdout", "complaint-on-stderr"])
async def test_manual_destroy_on_an_endpoint_that_runs_no_command_says_how_to_reach_it(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair,
        force: str) -> None:
    """An endpoint that closes every command's session without running it: the
    destroy_command never ran, which the words say with the fix, not "command ran"."""
    marker = tmp_path / "destroyed"
    server = sshd_factory("pty", extra_config=f"ForceCommand {force}")
    fleet = manual_fleet(tmp_path, server, client_key, destroy_command=f"touch '{marker}'")
    out = await destroy_box(fleet.boxes[0], fleet, observe_timeout=1.0, poll_interval=0.2)
    assert not marker.exists()
    assert out.outcome == "failed", out.message
    assert "the SSH server ran no command" in out.message and PTY_ONLY_FIX in out.message


async def test_manual_box_without_commands_or_reach(
        tmp_path: Path, sshd_factory: Callable[..., Sshd], client_key: KeyPair) -> None:
    server = sshd_factory()
    fleet = manual_fleet(tmp_path, server, client_key)
    box = fleet.boxes[0]
    stop = await stop_box(box, fleet)
    assert (stop.outcome, stop.message) == (
        "refused", "no stop_command configured for box own-box: stop it from its own console "
        "(nothing was run)")
    destroy = await destroy_box(box, fleet)
    assert destroy.outcome == "refused" and "no destroy_command configured" in destroy.message
    start = await start_box(box, fleet)
    assert start.outcome == "refused" and "start it from its own console" in start.message

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = make_fleet(tmp_path, [{**box_entry(server, client_key, name="own-box",
                                              stop_command="true"), "port": port}],
                      known_hosts=[server.known_hosts_line()])
    out = await stop_box(gone.boxes[0], gone)
    assert out.outcome == "failed"
    assert "connection refused" in out.message and "Nothing was run" in out.message
