"""DemoFleet: the whole demo (servers, keys, run directories, replay) as one context manager.

    async with DemoFleet() as fleet:      # a FleetConfig, like a user's fleet.toml
        ...

Everything lives in one temp dir: per box a home with its runs root, a
stand-in nvidia-smi and its readings; the client key, known_hosts and
fleet.toml (host keys are generated in memory). The Vast and RunPod boxes'
provider API is a loopback stand-in too; run the panel with `DemoFleet.env`
so its ledger and keys stay in the demo. Leaving the block closes the
servers, stops the replay and any real training, and removes the temp dir,
whatever happened inside it.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncssh

from tui.demo.procs import choose_keeper, exited_pid, keeper_candidates, process_start
from tui.demo.providers import DEMO_API_KEY, ProviderApi
from tui.demo.real import RealTraining, real_training_problem
from tui.demo.recording import load_recording
from tui.demo.replay import Lane, Replayer
from tui.demo.scenario import (
    BOXES,
    JUMP_NAME,
    LANES,
    BoxSpec,
    LaneSpec,
    Mode,
    first_timing,
    fleet_toml,
    last_phase,
    stalls_at,
)
from tui.demo.servers import DemoServer
from tui.model.config import FleetConfig, parse_config

REAL_BOX = "lab-3090"
BOXES_UP_FOR = 5 * 3600.0  # the rented boxes have been billing this long at start
# Provider keys the panel could find: each is replaced by the demo's key while it runs.
API_KEY_VARS = ("VAST_API_KEY", "RUNPOD_API_KEY", "LAMBDA_API_KEY")


class RealTrainingUnavailable(RuntimeError):
    """`real=True` without LibreYOLO installed."""


class DemoFleet:
    """Starts the demo fleet on 127.0.0.1; `async with` yields its FleetConfig."""

    def __init__(self, *, real: bool = False, clock: Callable[[], float] = time.time,
                 boxes: Sequence[BoxSpec] = BOXES, lanes: Sequence[LaneSpec] = LANES) -> None:
        self.real = real
        self.clock = clock
        self.box_specs = tuple(boxes)
        self.lane_specs = tuple(lanes)
        self.root: Path | None = None
        self.config: FleetConfig | None = None
        self.servers: dict[str, DemoServer] = {}
        self.jump: DemoServer | None = None
        self.providers: ProviderApi | None = None
        self.runs_roots: dict[str, Path] = {}
        self.replayer: Replayer | None = None
        self.training: RealTraining | None = None
        self.keeper_pid: int | None = None
        self.dead_pid: int | None = None
        self.stall_at: float | None = None  # when the hung run reads as stalled
        self._task: asyncio.Task[None] | None = None

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
        self.root = root = Path(tempfile.mkdtemp(prefix="gpurent-demo-"))
        client_key = asyncssh.generate_private_key("ssh-ed25519", comment="gpurent-demo")
        identity = root / "id_ed25519"
        identity.touch(mode=0o600)
        identity.write_bytes(client_key.export_private_key("openssh"))
        homes: dict[str, Path] = {}
        gpu_files: list[tuple[BoxSpec, Path]] = []
        for spec in self.box_specs:
            home = homes[spec.name] = root / spec.name / "root"
            self.runs_roots[spec.name] = home / "runs"
            self.runs_roots[spec.name].mkdir(parents=True)
            bin_dir = root / spec.name / "bin"
            bin_dir.mkdir()
            readings = root / spec.name / "gpus.csv"
            _fake_nvidia_smi(bin_dir / "nvidia-smi", spec.name, readings)
            gpu_files.append((spec, readings))
            env = {**os.environ, "HOME": str(home),
                   "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
            server = DemoServer(spec.name, asyncssh.generate_private_key("ssh-ed25519"),
                                client_key, env=env, cwd=str(home))
            self.servers[spec.name] = server
            await server.start()
        self.jump = DemoServer(JUMP_NAME, asyncssh.generate_private_key("ssh-ed25519"),
                               client_key, jump=True)
        await self.jump.start()
        self.providers = ProviderApi(self.box_specs, self.clock() - BOXES_UP_FOR)
        await self.providers.start()

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
        urls = {spec.provider: self.providers.base_url for spec in self.box_specs
                if spec.provider in ("vast", "runpod")}
        text = fleet_toml(self._box_entries(identity), known_hosts=str(known_hosts),
                          jump=f"demo@127.0.0.1:{self.jump.port}", provider_urls=urls)
        (root / "fleet.toml").write_text(text)
        self.config = parse_config(text, str(root / "fleet.toml"))
        return self.config

    @property
    def env(self) -> dict[str, str]:
        """Environment the panel should run with over this fleet.

        The panel's own files (ledger, pinned keys) go to the demo's temp dir,
        not the user's; the provider keys are the demo's, so no real key is
        read or sent; and loopback never goes through a proxy.
        """
        if self.root is None:
            raise RuntimeError("the demo fleet is not started")
        env = {f"XDG_{kind}_HOME": str(self.root / "xdg" / kind.lower())
               for kind in ("CONFIG", "DATA", "STATE")}
        env.update(dict.fromkeys(API_KEY_VARS, DEMO_API_KEY))
        for var in ("NO_PROXY", "no_proxy"):
            env[var] = ",".join(filter(None, [os.environ.get(var), "127.0.0.1", "localhost"]))
        return env

    def _box_entries(self, identity: Path) -> list[dict[str, Any]]:
        return [{"name": spec.name, "host": "127.0.0.1", "port": self.servers[spec.name].port,
                 "user": "root", "identity_file": str(identity),
                 "runs_roots": [str(self.runs_roots[spec.name])], "provider": spec.provider,
                 "instance_id": spec.instance_id, "via_jump": spec.via_jump,
                 "pricing": dict(spec.pricing)}
                for spec in self.box_specs]

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
                self.keeper_pid, keeper_start = choose_keeper(keeper_candidates(), wanted)
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

    async def close(self) -> BaseException | None:
        """Stop everything this fleet started; returns the replay's error, if it had one."""
        error: BaseException | None = None
        try:
            if self.training is not None:
                self.training.stop()
            task = self._task
            if task is not None:
                task.cancel()
                await asyncio.wait([task])
                if not task.cancelled():
                    error = task.exception()
            for server in [*self.servers.values(), *([self.jump] if self.jump else [])]:
                await server.close()
            if self.providers is not None:
                await self.providers.close()
        finally:
            if self.training is not None:
                self.training.stop()
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
            self._task = None
        return error


def _fake_nvidia_smi(path: Path, box: str, readings: Path) -> None:
    """A stand-in nvidia-smi for the probe: prints the box's current readings."""
    path.write_text(f"#!/bin/sh\n# gpurent-tui demo: nvidia-smi of the demo box {box}\n"
                    f"exec cat {shlex.quote(str(readings))}\n")
    path.chmod(0o755)
