"""DemoFleet: the whole demo (servers, keys, run directories, replay) as one context manager.

    async with DemoFleet() as fleet:      # a FleetConfig, like a user's fleet.toml
        ...

Everything lives in one temp dir: per box a home with its runs root, a
stand-in nvidia-smi and its readings (its csv rows and its driver's busy
average, tui/demo/utilization.py) and a libnvidia-ml.so.1 that will not load
(the probe reads the stand-in, never this machine's GPUs); the client key, known_hosts and
fleet.toml (host keys are generated in memory); `pushed/`, where the boxes'
checkpoints are pushed to. The Vast and RunPod boxes' provider APIs and the
Hugging Face Hub are loopback stand-ins too; run the panel with
`DemoFleet.env` so its ledger, journal and keys stay in the demo.

The keys act for real: a stop lands a few seconds after it is asked, and
then the box is down (its SSH refuses, its runs' processes are gone); a
start brings it back, or fails when the marketplace rented its GPU out
meanwhile; a destroy takes it away with its disk. The manual box powers off
on its stop_command. Leaving the block closes the servers, stops the replay
and any real training, and removes the temp dir, whatever happened inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncssh

from tui.demo.api_server import ProviderServer
from tui.demo.hub import HubServer
from tui.demo.procs import choose_keeper, exited_pid, keeper_candidates, process_start
from tui.demo.providers import DEMO_API_KEY, demo_provider_servers
from tui.demo.real import RealTraining, real_training_problem
from tui.demo.recording import load_recording
from tui.demo.replay import Lane, Replayer
from tui.demo.scenario import (
    BOXES,
    HUB_REPO,
    JUMP_NAME,
    LANES,
    STAND_IN,
    BoxSpec,
    LaneSpec,
    Mode,
    first_timing,
    fleet_toml,
    last_phase,
    stalls_at,
)
from tui.demo.servers import BoxServer
from tui.model.config import FleetConfig, parse_config

REAL_BOX = "lab-3090"
BOXES_UP_FOR = 5 * 3600.0  # the rented boxes have been billing this long at start
# Provider keys the panel could find: each is replaced by the demo's key while it runs.
API_KEY_VARS = ("VAST_API_KEY", "RUNPOD_API_KEY", "LAMBDA_API_KEY")
DEMO_HUB_TOKEN = "hf_gpurent_demo_token"  # not a secret: only the loopback Hub accepts it
SETTLE_SECONDS = 4.0  # a stop, start or destroy lands this long after it is asked
POWEROFF_SECONDS = 1.0  # a manual box goes down this long after its stop_command
Keepers = Callable[[], list[tuple[int, float | None]]]


class RealTrainingUnavailable(RuntimeError):
    """`real=True` without LibreYOLO installed."""


class DemoFleet:
    """Starts the demo fleet on 127.0.0.1; `async with` yields its FleetConfig."""

    def __init__(self, *, real: bool = False, clock: Callable[[], float] = time.time,
                 boxes: Sequence[BoxSpec] = BOXES, lanes: Sequence[LaneSpec] = LANES,
                 keepers: Keepers = keeper_candidates,
                 settle_seconds: float = SETTLE_SECONDS) -> None:
        """`keepers`: the processes a hung run may name as its own (see procs)."""
        self.real = real
        self.clock = clock
        self.box_specs = tuple(boxes)
        self.lane_specs = tuple(lanes)
        self.keepers = keepers
        self.settle_seconds = settle_seconds
        self.root: Path | None = None
        self.config: FleetConfig | None = None
        self.servers: dict[str, BoxServer] = {}
        self.jump: BoxServer | None = None
        self.providers: dict[str, ProviderServer] = {}
        self.hub: HubServer | None = None
        self.runs_roots: dict[str, Path] = {}
        self.replayer: Replayer | None = None
        self.training: RealTraining | None = None
        self.keeper_pid: int | None = None
        self.dead_pid: int | None = None
        self.stall_at: float | None = None  # when the hung run reads as stalled
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._power_tasks: set[asyncio.Future[None]] = set()
        self._by_instance: dict[tuple[str, str], BoxSpec] = {}
        self._power: dict[str, str] = {}  # box -> running | stopped | destroyed

    async def __aenter__(self) -> FleetConfig:
        if self.real and (problem := real_training_problem()):
            raise RealTrainingUnavailable(problem)
        try:
            return await self._start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        error = await self.close()
        if error is not None and exc_type is None:
            raise error

    async def _start(self) -> FleetConfig:
        self._loop = asyncio.get_running_loop()
        self.root = root = Path(tempfile.mkdtemp(prefix="gpurent-demo-"))
        client_key = asyncssh.generate_private_key("ssh-ed25519", comment="gpurent-demo")
        identity = root / "id_ed25519"
        identity.touch(mode=0o600)
        identity.write_bytes(client_key.export_private_key("openssh"))
        homes: dict[str, Path] = {}
        gpu_files: list[tuple[BoxSpec, Path, Path]] = []
        for spec in self.box_specs:
            home = homes[spec.name] = root / spec.name / "root"
            self.runs_roots[spec.name] = home / "runs"
            self.runs_roots[spec.name].mkdir(parents=True)
            bin_dir = root / spec.name / "bin"
            bin_dir.mkdir()
            readings = root / spec.name / "gpus.csv"
            utilization = root / spec.name / "utilization.txt"
            _fake_nvidia_smi(bin_dir / "nvidia-smi", spec.name, readings, utilization)
            gpu_files.append((spec, readings, utilization))
            lib_dir = root / spec.name / "lib"
            _no_nvml(lib_dir, spec.name)
            env = {**os.environ, "HOME": str(home), "HF_HUB_DISABLE_XET": "1",
                   "HF_HUB_DISABLE_TELEMETRY": "1",
                   "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                   "LD_LIBRARY_PATH": os.pathsep.join(
                       filter(None, [str(lib_dir), os.environ.get("LD_LIBRARY_PATH")]))}
            commands = {spec.stop_command: self._poweroff} if spec.stop_command else None
            server = BoxServer(spec.name, client_key, env=env, cwd=home,
                               sftp_root=root / spec.name, commands=commands)
            self.servers[spec.name] = server
            await server.start()
        self.jump = BoxServer(JUMP_NAME, client_key, jump=True)
        await self.jump.start()
        self.providers = demo_provider_servers(self.box_specs, self.clock() - BOXES_UP_FOR)
        for provider, api in self.providers.items():
            api.settle_seconds = self.settle_seconds
            api.on_change = functools.partial(self._instance_changed, provider)
            await asyncio.to_thread(api.start)
        self._by_instance = {(spec.provider, str(spec.instance_id)): spec
                             for spec in self.box_specs if spec.instance_id is not None}
        if any(spec.hub_push for spec in self.box_specs):
            self.hub = HubServer([HUB_REPO], token=DEMO_HUB_TOKEN)
            self.hub.__enter__()
        (root / "pushed").mkdir()

        self.replayer = Replayer(self._lanes(homes), gpu_files, self.clock)
        self.replayer.step()  # the past of every run is on disk before the first probe
        self._task = asyncio.create_task(self.replayer.run(), name="demo replay")
        if self.real and REAL_BOX in homes:
            self.training = RealTraining(self.runs_roots[REAL_BOX],
                                         homes[REAL_BOX] / "data" / "rects-real",
                                         root / "real-training.log")
            await asyncio.to_thread(self.training.prepare)
            self.training.start()

        known_hosts = root / "known_hosts"
        servers = [*self.servers.values(), self.jump]
        known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in servers))
        urls = {name: api.url for name, api in self.providers.items()}
        text = fleet_toml(self._box_entries(identity), known_hosts=str(known_hosts),
                          jump=f"demo@127.0.0.1:{self.jump.port}", provider_urls=urls)
        (root / "fleet.toml").write_text(text)
        config = parse_config(text, str(root / "fleet.toml"))
        if not self.real:  # --real: the boxes' python has torch and LibreYOLO, checked for real
            config = replace(config, boxes=tuple(replace(b, stand_in=STAND_IN)
                                                 for b in config.boxes))
        self.config = config
        return self.config

    @property
    def env(self) -> dict[str, str]:
        """Environment the panel should run with over this fleet.

        The panel's own files (ledger, journal, pinned keys) go to the demo's
        temp dir, not the user's; the provider keys and the Hub token are the
        demo's, so no real key is read or sent; and loopback never goes
        through a proxy.
        """
        if self.root is None:
            raise RuntimeError("the demo fleet is not started")
        env = {f"XDG_{kind}_HOME": str(self.root / "xdg" / kind.lower())
               for kind in ("CONFIG", "DATA", "STATE")}
        env.update(dict.fromkeys(API_KEY_VARS, DEMO_API_KEY))
        if self.hub is not None:  # pushes to the loopback Hub, with the demo's token
            env.update(HF_ENDPOINT=self.hub.url, HF_TOKEN=DEMO_HUB_TOKEN)
        for var in ("NO_PROXY", "no_proxy"):
            env[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))
        return env

    @property
    def pushed(self) -> Path:
        """The local folder every demo box pushes its checkpoints to."""
        if self.root is None:
            raise RuntimeError("the demo fleet is not started")
        return self.root / "pushed"

    def _box_entries(self, identity: Path) -> list[dict[str, Any]]:
        entries = []
        for spec in self.box_specs:
            push: dict[str, str] = {"local_dir": str(self.pushed)}
            if spec.hub_push and self.hub is not None:
                push["hf_repo"] = HUB_REPO
            entries.append({
                "name": spec.name, "host": "127.0.0.1", "port": self.servers[spec.name].port,
                "user": "root", "identity_file": str(identity),
                "runs_roots": [str(self.runs_roots[spec.name])], "provider": spec.provider,
                "instance_id": spec.instance_id, "stop_command": spec.stop_command,
                "via_jump": spec.via_jump, "pricing": dict(spec.pricing), "push": push})
        return entries

    def _lanes(self, homes: dict[str, Path]) -> list[Lane]:
        now = self.clock()
        own = os.getpid()
        own_start = process_start(own)
        lanes = []
        for spec in self.lane_specs:
            rec = load_recording(spec.recording)
            keeper_start = None
            pid = own
            if spec.mode is Mode.HUNG:
                wanted = first_timing(rec, spec, now).started
                self.keeper_pid, keeper_start = choose_keeper(self.keepers(), wanted)
                pid = self.keeper_pid
            elif spec.mode is Mode.KILLED:
                if self.dead_pid is None:
                    self.dead_pid = exited_pid()
                pid = self.dead_pid
            elif spec.mode is Mode.DONE:
                pid = int(rec.phases[0].status["pid"])
            timing = first_timing(rec, spec, now, own_start=own_start, keeper_start=keeper_start)
            self.stall_at = stalls_at(rec, spec, timing) or self.stall_at
            data_dir = str(homes[spec.box] / "data" / "rects")
            lanes.append(Lane(spec, rec, self.runs_roots[spec.box], data_dir, timing, pid=pid,
                              live_pid=own, last_phase=last_phase(rec, spec)))
        return lanes

    # --- the boxes go down and come back, as their provider says -------------------------

    def _instance_changed(self, provider: str, instance_id: str,
                          fields: Mapping[str, Any] | None) -> None:
        """A provider stand-in changed an instance (from its own thread): follow it here."""
        spec = self._by_instance.get((provider, instance_id))
        loop = self._loop
        if spec is None or loop is None:
            return
        state = _power_state(provider, fields)
        with contextlib.suppress(RuntimeError):  # the loop closed: the demo is over
            loop.call_soon_threadsafe(self._follow, spec, state)

    def _follow(self, spec: BoxSpec, state: str) -> None:
        task = asyncio.ensure_future(self._set_power(spec, state))
        self._power_tasks.add(task)
        task.add_done_callback(self._power_tasks.discard)

    async def _set_power(self, spec: BoxSpec, state: str) -> None:
        server = self.servers.get(spec.name)
        if server is None or self.replayer is None or state == "changing" \
                or self._power.get(spec.name, "running") == state:
            return
        self._power[spec.name] = state
        if state in ("stopped", "destroyed"):
            self.replayer.halt_box(spec.name, self._dead_pid())
            if spec.name == REAL_BOX and self.training is not None:
                self.training.stop()
            await server.stop_listening()
            if state == "stopped" and spec.rented_out_for > 0:
                self._rent_out(spec)
            if state == "destroyed":
                await server.close()
                shutil.rmtree(self.runs_roots[spec.name], ignore_errors=True)
        elif state == "running" and not server.listening and server.port:
            await server.listen()

    def _rent_out(self, spec: BoxSpec) -> None:
        """The marketplace gives the stopped box's GPUs to someone else for a while."""
        api = self.providers.get(spec.provider)
        loop = self._loop
        if api is None or loop is None or spec.instance_id is None:
            return
        iid = str(spec.instance_id)
        api.free_gpus[iid] = 0
        loop.call_later(spec.rented_out_for, api.free_gpus.pop, iid, None)

    async def _poweroff(self, server: BoxServer) -> int:
        """A manual box's stop_command: it answers 0, then goes down for good."""
        spec = next(s for s in self.box_specs if self.servers.get(s.name) is server)

        async def down() -> None:
            await asyncio.sleep(POWEROFF_SECONDS)
            await self._set_power(spec, "stopped")

        task = asyncio.ensure_future(down())
        self._power_tasks.add(task)
        task.add_done_callback(self._power_tasks.discard)
        return 0

    def _dead_pid(self) -> int:
        if self.dead_pid is None:
            self.dead_pid = exited_pid()
        return self.dead_pid

    async def close(self) -> BaseException | None:
        """Stop everything this fleet started; returns the replay's error, if it had one."""
        error: BaseException | None = None
        try:
            if self.training is not None:
                self.training.stop()
            for api in self.providers.values():
                await asyncio.to_thread(api.close)  # no change lands from here on
            if self.hub is not None:
                await asyncio.to_thread(self.hub.__exit__, None, None, None)
            for power_task in list(self._power_tasks):
                power_task.cancel()
            await asyncio.gather(*self._power_tasks, return_exceptions=True)
            task = self._task
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
                if not task.cancelled():
                    error = task.exception()
            for server in [*self.servers.values(), *([self.jump] if self.jump else [])]:
                await server.close()
        finally:
            if self.training is not None:
                self.training.stop()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
            self._task = None
        return error


def _power_state(provider: str, fields: Mapping[str, Any] | None) -> str:
    """running, stopped, destroyed or changing, from a stand-in's instance object."""
    if fields is None:
        return "destroyed"
    raw = fields.get("actual_status") if provider == "vast" else fields.get("status")
    return {"running": "running", "RUNNING": "running", "stopped": "stopped",
            "EXITED": "stopped", "TERMINATED": "destroyed"}.get(str(raw), "changing")


def _fake_nvidia_smi(path: Path, box: str, readings: Path, utilization: Path) -> None:
    """A stand-in nvidia-smi for the probe: prints the box's current readings, its csv
    rows or, asked `-q -d UTILIZATION`, its driver's busy average over the last 14 s."""
    path.write_text(f"#!/bin/sh\n# gpurent-tui demo: nvidia-smi of the demo box {box}\n"
                    f'case "$*" in\n'
                    f"  *UTILIZATION*) exec cat {shlex.quote(str(utilization))} ;;\n"
                    f"  *) exec cat {shlex.quote(str(readings))} ;;\n"
                    f"esac\n")
    path.chmod(0o755)


def _no_nvml(lib_dir: Path, box: str) -> None:
    """A libnvidia-ml.so.1 that will not load, first on the box's library path: a demo
    box's GPUs are the demo's, so its probe must not read this machine's GPUs through
    NVML (it would, where this machine has a driver) but fall back to the stand-in
    nvidia-smi, as on a box whose NVML will not load."""
    lib_dir.mkdir()
    (lib_dir / "libnvidia-ml.so.1").write_text(
        f"gpurent-tui demo: not a library; the demo box {box} has no NVML, its GPU "
        "readings come from its stand-in nvidia-smi\n")
