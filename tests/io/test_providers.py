"""Provider adapters against loopback servers that follow each provider's contract."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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

from tui.model.config import ConfigError, FleetConfig, parse_config
from tui.providers import ProviderError, make_client
from tui.providers.base import HttpProvider, retry_after_seconds
from tui.providers.vast import vast_state

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"vast": "vast-KEY-5e1f0c9a7b", "runpod": "rpa_KEY_93c1d2e4f5",
        "lambda": "secret_KEY_77ab01"}
KEY_VARS = {"vast": "VAST_API_KEY", "runpod": "RUNPOD_API_KEY", "lambda": "LAMBDA_API_KEY"}
SERVERS: dict[str, type[ProviderServer]] = {
    "vast": VastServer, "runpod": RunPodServer, "lambda": LambdaServer}
SEEDS = {"vast": vast_instance, "runpod": runpod_pod, "lambda": lambda_instance}


class Sleeps:
    """An injected sleep: records the delays, waits for none of them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture(autouse=True)
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every provider's key in the environment; no proxy, no real home, no VAST_URL."""
    for name, var in KEY_VARS.items():
        monkeypatch.setenv(var, KEYS[name])
    for var in ("VAST_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return KEYS


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def start(provider: str, *objs: dict[str, Any]) -> ProviderServer:
    server = SERVERS[provider](KEYS[provider], objs or [SEEDS[provider]()])
    server.start()
    return server


@pytest.fixture
def servers() -> Iterator[dict[str, ProviderServer]]:
    started = {name: start(name) for name in SERVERS}
    yield started
    for server in started.values():
        server.close()


def fleet_with(**urls: str) -> FleetConfig:
    """A fleet config whose [providers.NAME] base_url tables point at the given URLs."""
    tables = "".join(f'[providers.{name}]\nbase_url = "{url}"\n' for name, url in urls.items())
    return parse_config(f'{tables}[[box]]\nname = "b"\nhost = "127.0.0.1"\n', "fleet.toml")


def client_for(server: ProviderServer, sleeps: Sleeps, **kwargs: Any) -> HttpProvider:
    client = make_client(server.provider, fleet_with(**{server.provider: server.url}),
                         sleep=sleeps, **kwargs)
    assert isinstance(client, HttpProvider)
    return client


async def failure(server: ProviderServer, sleeps: Sleeps, instance_id: str | None = None,
                  **kwargs: Any) -> ProviderError:
    async with client_for(server, sleeps, **kwargs) as client:
        with pytest.raises(ProviderError) as info:
            if instance_id is None:
                await client.list()
            else:
                await client.get(instance_id)
    return info.value


# --- Vast.ai ---


async def test_vast_get_maps_every_field(servers: dict[str, ProviderServer],
                                         sleeps: Sleeps) -> None:
    server = servers["vast"]
    async with client_for(server, sleeps) as client:
        info = await client.get("12345678")
    assert info.provider == "vast" and info.instance_id == "12345678"
    assert (info.state, info.raw_state) == ("running", "running")
    assert info.running_usd_per_hr == 3.4828
    assert info.disk_usd_per_hr == 0.0694
    assert info.disk_gb == 250.0
    assert info.storage_usd_per_gb_month == 0.20
    assert info.hours_per_month == 720.0
    assert info.can_stop is True
    assert (info.gpu_name, info.num_gpus) == ("RTX 4090", 8)
    assert info.started_at == 1767225600.25
    assert info.label == "yolox-coco"
    assert info.raw["ssh_port"] == 41022
    [request] = server.requests
    assert (request.method, request.path) == ("GET", "/api/v0/instances/12345678/")
    assert request.headers["authorization"] == f"Bearer {KEYS['vast']}"


async def test_vast_list_follows_after_token_25_at_a_time(sleeps: Sleeps) -> None:
    with VastServer(KEYS["vast"], [vast_instance(1000 + i) for i in range(60)]) as server:
        async with client_for(server, sleeps) as client:
            infos = await client.list()
    assert [i.instance_id for i in infos] == [str(1000 + i) for i in range(60)]
    assert [r.param("limit") for r in server.requests] == ["25", "25", "25"]
    tokens = [r.param("after_token") for r in server.requests]
    assert tokens[0] is None and all(tokens[1:]) and tokens[1] != tokens[2]
    assert all(r.path == "/api/v1/instances/" for r in server.requests)


async def test_vast_storage_total_cost_absent_gives_none(sleeps: Sleeps) -> None:
    stopped = vast_instance(7, actual_status="stopped", intended_status="stopped",
                            cur_state="stopped")
    del stopped["storage_total_cost"]
    with VastServer(KEYS["vast"], [stopped]) as server:
        async with client_for(server, sleeps) as client:
            info = await client.get("7")
    assert (info.state, info.raw_state) == ("stopped", "stopped")
    assert info.disk_usd_per_hr is None and info.storage_usd_per_gb_month == 0.20


@pytest.mark.parametrize(("actual", "intended", "cur", "state"), [
    ("running", "running", "running", "running"),
    ("loading", "running", "running", "starting"),
    ("rebooting", "running", "running", "starting"),
    (None, "running", "running", "starting"),       # Vast: null = being provisioned
    ("stopped", "stopped", "stopped", "stopped"),
    ("exited", "running", "stopped", "stopped"),
    ("exited", "running", "running", "error"),      # container dead, GPU still billed
    ("frozen", "frozen", "running", "running"),     # paused: GPU charges apply
    ("running", "stopped", "running", "stopping"),  # a stop was asked for
    ("stopped", "running", "stopped", "starting"),  # a start was asked for
    ("offline", "running", "running", "unknown"),
    ("unknown", "running", "running", "unknown"),
    ("something-new", "running", "running", "unknown"),
])
def test_vast_states(actual: str | None, intended: str, cur: str, state: str) -> None:
    assert vast_state(actual, intended, cur) == state


@pytest.mark.parametrize(("error", "msg", "kind"), [
    ("no_such_instance", "Instance 12345678 not found.", "not_found"),
    ("auth_error", "Invalid user key", "auth"),
    ("invalid_args", "bad request", "bad_answer"),
])
async def test_vast_200_with_success_false_is_a_failure(
        servers: dict[str, ProviderServer], sleeps: Sleeps, error: str, msg: str,
        kind: str) -> None:
    server = servers["vast"]
    server.fail(Fault(200, {"success": False, "error": error, "msg": msg}))
    exc = await failure(server, sleeps, "12345678")
    assert exc.kind == kind and exc.status == 200
    assert exc.message.startswith("Vast.ai instance 12345678: ")
    assert msg in exc.message and exc.instance_id == "12345678" and exc.provider == "vast"
    assert sleeps.delays == []


async def test_vast_unknown_or_empty_instance_is_not_found(servers: dict[str, ProviderServer],
                                                           sleeps: Sleeps) -> None:
    exc = await failure(servers["vast"], sleeps, "999")
    assert (exc.kind, exc.status) == ("not_found", 404)
    assert "Vast.ai instance 999" in exc.message and "not found" in exc.message
    servers["vast"].fail(Fault(200, {"instances": None}))
    exc = await failure(servers["vast"], sleeps, "12345678")
    assert exc.kind == "not_found" and "no instance" in exc.message


async def test_vast_429_backs_off_like_its_cli_then_succeeds(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    server = servers["vast"]
    server.fail(VAST_TOO_FREQUENT, VAST_TOO_FREQUENT, VAST_TOO_FREQUENT)
    async with client_for(server, sleeps) as client:
        info = await client.get("12345678")
    assert info.state == "running"
    assert sleeps.delays == pytest.approx([0.15, 0.225, 0.3375])
    assert len(server.requests) == 4


async def test_vast_429_until_retries_run_out(servers: dict[str, ProviderServer],
                                              sleeps: Sleeps) -> None:
    server = servers["vast"]
    server.fail(*[VAST_TOO_FREQUENT] * 5)
    exc = await failure(server, sleeps, "12345678", max_tries=5)
    assert (exc.kind, exc.status) == ("rate_limited", 429)
    assert sleeps.delays == pytest.approx([0.15, 0.225, 0.3375, 0.50625])
    assert len(server.requests) == 5
    assert "Vast.ai instance 12345678: rate limited" in exc.message
    assert "API requests too frequent" in exc.message and "gave up after 5 tries" in exc.message


async def test_vast_key_from_the_cli_key_files(servers: dict[str, ProviderServer],
                                               sleeps: Sleeps, isolated_dirs: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAST_API_KEY")
    server = servers["vast"]
    home_key = Path.home() / ".vast_api_key"
    home_key.write_text(KEYS["vast"] + "\n")
    async with client_for(server, sleeps) as client:
        await client.get("12345678")
    cli_key = isolated_dirs / "config" / "vastai" / "vast_api_key"
    cli_key.parent.mkdir(parents=True)
    cli_key.write_text("from-the-cli-file\n")  # wins over ~/.vast_api_key
    async with client_for(server, sleeps) as client:
        with pytest.raises(ProviderError) as info:
            await client.get("12345678")
    assert info.value.kind == "auth"
    assert [r.headers["authorization"] for r in server.requests] == [
        f"Bearer {KEYS['vast']}", "Bearer from-the-cli-file"]


# --- RunPod ---


async def test_runpod_get_maps_every_field(servers: dict[str, ProviderServer],
                                           sleeps: Sleeps) -> None:
    server = servers["runpod"]
    async with client_for(server, sleeps) as client:
        info = await client.get("x7k2m9q4p1")
    assert (info.provider, info.instance_id) == ("runpod", "x7k2m9q4p1")
    assert (info.state, info.raw_state) == ("running", "RUNNING")
    assert info.running_usd_per_hr == 1.38
    assert info.disk_usd_per_hr is None
    assert info.disk_gb == 100.0 and info.storage_usd_per_gb_month == 0.20
    assert info.hours_per_month is None and info.can_stop is True
    assert (info.gpu_name, info.num_gpus) == ("NVIDIA GeForce RTX 4090", 2)
    assert info.started_at == pytest.approx(1767348090.25)  # 2026-01-02T10:01:30.250Z
    assert info.label == "yolo9-runpod"
    [request] = server.requests
    assert (request.method, request.path) == ("GET", "/v2/pods/x7k2m9q4p1")
    assert request.headers["authorization"] == f"Bearer {KEYS['runpod']}"


@pytest.mark.parametrize(("status", "state"), [
    ("PROVISIONING", "starting"), ("STARTING", "starting"), ("EXITED", "stopped"),
    ("TERMINATED", "destroyed"), ("ERROR", "error"), ("PAUSED?", "unknown")])
async def test_runpod_states_and_no_running_rate_unless_running(
        sleeps: Sleeps, status: str, state: str) -> None:
    with RunPodServer(KEYS["runpod"], [runpod_pod(status=status, cost=0.0)]) as server:
        async with client_for(server, sleeps) as client:
            [info] = await client.list()
    assert (info.state, info.raw_state, info.running_usd_per_hr) == (state, status, None)
    assert server.requests[0].path == "/v2/pods"


async def test_runpod_list_and_a_pod_that_cannot_stop(sleeps: Sleeps) -> None:
    pods = [runpod_pod(), runpod_pod("netvol01", actions=["terminate"], mounts={})]
    with RunPodServer(KEYS["runpod"], pods) as server:
        async with client_for(server, sleeps) as client:
            first, second = await client.list()
    assert first.can_stop and not second.can_stop
    assert second.disk_gb is None and second.storage_usd_per_gb_month is None


async def test_runpod_honours_retry_after(servers: dict[str, ProviderServer],
                                          sleeps: Sleeps) -> None:
    server = servers["runpod"]
    server.fail(runpod_too_many("2"))
    async with client_for(server, sleeps) as client:
        assert (await client.get("x7k2m9q4p1")).state == "running"
    assert sleeps.delays == [2.0]
    assert len(server.requests) == 2


async def test_runpod_long_retry_after_is_handed_to_the_caller(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    servers["runpod"].fail(runpod_too_many("120"))
    exc = await failure(servers["runpod"], sleeps, "x7k2m9q4p1")
    assert (exc.kind, exc.retry_after, sleeps.delays) == ("rate_limited", 120.0, [])
    assert "RunPod pod x7k2m9q4p1" in exc.message and "120 s" in exc.message


async def test_runpod_500_then_success(servers: dict[str, ProviderServer],
                                       sleeps: Sleeps) -> None:
    server = servers["runpod"]
    server.fail(server.error_fault(500, "upstream hiccup"))
    async with client_for(server, sleeps) as client:
        assert (await client.get("x7k2m9q4p1")).instance_id == "x7k2m9q4p1"
    assert sleeps.delays == pytest.approx([0.15])


async def test_server_errors_until_retries_run_out(servers: dict[str, ProviderServer],
                                                   sleeps: Sleeps) -> None:
    server = servers["runpod"]
    server.fail(*[server.error_fault(503, "maintenance")] * 3)
    exc = await failure(server, sleeps, "x7k2m9q4p1", max_tries=3)
    assert (exc.kind, exc.status) == ("server", 503)
    assert "RunPod pod x7k2m9q4p1: server error (HTTP 503: Service Unavailable: maintenance)" \
        in exc.message
    assert "gave up after 3 tries" in exc.message
    assert sleeps.delays == pytest.approx([0.15, 0.225])


async def test_runpod_404_and_401(servers: dict[str, ProviderServer], sleeps: Sleeps,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    exc = await failure(servers["runpod"], sleeps, "gone1234")
    assert (exc.kind, exc.status) == ("not_found", 404)
    assert exc.message == "RunPod pod gone1234: not found (HTTP 404: Not Found: pod gone1234 " \
        "not found)"
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_WRONG_KEY_000")
    exc = await failure(servers["runpod"], sleeps, "x7k2m9q4p1")
    assert (exc.kind, exc.status) == ("auth", 401)
    assert "RUNPOD_API_KEY" in exc.message and "rpa_WRONG_KEY_000" not in exc.message
    assert sleeps.delays == []


async def test_runpod_409_is_not_allowed(servers: dict[str, ProviderServer],
                                         sleeps: Sleeps) -> None:
    server = servers["runpod"]
    server.fail(server.error_fault(409, "pod is not running"))
    exc = await failure(server, sleeps, "x7k2m9q4p1")
    assert (exc.kind, exc.status) == ("not_allowed", 409)


# --- Lambda Cloud ---


async def test_lambda_get_and_list_map_every_field(servers: dict[str, ProviderServer],
                                                   sleeps: Sleeps) -> None:
    server = servers["lambda"]
    server.add(lambda_instance("b2", status="booting"))
    iid = "0920582c7ff041399e34823a0be62549"
    async with client_for(server, sleeps) as client:
        info = await client.get(iid)
        listed = await client.list()
    assert (info.provider, info.instance_id) == ("lambda", iid)
    assert (info.state, info.raw_state) == ("running", "active")
    assert info.running_usd_per_hr == 14.32
    assert info.disk_usd_per_hr is None and info.storage_usd_per_gb_month is None
    assert info.disk_gb == 19500.0 and info.hours_per_month is None
    assert info.can_stop is False and info.started_at is None
    assert (info.gpu_name, info.num_gpus, info.label) == ("A100 (80 GB SXM4)", 8, "yolox-lambda")
    assert [(i.instance_id, i.state) for i in listed] == [(iid, "running"), ("b2", "starting")]
    assert [r.path for r in server.requests] == [f"/api/v1/instances/{iid}", "/api/v1/instances"]


@pytest.mark.parametrize(("status", "state"), [
    ("terminating", "stopping"), ("terminated", "destroyed"), ("unhealthy", "error"),
    ("preempted", "destroyed"), ("new-word", "unknown")])
async def test_lambda_states(sleeps: Sleeps, status: str, state: str) -> None:
    with LambdaServer(KEYS["lambda"], [lambda_instance("i1", status=status)]) as server:
        async with client_for(server, sleeps) as client:
            assert (await client.get("i1")).state == state


async def test_lambda_error_objects(servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    server = servers["lambda"]
    exc = await failure(server, sleeps, "nope")
    assert (exc.kind, exc.status) == ("not_found", 404)
    assert exc.message == ("Lambda Cloud instance nope: not found (HTTP 404: Specified "
                           "instance does not exist. [global/object-does-not-exist])")
    server.fail(server.error_fault(403, "Your account is inactive."))
    exc = await failure(server, sleeps)
    assert exc.kind == "auth" and "global/account-inactive" in exc.message
    assert exc.message.startswith("Lambda Cloud instance list: ")
    server.fail(server.error_fault(400, "Invalid parameters."))
    assert (await failure(server, sleeps)).kind == "bad_answer"


# --- what every adapter shares ---


@pytest.mark.parametrize(("provider", "iid"), [
    ("vast", "12345678"), ("runpod", "x7k2m9q4p1"), ("lambda", "i-1")])
async def test_malformed_json_is_a_bad_answer(servers: dict[str, ProviderServer], sleeps: Sleeps,
                                              provider: str, iid: str) -> None:
    server = servers[provider]
    server.fail(Fault(200, '{"instances": {"id": 1, ', {"Content-Type": "application/json"}))
    exc = await failure(server, sleeps, iid)
    assert exc.kind == "bad_answer" and iid in exc.message and "not JSON" in exc.message
    server.fail(Fault(200, ["an", "array"]))
    exc = await failure(server, sleeps, iid)
    assert exc.kind == "bad_answer" and sleeps.delays == []


@pytest.mark.parametrize("provider", ["vast", "runpod", "lambda"])
async def test_a_slow_answer_is_a_timeout(servers: dict[str, ProviderServer], sleeps: Sleeps,
                                          provider: str) -> None:
    server = servers[provider]
    server.fail(Fault(delay=30))
    began = time.monotonic()
    exc = await failure(server, sleeps, "abc", timeout=0.3)
    assert exc.kind == "timeout" and exc.status is None
    assert time.monotonic() - began < 3
    assert "abc" in exc.message and "within 0.3 s" in exc.message
    assert len(server.requests) == 1  # not retried: the caller's next refresh is the retry


async def test_nobody_listening_is_unreachable(sleeps: Sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client("lambda", fleet_with(**{"lambda": f"http://127.0.0.1:{port}"}),
                         sleep=sleeps)
    with pytest.raises(ProviderError) as info:
        await client.get("i-1")
    await client.aclose()
    assert info.value.kind == "unreachable"
    assert f"127.0.0.1:{port}" in info.value.message and "instance i-1" in info.value.message


@pytest.mark.parametrize("provider", ["vast", "runpod", "lambda"])
async def test_missing_key_names_the_variable(servers: dict[str, ProviderServer], sleeps: Sleeps,
                                              monkeypatch: pytest.MonkeyPatch,
                                              provider: str) -> None:
    monkeypatch.delenv(KEY_VARS[provider])
    exc = await failure(servers[provider], sleeps, "abc")
    assert exc.kind == "no_key" and exc.status is None
    assert KEY_VARS[provider] in exc.message and "abc" in exc.message
    assert servers[provider].requests == []


async def test_the_key_never_shows(servers: dict[str, ProviderServer], sleeps: Sleeps,
                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for name, server in servers.items():
        key = KEYS[name]
        server.fail(
            server.error_fault(401, f"key {key} was revoked"),  # a server that echoes it
            Fault(200, f"oops {key}"),
            *[Fault(429, f"slow down {key}")] * 2,
            *[server.error_fault(500, f"Bearer {key}")] * 2,
            Fault(delay=30),
        )
        async with client_for(server, sleeps, max_tries=2, timeout=0.3) as client:
            texts.append(repr(client))
            for _ in range(5):
                with pytest.raises(ProviderError) as info:
                    await client.get("abc")
                exc = info.value
                texts += [str(exc), repr(exc), *traceback.format_exception(exc),
                          repr(vars(exc))]
            texts.append(repr(await client.list()))
    texts.append(caplog.text)
    blob = "\n".join(texts)
    for key in KEYS.values():
        assert key not in blob
    assert blob.count("***") >= 12


def test_retry_after_forms() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Thu, 01 Jan 2026 00:00:10 GMT", now=1767225600.0) == 10.0


# --- base URLs ---


async def test_base_url_config_then_vast_url_then_default() -> None:
    bare = fleet_with()
    env = {"VAST_URL": "http://127.0.0.1:9/from-env"}
    configured = fleet_with(vast="http://127.0.0.1:8/from-config")
    clients = {p: make_client(p, bare) for p in ("vast", "runpod", "lambda")}
    clients["vast_url"] = make_client("vast", bare, env=env)
    clients["config"] = make_client("vast", configured, env=env)
    urls = {}
    for name, client in clients.items():
        assert isinstance(client, HttpProvider)
        urls[name] = client.base_url
        await client.aclose()
    assert urls == {"vast": "https://console.vast.ai", "runpod": "https://api.runpod.io",
                    "lambda": "https://cloud.lambda.ai", "vast_url": "http://127.0.0.1:9/from-env",
                    "config": "http://127.0.0.1:8/from-config"}
    with pytest.raises(ValueError, match="manual"):
        make_client("manual", bare)


async def test_vast_url_is_used_for_requests(servers: dict[str, ProviderServer],
                                             sleeps: Sleeps) -> None:
    server = servers["vast"]
    env = {"VAST_URL": server.url, "VAST_API_KEY": KEYS["vast"]}
    async with make_client("vast", fleet_with(), env=env, sleep=sleeps) as client:
        assert (await client.get("12345678")).instance_id == "12345678"
    assert len(server.requests) == 1


async def test_a_base_url_with_a_path_prefix_keeps_it(sleeps: Sleeps) -> None:
    with LambdaServer(KEYS["lambda"]) as server:
        server.route("GET", r"/proxy/api/v1/instances", server.list_instances)
        client = make_client("lambda", fleet_with(**{"lambda": f"{server.url}/proxy/"}),
                             sleep=sleeps)
        async with client:
            assert await client.list() == []
    assert server.requests[0].path == "/proxy/api/v1/instances"


# --- layering ---


def test_providers_load_no_textual_and_no_remote_or_app() -> None:
    code = "import sys, tui.providers; print('\\n'.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split())
    assert "textual" not in {n.split(".")[0] for n in loaded}
    assert not {n for n in loaded if n.startswith(
        ("tui.remote", "tui.app", "tui.screens", "tui.actions", "widgets"))}


# --- actions: stop, start, destroy ---


@pytest.mark.parametrize(("provider", "iid", "action", "method", "path", "body"), [
    ("vast", "12345678", "stop", "PUT", "/api/v0/instances/12345678/", {"state": "stopped"}),
    ("vast", "12345678", "start", "PUT", "/api/v0/instances/12345678/", {"state": "running"}),
    ("vast", "12345678", "destroy", "DELETE", "/api/v0/instances/12345678/", None),
    ("runpod", "x7k2m9q4p1", "stop", "POST", "/v2/pods/x7k2m9q4p1/action", {"action": "stop"}),
    ("runpod", "x7k2m9q4p1", "destroy", "DELETE", "/v2/pods/x7k2m9q4p1", None),
    ("lambda", "0920582c7ff041399e34823a0be62549", "destroy", "POST",
     "/api/v1/instance-operations/terminate",
     {"instance_ids": ["0920582c7ff041399e34823a0be62549"]}),
])
async def test_actions_send_the_providers_own_requests(
        servers: dict[str, ProviderServer], sleeps: Sleeps, provider: str, iid: str,
        action: str, method: str, path: str, body: Any) -> None:
    server = servers[provider]
    async with client_for(server, sleeps) as client:
        assert await getattr(client, action)(iid) is None
    [request] = server.requests
    assert (request.method, request.path) == (method, path)
    assert (request.json() if request.body else None) == body
    assert request.headers["authorization"] == f"Bearer {KEYS[provider]}"


@pytest.mark.parametrize("action", ["stop", "start"])
async def test_lambda_refuses_stop_and_start_without_a_request(
        servers: dict[str, ProviderServer], sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch,
        action: str) -> None:
    monkeypatch.delenv("LAMBDA_API_KEY")  # not even a missing key is reached
    async with client_for(servers["lambda"], sleeps) as client:
        assert client.can_stop is False
        with pytest.raises(ProviderError) as info:
            await getattr(client, action)("i-1")
    assert (info.value.kind, info.value.status) == ("not_allowed", None)
    assert "Lambda cannot stop an instance: destroy it or keep it running" in info.value.message
    assert not info.value.maybe_applied and servers["lambda"].requests == []


async def test_an_action_refused_is_definite_and_a_429_is_retried(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    server = servers["runpod"]
    server.fail(server.error_fault(409, "pod is not running"))
    async with client_for(server, sleeps) as client:
        with pytest.raises(ProviderError) as info:
            await client.start("x7k2m9q4p1")
        assert (info.value.kind, info.value.maybe_applied) == ("not_allowed", False)
        assert "RunPod pod x7k2m9q4p1 (start): not allowed now" in info.value.message
        server.fail(runpod_too_many("1"))
        await client.stop("x7k2m9q4p1")
    assert sleeps.delays == [1.0] and [r.method for r in server.requests] == ["POST"] * 3


async def test_vast_success_false_on_an_action_is_a_failure(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    server = servers["vast"]
    server.fail(Fault(200, {"success": False, "error": "not_allowed", "msg": "busy"}))
    async with client_for(server, sleeps) as client:
        with pytest.raises(ProviderError) as info:
            await client.stop("12345678")
    assert (info.value.kind, info.value.maybe_applied) == ("not_allowed", False)
    assert server.instances["12345678"]["intended_status"] == "running"


@pytest.mark.parametrize(("fault", "kind"), [
    (Fault(500, {"title": "Internal Server Error", "status": 500}), "server"),
    (Fault(delay=30), "timeout"),
])
async def test_an_action_whose_answer_is_lost_is_never_retried(
        servers: dict[str, ProviderServer], sleeps: Sleeps, fault: Fault, kind: str) -> None:
    server = servers["runpod"]
    server.fail(fault, fault)
    async with client_for(server, sleeps, timeout=0.3) as client:
        with pytest.raises(ProviderError) as info:
            await client.destroy("x7k2m9q4p1")
    assert (info.value.kind, info.value.maybe_applied) == (kind, True)
    assert server.count("DELETE") == 1 and sleeps.delays == []


async def test_an_action_that_never_left_is_not_maybe_applied(sleeps: Sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with make_client("vast", fleet_with(vast=f"http://127.0.0.1:{port}"),
                           sleep=sleeps) as client:
        with pytest.raises(ProviderError) as info:
            await client.destroy("12345678")
    assert (info.value.kind, info.value.maybe_applied) == ("unreachable", False)


async def test_an_action_accepted_with_an_odd_body_is_accepted(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    server = servers["lambda"]
    server.fail(Fault(200, "OK, terminating"))
    async with client_for(server, sleeps) as client:
        assert await client.destroy("0920582c7ff041399e34823a0be62549") is None


async def test_loopback_actions_change_state_like_the_provider(sleeps: Sleeps) -> None:
    with RunPodServer(KEYS["runpod"], [runpod_pod()]) as server:
        server.settle_gets, server.start_gpus = 1, 0
        async with client_for(server, sleeps) as client:
            await client.stop("x7k2m9q4p1")
            assert (await client.get("x7k2m9q4p1")).state == "running"  # not landed yet
            stopped = await client.get("x7k2m9q4p1")
            assert (stopped.state, stopped.raw["cost"], stopped.raw["ssh"]) == (
                "stopped", 0.0, None)
            await client.start("x7k2m9q4p1")
            assert (await client.get("x7k2m9q4p1")).state == "starting"
            started = await client.get("x7k2m9q4p1")
            assert (started.state, started.num_gpus, started.running_usd_per_hr) == (
                "running", 0, 1.38)
            await client.destroy("x7k2m9q4p1")
            await client.get("x7k2m9q4p1")
            assert (await client.get("x7k2m9q4p1")).state == "destroyed"


# --- a stranger's words: auth before "not found", keys starred whole, no control codes ---


@pytest.mark.parametrize("msg", ["API key not found", "No such api_key", "Invalid token"])
async def test_vast_api_key_not_found_is_auth_not_a_missing_instance(
        servers: dict[str, ProviderServer], sleeps: Sleeps, msg: str) -> None:
    """Vast says a refused key with HTTP 200 {"success": false}; the words "not found"
    made it read as "no such instance", which a destroy took as proof it was gone."""
    servers["vast"].fail(Fault(200, {"success": False, "msg": msg}))
    exc = await failure(servers["vast"], sleeps, "12345678")
    assert exc.kind == "auth" and not exc.gone, exc.message


async def test_only_an_http_404_for_the_instance_is_gone(servers: dict[str, ProviderServer],
                                                         sleeps: Sleeps) -> None:
    assert (await failure(servers["vast"], sleeps, "999")).gone  # 404 for that instance
    servers["vast"].fail(Fault(200, {"instances": None}))
    empty = await failure(servers["vast"], sleeps, "12345678")
    assert empty.kind == "not_found" and not empty.gone
    assert (await failure(servers["runpod"], sleeps, "gone1234")).gone
    servers["lambda"].fail(Fault(401, {"error": {"code": "global/invalid-api-key",
                                                 "message": "API key not found"}}))
    refused = await failure(servers["lambda"], sleeps, "abc")
    assert refused.kind == "auth" and not refused.gone


def test_plain_http_base_url_only_for_loopback() -> None:
    for url in ("http://127.0.0.1:9", "http://localhost:8/x", "http://[::1]:7",
                "https://api.example.com"):
        make_client("vast", fleet_with(), env={"VAST_URL": url})
    for url in ("http://api.example.com", "http://127.0.0.1@evil.example.com/",
                "http://127.0.0.1.evil.example.com"):
        with pytest.raises(ValueError, match="loopback"):
            make_client("vast", fleet_with(), env={"VAST_URL": url})
        with pytest.raises(ConfigError, match="loopback"):
            fleet_with(runpod=url)


async def test_a_key_is_starred_before_the_body_is_cut(servers: dict[str, ProviderServer],
                                                       sleeps: Sleeps) -> None:
    """The body was cut to 200 characters and then starred: a key across the cut leaked
    its first half."""
    key = KEYS["runpod"]
    for offset in range(180, 200, 3):
        body = "x" * offset + f" {key} " + "y" * 300
        servers["runpod"].fail(Fault(400, body))
        exc = await failure(servers["runpod"], sleeps, "x7k2m9q4p1")
        assert key[:8] not in exc.message, (offset, exc.message)


async def test_provider_words_reach_no_terminal_as_control_codes(
        servers: dict[str, ProviderServer], sleeps: Sleeps) -> None:
    servers["vast"].fail(Fault(200, {"success": False,
                                     "msg": "boom \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x9b31m"}))
    exc = await failure(servers["vast"], sleeps, "12345678")
    assert "boom" in exc.message
    assert not any(c in exc.message for c in "\x1b\x07\x9b")


@pytest.mark.parametrize("cut", ["\n", "\r\n    ", "\\n"])
async def test_a_key_split_by_a_line_break_shows_no_fragment(
        servers: dict[str, ProviderServer], sleeps: Sleeps, cut: str) -> None:
    """Whitespace was folded before the key was starred: a key the provider wrapped
    across two lines showed whole, with a space in it."""
    for name, server in servers.items():
        key = KEYS[name]
        half = len(key) // 2
        split = key[:half] + cut + key[half:]
        server.fail(server.error_fault(401, f"key {split} was revoked"),
                    Fault(400, f"bad request for key\n{split}\n(plain text)"))
        for _ in range(2):
            exc = await failure(server, sleeps, "abc")
            for text in (exc.message, "".join(exc.message.split())):
                assert key[:half] not in text and key[half:] not in text, (name, exc.message)
            assert "***" in exc.message
