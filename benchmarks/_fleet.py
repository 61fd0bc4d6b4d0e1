"""What the benchmarks share: a fleet of real sshd boxes on 127.0.0.1 holding
LibreYOLO-shaped runs, advancing those runs, reading CPU and memory from /proc,
and saying which code and which machine a figure belongs to.

Why one module: every benchmark builds the same fleet and must measure it the
same way, or two scripts' figures cannot be compared. Importing it also puts
the repository and tests/ (for `support`) on sys.path, so a script run as
`python benchmarks/x.py` measures the checkout it lives in.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import platform
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for _path in (str(REPO / "tests"), str(REPO)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from support.sshd import KeyPair, Sshd  # noqa: E402

from tui.model.config import FleetConfig, parse_config  # noqa: E402
from tui.remote.programs import SERVE_CODE  # noqa: E402
from tui.remote.watch import BoxWatcher  # noqa: E402

DATA = REPO / "tests" / "data" / "libreyolo"
METRICS_TEMPLATE = [
    json.loads(line)
    for line in (DATA / "yolox_completed" / "metrics.jsonl").read_text().splitlines() if line
]
STATUS_TEMPLATE: dict[str, Any] = json.loads((DATA / "yolox_running" / "status.json").read_text())
EPOCH_SECONDS = 80.0  # a plausible GPU epoch; only the numbers in the files use it
# struct tcp_info (linux/tcp.h): tcpi_bytes_acked and tcpi_bytes_received, both u64.
TCP_INFO_BYTES_AT = 120


# --- LibreYOLO-shaped run files ------------------------------------------------


def iso(stamp: float) -> str:
    return datetime.fromtimestamp(int(stamp), UTC).isoformat()


def write_atomic(path: Path, text: str) -> None:
    """LibreYOLO writes status.json to a temp file and renames it: readers never see half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def loss_at(epoch: int) -> float:
    return 2.0 + 10.5 * math.exp(-epoch / 150.0) + 0.01 * (epoch % 7)


def metrics_record(epoch: int) -> dict[str, Any]:
    """One metrics.jsonl record: a real LibreYOLO line with this epoch's numbers.

    The recorded run's metrics are all 0.0 (a tiny CPU run), which would flatter
    the compression; here every float is full precision and changes each epoch,
    as on a real GPU run.
    """
    rng = random.Random(epoch)
    record = dict(METRICS_TEMPLATE[(epoch - 1) % len(METRICS_TEMPLATE)])
    loss = loss_at(epoch)
    quality = 0.45 * (1.0 - math.exp(-epoch / 200.0))
    for key, value in record.items():
        if key.startswith("metrics/") and key != "metrics/max_det":
            record[key] = quality * (0.6 + 0.8 * rng.random())
        elif key.startswith("speed/") and key != "speed/images_seen":
            record[key] = (value or 1.0) * (0.9 + 0.2 * rng.random())
        elif key.startswith("lr/"):
            record[key] = 0.01 * (0.5 + 0.5 * math.cos(epoch / 1000.0 * math.pi))
    record.update({
        "epoch": epoch,
        "time": EPOCH_SECONDS * (0.95 + 0.1 * rng.random()),
        "train/loss": loss,
        "train/iou_loss": loss * 0.355 * (0.9 + 0.2 * rng.random()),
        "train/obj_loss": loss * 0.409 * (0.9 + 0.2 * rng.random()),
        "train/cls_loss": loss * 0.116 * (0.9 + 0.2 * rng.random()),
        "train/l1_loss": loss * 0.120 * (0.9 + 0.2 * rng.random()),
        "current_metric": record["metrics/mAP50-95"],
        "best_metric": quality,
        "is_best": epoch % 10 == 1,
        "best_epoch": epoch - (epoch - 1) % 10,
    })
    return record


def metrics_line(epoch: int) -> str:
    return json.dumps(metrics_record(epoch)) + "\n"


def log_lines(run_dir: Path, epoch: int) -> str:
    """The ~370 bytes (5 lines) LibreYOLO's train.log gains per validated epoch."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return "".join(f"{stamp} | {line}\n" for line in (
        f"INFO     | Epoch {epoch} - Average loss: {loss_at(epoch):.4f}",
        f"INFO     | Running validation for epoch {epoch}",
        "WARNING  | No predictions to evaluate",
        "INFO     | Validation - mAP50: 0.0000, mAP50-95: 0.0000",
        f"INFO     | Checkpoint saved: {run_dir}/weights/last.pt",
    ))


@dataclass
class Run:
    """One training run on a box, advanced by hand the way LibreYOLO advances it."""

    path: Path
    epoch: int
    total: int
    started: float

    @classmethod
    def create(cls, path: Path, epochs: int, started: float) -> Run:
        run = cls(path, epochs, epochs + 1000, started)
        (path / "weights").mkdir(parents=True)
        with (path / "metrics.jsonl").open("w") as f:
            f.writelines(metrics_line(e) for e in range(1, epochs + 1))
        with (path / "train.log").open("w") as f:
            f.writelines(log_lines(path, e) for e in range(1, epochs + 1))
        for name in ("last.pt", "best.pt"):
            (path / "weights" / name).write_bytes(os.urandom(1024))
        run.write_status()
        return run

    @classmethod
    def adopt(cls, path: Path, started: float) -> Run:
        """A run another process wrote, restamped as this process's: the process that
        last wrote it may have exited, and the probe rightly calls such a run dead."""
        status = json.loads((path / "status.json").read_text())
        run = cls(path, status["current_epoch"], status["total_epochs"], started)
        run.write_status()
        return run

    def write_status(self) -> None:
        now = time.time()
        last = metrics_record(self.epoch)
        status = copy.deepcopy(STATUS_TEMPLATE)
        status["metrics"] = {k.removeprefix("metrics/"): v for k, v in last.items()
                             if k.startswith(("metrics/", "speed/"))}
        status.update({
            "state": "running", "pid": os.getpid(), "save_dir": str(self.path),
            "current_epoch": self.epoch, "completed_epochs": self.epoch,
            "total_epochs": self.total, "progress": self.epoch / self.total,
            "train_loss": loss_at(self.epoch), "epoch_seconds": last["time"],
            "mean_epoch_seconds": EPOCH_SECONDS,
            "elapsed_seconds": self.epoch * EPOCH_SECONDS,
            "eta_seconds": (self.total - self.epoch) * EPOCH_SECONDS,
            "best_epoch": last["best_epoch"], "best_metric": last["best_metric"],
            "current_metric": last["current_metric"],
            # started_at must not predate this process by much, or the probe
            # (rightly) reads our pid as reused by a newer process: dead.
            "started_at": iso(self.started), "updated_at": iso(now),
        })
        write_atomic(self.path / "status.json", json.dumps(status, indent=2, sort_keys=True))

    def advance(self) -> None:
        """One epoch, in LibreYOLO's order: metrics line, log, status.json, last.pt."""
        self.epoch += 1
        with (self.path / "metrics.jsonl").open("a") as f:
            f.write(metrics_line(self.epoch))
        with (self.path / "train.log").open("a") as f:
            f.write(log_lines(self.path, self.epoch))
        self.write_status()
        os.utime(self.path / "weights" / "last.pt")


def box_name(index: int) -> str:
    """The fleet's box names: zero-padded so they sort as the boxes were started."""
    return f"box{index:03d}"


def make_runs(tmp: Path, boxes: int, runs: int, epochs: int, started: float
              ) -> tuple[list[Path], dict[str, list[Run]]]:
    """Per box a runs root holding `runs` runs of `epochs` epochs; the roots, and the
    runs by box name."""
    roots = [tmp / box_name(b) / f"runs-e{epochs}" for b in range(boxes)]
    made = {box_name(b): [Run.create(roots[b] / f"yolox-n-{r}", epochs, started)
                          for r in range(runs)] for b in range(boxes)}
    return roots, made


def advance_all(runs: Mapping[str, Sequence[Run]]) -> None:
    """Every run of every box writes one more epoch."""
    for box_runs in runs.values():
        for run in box_runs:
            run.advance()


# --- the fleet of sshd boxes ---------------------------------------------------


def start_servers(tmp: Path, count: int, key: KeyPair, servers: list[Sshd], *,
                  host_key: KeyPair | None = None) -> None:
    """Start the boxes; each is listed before it starts, so the caller's cleanup stops it.
    A shared `host_key` saves a key generation per box (not what is measured)."""
    for index in range(count):
        # An empty HOME: this machine's ~/.bashrc (pyenv init) can block ssh sessions.
        server = Sshd(tmp / f"sshd{index:03d}", [key.public_line], host_key=host_key,
                      home=tmp / f"home{index:03d}")
        servers.append(server)
        server.start()


def sshd_pids(servers: Sequence[Sshd]) -> list[int]:
    """The listeners' pids: every session and probe of a box runs below its listener."""
    return [s._proc.pid for s in servers if s._proc is not None]


def write_known_hosts(tmp: Path, servers: Sequence[Sshd]) -> Path:
    known = tmp / "known_hosts"
    known.write_text("".join(s.known_hosts_line() + "\n" for s in servers))
    return known


def write_fleet(path: Path, *, known_hosts: Path | str, identity: Path | str,
                ports: Sequence[int], roots: Sequence[Path | str],
                refresh_seconds: float = 5, timeout_seconds: float = 60,
                jump: str | None = None, connect: Mapping[str, int] | None = None
                ) -> FleetConfig:
    """A fleet.toml written the way a user would, box i on ports[i] watching roots[i]
    (every box behind the jump host `jump`, ProxyJump syntax, when given; `connect`
    the [connect] table's keys)."""
    settings = {"known_hosts": str(known_hosts), "ssh_config": "",
                "refresh_seconds": refresh_seconds, "timeout_seconds": timeout_seconds}
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    if connect:
        lines.append("[connect]")
        lines.extend(f"{k} = {v}" for k, v in connect.items())
    for index, (port, root) in enumerate(zip(ports, roots, strict=True)):
        box = {"name": box_name(index), "host": "127.0.0.1", "port": port, "user": "root",
               "identity_file": str(identity), "runs_roots": [str(root)]}
        if jump is not None:
            box["jump"] = jump
        lines.append("[[box]]")
        lines.extend(f"{k} = {json.dumps(v)}" for k, v in box.items())
    path.write_text("\n".join(lines) + "\n")
    return parse_config(path.read_text(), str(path))


def fleet_config(tmp: Path, servers: Sequence[Sshd], key: KeyPair, roots: Sequence[Path],
                 tag: str) -> FleetConfig:
    """The fleet of these servers (box i watching roots[i]), with their host keys pinned."""
    known = write_known_hosts(tmp, servers)
    return write_fleet(tmp / f"fleet-{tag}.toml", known_hosts=known,
                       identity=key.private_path, ports=[s.port for s in servers], roots=roots)


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[tuple[Path, list[Sshd]]]:
    """A temp dir that holds the panel's own files (pinned keys, ledger, journal: no
    agent, no user config consulted), and a list for the boxes started in it; at the
    end every listed sshd is stopped and the dir removed, whatever happened."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ[var] = str(tmp / "xdg" / var.lower())
    os.environ.pop("SSH_AUTH_SOCK", None)
    os.environ.pop("GPURENT_CONFIG", None)
    servers: list[Sshd] = []
    try:
        yield tmp, servers
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# --- measuring: /proc and sockets ---------------------------------------------


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/PID/stat after the command name (field 3 on), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def proc_cpu_seconds(pid: int | str) -> float:
    """CPU of one process (utime + stime), or 0 once it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _is_kept_probe(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) >= 3 and argv[1] == b"-c" and argv[2] == SERVE_CODE.encode()


def _run_seconds(pid: int, ticks: int) -> float:
    """A process's CPU time in ns precision (/proc/PID/schedstat), else from its ticks:
    an idle kept probe costs well under one 10 ms tick per refresh."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class BoxCpu:
    """CPU seconds of the sshd trees: all of it, the kept probes' own, the reaped children's."""

    total: float
    kept_probes: float
    reaped: float


def _proc_table() -> dict[int, list[str]]:
    """Every process's stat fields, by pid."""
    table: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields is not None:
                table[int(entry.name)] = fields
    return table


def _below(roots: Sequence[int], table: Mapping[int, list[str]]) -> list[int]:
    """The roots and every process below them, of those in the table."""
    children: dict[int, list[int]] = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    found: list[int] = []
    todo, seen = list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_pids(roots: Sequence[int]) -> list[int]:
    """The sshd listeners and every session, shell and probe below them."""
    return _below(roots, _proc_table())


def tree_cpu(roots: Sequence[int]) -> BoxCpu:
    """CPU time of the sshd listeners and everything below them (reaped probes included)."""
    table = _proc_table()
    total = reaped = 0
    kept = 0.0
    for pid in _below(roots, table):
        utime, stime, cutime, cstime = (int(f) for f in table[pid][11:15])
        total += utime + stime + cutime + cstime
        reaped += cutime + cstime
        if _is_kept_probe(pid):
            kept += _run_seconds(pid, utime + stime)
    tick = os.sysconf("SC_CLK_TCK")
    return BoxCpu(total / tick, kept, reaped / tick)


def tree_cpu_seconds(roots: Sequence[int]) -> float:
    """CPU time of the sshd listeners and everything below them (reaped probes included)."""
    return tree_cpu(roots).total


def vm_kib(key: str, pid: int | str = "self") -> int:
    """A VmRSS/VmHWM line of /proc/PID/status, in KiB (0 when the process is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat): who else ran meanwhile."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def tcp_bytes(sock: socket.socket | None) -> tuple[int, int] | None:
    """TCP payload bytes (in, out) of a connected socket so far (TCP_INFO), or None
    where the kernel does not say."""
    if sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    except OSError:
        return None
    if len(info) < TCP_INFO_BYTES_AT + 16:
        return None
    acked, received = struct.unpack_from("<QQ", info, TCP_INFO_BYTES_AT)
    return received, acked


def wire_bytes(watcher: BoxWatcher) -> tuple[int, int] | None:
    """TCP payload bytes (in, out) of a box's connection so far, SSH framing included."""
    conns = watcher.session._conns
    return tcp_bytes(conns[-1].get_extra_info("socket") if conns else None)


# --- which code, which machine -------------------------------------------------


def code_under_test() -> dict[str, Any]:
    """Which code was measured: other people's uncommitted edits change the figures."""
    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else "?"

    dirty = git("status", "--porcelain", "--", "tui", "widgets", "pyproject.toml")
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "uncommitted": [line.split(maxsplit=1)[-1] for line in dirty.splitlines()]}


def code_line(code: dict[str, Any]) -> str:
    return f"code: {REPO} at {code['commit']}" + (
        f", with uncommitted changes in {len(code['uncommitted'])} file(s): "
        + ", ".join(code["uncommitted"]) if code["uncommitted"] else ", clean")


def machine(*packages: str, **extra: Any) -> dict[str, Any]:
    """The machine a figure was taken on: cores this process may use, Python, the
    installed versions of `packages`, the load average when it ended, and `extra`."""
    return {"nproc": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            **{name: metadata.version(name) for name in packages}, **extra,
            "platform": platform.platform(), "date": datetime.now(UTC).isoformat(),
            "loadavg": [round(v, 2) for v in os.getloadavg()]}


def machine_line(info: dict[str, Any], *packages: str) -> str:
    return (f"machine: nproc {info['nproc']}, python {info['python']}, "
            + "".join(f"{name} {info[name]}, " for name in packages)
            + f"{info['platform']}, load average now {info['loadavg']}")


def print_json(doc: dict[str, Any]) -> None:
    """The whole result as one JSON line, last: what a script comparing runs reads."""
    print(json.dumps(doc, separators=(",", ":"), default=str), flush=True)
