"""Push a run's checkpoints through a real sshd: to a local folder over SFTP, to a loopback Hub."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest
from support.fleets import box_entry, make_fleet
from support.hub_server import HubServer
from support.pty_only_box import PtyOnlyBox
from support.sshd import KeyPair, Sshd

from tui.actions.push import (
    PushError,
    PushResult,
    box_payload,
    check_listing,
    files_to_push,
    push_run,
    resolve_token,
    run_folder,
    safe_run_path,
)
from tui.model.config import FleetConfig
from tui.remote.channel import PTY_ONLY_FIX
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

Factory = Callable[..., Sshd]
HOSTILE = "run 'one' \"two\" $(touch pwned)"
TOKEN = "hf_SeCrEtTokenForThePushTest0123456789"
REPO = "me/yolo-runs"
SYSTEM_PATH = "/usr/bin:/bin"


def make_run(root: Path, name: str, *, results: bool = False) -> tuple[Path, dict[str, bytes]]:
    """A finished run with checkpoints of a few hundred KB (random bytes, so no two alike)."""
    run = root / name
    (run / "weights").mkdir(parents=True)
    (run / "val").mkdir()
    files = {
        "weights/best.pt": os.urandom(300_000),
        "weights/last.pt": os.urandom(200_000),
        "weights/epoch_10.pt": os.urandom(50_000),
        "weights/epoch_2.pt": os.urandom(40_000),
        "summary.json": b'{"best_metric": 0.41}\n',
        "status.json": b'{"schema_version": 1, "state": "completed"}\n',
        "train_config.yaml": b"epochs: 10\nbatch: 16\n",
        "train.log": b"the run's history goes with it\n",
        "metrics.jsonl": b'{"epoch": 1}\n',
        "val/not-pushed.txt": b"only the files a push selects travel\n",
    }
    if results:
        files["results.csv"] = b"epoch,loss\n1,2.0\n"
    for rel, data in files.items():
        (run / rel).write_bytes(data)
    return run, files


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fleet_for(tmp_path: Path, server: Sshd, key: KeyPair, **push: str) -> FleetConfig:
    return make_fleet(tmp_path, [box_entry(server, key, name="gpu-1", push=push)],
                      known_hosts=[server.known_hosts_line()])


class Bytes:
    """A progress callback that counts the bytes really transferred per file."""

    def __init__(self) -> None:
        self.moved: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, name: str, done: int, total: int) -> None:
        self.calls.append((name, done, total))
        last = self.last.get(name)
        if last is not None and done >= last:
            self.moved[name] = self.moved.get(name, 0) + done - last
        else:
            self.moved.setdefault(name, 0)
        self.last[name] = done


async def push(fleet: FleetConfig, run: Path, name: str, **kwargs: object) -> list[PushResult]:
    box = fleet.boxes[0]
    session = BoxSession(box, fleet, host_key_store(fleet))
    try:
        return await push_run(session, box, str(run), name, **kwargs)  # type: ignore[arg-type]
    finally:
        await session.close()


def test_files_to_push_picks_the_documented_files_in_order() -> None:
    names = ["weights/epoch_10.pt", "train.log", "weights/last.pt", "status.json",
             "weights/epoch_2.pt", "weights/best.pt", "metrics.jsonl", "weights/epoch_x.pt"]
    assert files_to_push(names, False) == ["weights/best.pt", "weights/last.pt", "status.json",
                                           "metrics.jsonl", "train.log"]
    assert files_to_push(names, True)[-2:] == ["weights/epoch_2.pt", "weights/epoch_10.pt"]
    assert safe_run_path("a\nb/../c d $(x)") == "a_b/_../c d $(x)"
    # Only ASCII digits, the whole name: `$` took a trailing newline, `\d` took Arabic-Indic digits.
    odd = ["weights/epoch_1.pt\n", "weights/epoch_\u0661.pt", "weights/epoch_\uff11.pt",
           "weights/epoch_1.pt/x", "weights/epoch_.pt"]
    assert files_to_push(odd, True) == [] and files_to_push(odd, [1]) == []
    with pytest.raises(PushError, match="did not ask for"):
        check_listing([{"name": "weights/epoch_1.pt\n", "size": 1, "sha256": "0" * 64,
                        "mtime": 1.0}], True, "gpu-1")


def test_token_comes_from_the_argument_then_hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert resolve_token("hf_given") == "hf_given"
    assert resolve_token(None) == "hf_from_env"


async def test_local_push_with_a_hostile_name_arrives_verified(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    name = HOSTILE + "\nline two"
    run, files = make_run(tmp_path / "runs", name)
    dest_root = tmp_path / "ckpt"
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(dest_root))
    counter = Bytes()
    (result,) = await push(fleet, run, name, include_epochs=True, progress=counter)
    assert result.outcome == "done", result.message
    assert result.verified
    # Cleaned, the name could be another run's: the run path's hash keeps it apart.
    dest = dest_root / "gpu-1" / run_folder(name, str(run))
    assert dest.name.startswith(HOSTILE + "_line two~")
    assert result.destination == f"{dest}/"
    assert str(dest) in result.message
    pushed = [f.name for f in result.files]
    assert pushed == ["weights/best.pt", "weights/last.pt", "summary.json", "status.json",
                      "train_config.yaml", "metrics.jsonl", "train.log", "weights/epoch_2.pt",
                      "weights/epoch_10.pt"]  # no results.csv: skipped
    for f in result.files:
        assert f.sha256 == sha(files[f.name])
        assert f.size == len(files[f.name])
        assert (dest / f.name).read_bytes() == files[f.name]
        assert (dest / f.name).stat().st_mtime == pytest.approx(f.mtime, abs=1e-3)
    assert not list(dest.rglob("*.part"))
    assert not (dest / "val").exists()
    assert result.how == "over SFTP" and "over SFTP" in result.message
    assert counter.moved == {f.name: f.size for f in result.files}
    for place in (tmp_path, Path.home(), server.home, Path.cwd()):
        assert place is not None
        assert not list(Path(place).glob("pwned")), place
    # The files on the box are as they were.
    assert {p.relative_to(run).as_posix(): p.read_bytes()
            for p in run.rglob("*") if p.is_file()} == files


async def test_interrupted_and_corrupted_parts(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    run, files = make_run(tmp_path / "runs", "r1", results=True)
    dest_root = tmp_path / "ckpt"
    dest = dest_root / "gpu-1" / "r1"
    (dest / "weights").mkdir(parents=True)
    best, last = files["weights/best.pt"], files["weights/last.pt"]
    (dest / "weights" / ".best.pt.part").write_bytes(best[: len(best) // 2])
    bad = bytearray(last[: len(last) // 2])
    bad[100] ^= 0xFF  # a torn write: right length, wrong bytes
    (dest / "weights" / ".last.pt.part").write_bytes(bytes(bad))
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(dest_root))
    counter = Bytes()
    (result,) = await push(fleet, run, "r1", progress=counter)
    assert result.outcome == "done", result.message
    assert [f.name for f in result.files] == ["weights/best.pt", "weights/last.pt",
                                              "summary.json", "results.csv", "status.json",
                                              "train_config.yaml", "metrics.jsonl",
                                              "train.log"]
    for f in result.files:
        assert (dest / f.name).read_bytes() == files[f.name]
    assert not list(dest.rglob("*.part"))
    # Only the missing half of best.pt travelled.
    assert counter.moved["weights/best.pt"] == len(best) - len(best) // 2
    # last.pt: the rest of the bad part, then once more in full after the mismatch.
    assert counter.moved["weights/last.pt"] == len(last) - len(last) // 2 + len(last)
    assert "resumed at" in result.message and "redone from 0" in result.message

    # A second push finds everything in place and moves nothing.
    again = Bytes()
    (second,) = await push(fleet, run, "r1", progress=again)
    assert second.verified and sum(again.moved.values()) == 0
    assert "already there" in second.message


async def test_missing_run_directory_fails_safely(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(tmp_path / "ckpt"))
    (result,) = await push(fleet, tmp_path / "runs" / "gone", "gone")
    assert result.outcome == "failed" and not result.verified
    assert "no run directory" in result.message and "untouched" in result.message
    assert not (tmp_path / "ckpt").exists()


def test_two_runs_of_one_name_never_share_a_destination(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Two runs_roots each holding `exp1`, and `a<newline>b` beside `a_b`: each pair went
    to one folder, the second push overwrote the first's verified files, and the journal
    vouched for both, so the destroy guard let a destroy lose the first run."""
    from tui.__main__ import main
    from tui.store.jsonl import read_jsonl

    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    runs = dict([make_run(tmp_path / "a", "exp1"), make_run(tmp_path / "b", "exp1"),
                 make_run(tmp_path / "a", "a\nb"), make_run(tmp_path / "a", "a_b")])
    out = tmp_path / "ckpt"
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, name="gpu-1",
                                            runs_roots=[str(tmp_path / "a"),
                                                        str(tmp_path / "b")],
                                            push={"local_dir": str(out)})],
                       known_hosts=[server.known_hosts_line()])
    assert main(["push", "gpu-1", "--config", fleet.source]) == 0
    entries = read_jsonl(tmp_path / "xdg" / "state" / "gpurent-tui" / "journal.jsonl")[0]
    pushes = {e["run_path"]: e["destination"] for e in entries if e["action"] == "push"}
    assert set(pushes) == {str(run) for run in runs}
    assert len(set(pushes.values())) == 4, pushes
    for run, files in runs.items():
        dest = Path(pushes[str(run)])
        assert dest.parent == out / "gpu-1"
        assert dest.name.startswith(safe_run_path(run.name))
        for name in ("weights/best.pt", "weights/last.pt", "train.log"):
            assert (dest / name).read_bytes() == files[name], (run, name)


async def test_a_folder_holding_another_runs_push_is_never_overwritten(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The runs root moved (or a box was pointed elsewhere) and a new `exp1` appeared: its
    push went into the folder holding the old exp1's verified copy, overwriting it."""
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    first, first_files = make_run(tmp_path / "a", "exp1")
    second, _ = make_run(tmp_path / "b", "exp1")
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(tmp_path / "ckpt"))
    (done,) = await push(fleet, first, "exp1")
    assert done.verified, done.message
    (refused,) = await push(fleet, second, "exp1")
    assert refused.outcome == "failed" and not refused.verified
    assert str(first) in refused.message and "overwrit" in refused.message, refused.message
    dest = Path(done.destination)
    for name in ("weights/best.pt", "weights/last.pt", "metrics.jsonl"):
        assert (dest / name).read_bytes() == first_files[name]
    assert not list(dest.rglob("*.part"))
    (again,) = await push(fleet, first, "exp1")  # the run that owns it still pushes there
    assert again.verified and again.destination == done.destination, again.message


def python3_dir(tmp_path: Path) -> Path:
    """A directory whose `python3` is this test run's interpreter (it has huggingface_hub).

    A wrapper rather than a symlink: a venv's python finds its site-packages
    from the path it was started by, which a symlink elsewhere would lose.
    """
    bindir = tmp_path / "venv-bin"
    bindir.mkdir()
    wrapper = bindir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return bindir


class ArgvWatch:
    """Scans every process's command line while a push runs, for a secret."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.hits: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    cmdline = Path(entry.path, "cmdline").read_bytes()
                except OSError:
                    continue
                if self.secret in cmdline:
                    self.hits.append(cmdline.decode(errors="replace"))
            self.scans += 1

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_hub_push_from_the_box_is_verified_and_keeps_the_token_off_argv(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[object, ...]] = []
    real_create_process = asyncssh.SSHClientConnection.create_process

    async def recording(self: asyncssh.SSHClientConnection, *args: object, **kwargs: object
                        ) -> object:
        sent.append((args, kwargs))
        return await real_create_process(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncssh.SSHClientConnection, "create_process", recording)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, files = make_run(tmp_path / "runs", HOSTILE, results=True)
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO)
    counter = Bytes()
    with HubServer([REPO], token=TOKEN) as hub, ArgvWatch(TOKEN) as watch:
        (result,) = await push(fleet, run, HOSTILE, progress=counter, token=TOKEN,
                               hub_endpoint=hub.url)
        await asyncio.sleep(0.1)
    assert result.outcome == "done", result.message
    assert result.verified
    assert result.destination == f"hf://{REPO}/{HOSTILE}/"
    stored = hub.state.repos[REPO]
    expected = ["weights/best.pt", "weights/last.pt", "summary.json", "results.csv",
                "status.json", "train_config.yaml", "metrics.jsonl", "train.log"]
    assert sorted(stored) == sorted(f"{HOSTILE}/{name}" for name in expected)
    for name in expected:
        assert stored[f"{HOSTILE}/{name}"].sha256 == sha(files[name])
    assert stored[f"{HOSTILE}/weights/best.pt"].lfs  # weights went through LFS
    assert not stored[f"{HOSTILE}/summary.json"].lfs  # small text was a regular file
    assert len(hub.state.commits) == 1
    assert f"Bearer {TOKEN}" in hub.state.authorizations
    assert {c[0] for c in counter.calls} == set(expected)
    assert all(c[1] in (0, c[2]) for c in counter.calls)  # per file: started, then sent
    assert watch.scans > 0 and watch.hits == []
    assert TOKEN not in result.message and TOKEN not in repr(result)
    assert sent and all(args == ("python3 -",) for args, _ in sent)  # the remote command line
    assert all(TOKEN not in repr(kwargs) for _, kwargs in sent)  # no env, no input argument
    assert TOKEN.encode() in box_payload({"token": TOKEN})  # it rides on stdin only
    assert not list(tmp_path.rglob("pwned")) and not list(Path.home().glob("pwned"))


async def test_hub_mismatch_and_refused_token_are_failures_without_the_token(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO)
    with HubServer([REPO], token=TOKEN) as hub:
        hub.state.lie_about.add("r1/weights/last.pt")
        (lied,) = await push(fleet, run, "r1", token=TOKEN, hub_endpoint=hub.url)
        (refused,) = await push(fleet, run, "r1", token=TOKEN + "x", hub_endpoint=hub.url)
    assert lied.outcome == "failed" and not lied.verified
    assert "weights/last.pt" in lied.message and "differs" in lied.message
    assert refused.outcome == "failed" and not refused.verified
    assert "untouched" in refused.message
    for result in (lied, refused):
        assert TOKEN not in result.message


class Trainer:
    """Rewrites last.pt and status.json every few milliseconds while a push runs, as a
    training epoch does (the demo's epochs take 2 s, a push about 1 s)."""

    def __init__(self, run: Path, every: float = 0.02, burst: float | None = None) -> None:
        self.run = run
        self.every = every
        self.burst = burst  # seconds of writing, then quiet (an epoch's save, then training)
        self.epochs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)

    def _write(self) -> None:
        end = None if self.burst is None else time.monotonic() + self.burst
        while not self._stop.is_set() and (end is None or time.monotonic() < end):
            self.epochs += 1
            for name in ("weights/last.pt", "status.json"):
                tmp = self.run / f"{name}.tmp"
                tmp.write_bytes(os.urandom(4096))
                os.replace(tmp, self.run / name)
            time.sleep(self.every)

    def __enter__(self) -> Trainer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_a_hub_push_of_a_run_still_training_verifies_what_it_sent(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Training rewrote last.pt between the listing and the upload: the box uploads a
    snapshot of each small file read whole, and says so; the Hub is checked against the
    snapshot's sha256, and the push's record names the file as it was sent."""
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO)
    with HubServer([REPO], token=TOKEN) as hub, Trainer(run) as trainer:
        (result,) = await push(fleet, run, "r1", token=TOKEN, hub_endpoint=hub.url)
    assert trainer.epochs > 3
    assert result.outcome == "done" and result.verified, result.message
    stored = hub.state.repos[REPO]
    for file in result.files:
        assert stored[f"r1/{file.name}"].sha256 == file.sha256


async def test_a_local_push_of_a_run_still_training_verifies_what_it_pulled(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """Training rewrote last.pt and status.json while they were pulled: each is hashed
    again on the box and pulled as it is now, verified, and the push's record names
    the file as pulled (the demo's first p on a running run read "never matched")."""
    server = sshd_factory()
    run, _ = make_run(tmp_path / "runs", "r1")
    local = tmp_path / "pushed"
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(local))
    # A burst of rewrites as the push starts, then quiet: a pull retried while writes come
    # every millisecond never matches, where a real run saves once an epoch. The burst outlasts a
    # pull and its quick retries (CI saw all three relists fall inside a 0.5 s burst): the
    # push must wait for the files to settle, not give up while training is saving.
    with Trainer(run, every=0.001, burst=1.5) as trainer:
        (result,) = await push(fleet, run, "r1")
    assert trainer.epochs > 1
    assert result.outcome == "done" and result.verified, result.message
    for file in result.files:
        assert sha((local / "gpu-1" / "r1" / file.name).read_bytes()) == file.sha256


async def test_box_without_huggingface_hub_fails_clearly(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": SYSTEM_PATH})  # Debian's python3: no huggingface_hub
    run, files = make_run(tmp_path / "runs", "r1")
    local = tmp_path / "ckpt"
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO, local_dir=str(local))
    local_result, hub_result = await push(fleet, run, "r1", token=TOKEN,
                                          hub_endpoint="http://127.0.0.1:9")
    assert hub_result.outcome == "failed" and not hub_result.verified
    assert hub_result.message.startswith(
        "huggingface_hub is not installed on box gpu-1: pip install huggingface_hub there "
        "(or set upload_from = \"panel\")")
    assert "untouched" in hub_result.message
    # The other destination is not held back by it.
    assert local_result.outcome == "done" and local_result.verified
    assert (local / "gpu-1" / "r1" / "weights" / "best.pt").read_bytes() == \
        files["weights/best.pt"]


# --- a hostile box: names it should not give, bytes it should not send, words it cannot back ---


def hostile_python(tmp_path: Path, patch: str) -> Path:
    """A directory whose `python3` runs our push program with `patch` (Python defining
    functions) put in just before the program is called: a box that speaks the protocol
    and lies in it. Everything else that box runs is run unchanged."""
    bindir = tmp_path / "hostile-bin"
    bindir.mkdir()
    (bindir / "patch.py").write_text(patch)
    wrapper = bindir / "python3"
    wrapper.write_text(f"""#!{sys.executable}
import subprocess, sys
real = {sys.executable!r}
if sys.argv[1:] != ["-"]:
    import os
    os.execv(real, [real, *sys.argv[1:]])
src = sys.stdin.buffer.read()
marker = b"\\nPARAMS = "
if marker in src:
    patch = open({str(bindir / "patch.py")!r}, "rb").read()
    src = src.replace(marker, b"\\n" + patch + marker, 1)
    with open({str(bindir / "payloads")!r}, "ab") as seen:
        seen.write(src + b"\\n\\0\\n")
sys.exit(subprocess.run([real, "-"], input=src).returncode)
""")
    wrapper.chmod(0o755)
    return bindir


def lying_listing(name: str) -> str:
    """A push program whose listing names `name` (outside what a push selects), with the
    true size and sha256 of what lies there on the box, and that sends those bytes."""
    return f"""
def list_files(params):
    path = os.path.join(params["run_path"], {name!r})
    data = open(path, "rb").read()
    emit({{"done": {{"files": [{{"name": {name!r}, "size": len(data), "mtime": 1.0,
        "mtime_ns": 1000000000, "inode": 1, "sha256": hashlib.sha256(data).hexdigest(),
        "steady": True}}], "hub": False}}}})
"""


@pytest.mark.parametrize("kind", ["relative", "absolute"])
async def test_a_box_listing_a_name_outside_the_run_writes_nothing(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, kind: str) -> None:
    """The box supplied both the bytes and the hash of `../../../victim`: the push wrote
    them over the user's file outside the destination and called it verified."""
    victim = tmp_path / "deep" / "victim"  # the user's own file next to the destination
    victim.parent.mkdir()
    victim.write_bytes(b"the user's precious file\n")
    # What the box says lives at that name, seen from its run directory.
    run, _ = make_run(tmp_path / "box" / "a" / "runs", "r1")
    (tmp_path / "box" / "victim").write_bytes(b"pwned by the box\n")
    name = "../../../victim" if kind == "relative" else str(victim)
    if kind == "absolute":
        victim_copy = victim.read_bytes()
    server = sshd_factory(env={"PATH": f"{hostile_python(tmp_path, lying_listing(name))}:"
                                       f"{SYSTEM_PATH}"})
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(tmp_path / "deep" / "ckpt"))
    (result,) = await push(fleet, run, "r1")
    assert victim.read_bytes() == b"the user's precious file\n"
    if kind == "absolute":
        assert victim.read_bytes() == victim_copy
    assert result.outcome == "failed" and not result.verified
    assert "did not ask for" in result.message and "nothing was written" in result.message
    assert not (tmp_path / "deep" / "ckpt").exists() or \
        not list((tmp_path / "deep" / "ckpt").rglob("*.part"))


async def test_a_link_planted_in_the_destination_redirects_no_write(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    run, files = make_run(tmp_path / "runs", "r1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me\n")
    root = tmp_path / "ckpt"
    dest = root / "gpu-1" / "r1"
    (dest / "weights").mkdir(parents=True)
    # A link where the part file goes, and one under a final name.
    (dest / "weights" / ".best.pt.part").symlink_to(victim)
    (dest / "weights" / "last.pt").symlink_to(victim)
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(root))
    (result,) = await push(fleet, run, "r1")
    assert result.outcome == "done", result.message
    assert victim.read_bytes() == b"keep me\n"
    for name in ("weights/best.pt", "weights/last.pt"):
        path = dest / name
        assert not path.is_symlink() and path.read_bytes() == files[name]
        assert path.stat().st_mode & 0o777 == 0o600
    for folder in (root / "gpu-1", dest, dest / "weights"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder

    # A folder of the destination replaced by a link: refused, nothing written through it.
    shutil.rmtree(dest)
    dest.symlink_to(elsewhere, target_is_directory=True)
    (refused,) = await push(fleet, run, "r1")
    assert refused.outcome == "failed" and not refused.verified
    assert "symbolic link" in refused.message and "refused" in refused.message
    assert list(elsewhere.iterdir()) == []


class NoSftpSshd(Sshd):
    """A box without `Subsystem sftp` (RunPod's basic proxy offers none)."""

    def config_text(self) -> str:
        return super().config_text().replace("Subsystem sftp internal-sftp\n", "")


async def test_without_sftp_the_push_streams_over_exec_resumes_and_verifies(
        tmp_path: Path, client_key: KeyPair) -> None:
    server = NoSftpSshd(tmp_path / "sshd-nosftp", [client_key.public_line],
                        home=tmp_path / "home-nosftp", env={"PATH": SYSTEM_PATH})
    server.start()
    try:
        run, files = make_run(tmp_path / "runs", "r1", results=True)
        root = tmp_path / "ckpt"
        dest = root / "gpu-1" / "r1"
        (dest / "weights").mkdir(parents=True)
        best = files["weights/best.pt"]
        (dest / "weights" / ".best.pt.part").write_bytes(best[:100_000])
        fleet = fleet_for(tmp_path, server, client_key, local_dir=str(root))
        counter = Bytes()
        (result,) = await push(fleet, run, "r1", include_epochs=True, progress=counter)
    finally:
        server.stop()
    assert result.outcome == "done" and result.verified, result.message
    assert result.how == "over an exec channel (the box offers no SFTP)"
    assert "over an exec channel" in result.message and "resumed at 100000" in result.message
    for f in result.files:
        assert (dest / f.name).read_bytes() == files[f.name]
    assert counter.moved["weights/best.pt"] == len(best) - 100_000


async def test_a_push_to_an_endpoint_that_refuses_commands_says_how_to_reach_the_box(
        tmp_path: Path, client_key: KeyPair) -> None:
    """RunPod's basic proxy: logins work, commands are refused. The push says what to do."""
    proxy = PtyOnlyBox(client_key.public_line)
    await proxy.start()
    try:
        fleet = make_fleet(tmp_path, [{
            "name": "pod", "host": "127.0.0.1", "port": proxy.port, "user": "root",
            "identity_file": str(client_key.private_path),
            "push": {"local_dir": str(tmp_path / "ckpt")}}],
            known_hosts=[proxy.known_hosts_line()])
        (result,) = await push(fleet, tmp_path / "runs" / "r1", "r1")
    finally:
        await proxy.close()
    assert result.outcome == "failed" and not result.verified
    assert "refused to run a command" in result.message, result.message
    assert PTY_ONLY_FIX in result.message
    assert proxy.refused


async def test_an_endpoint_that_closes_before_the_request_is_sent_ran_no_command(
        tmp_path: Path, client_key: KeyPair) -> None:
    """The session closed (exit 0, no output) before the push program's request was written:
    under load a real sshd's ForceCommand true did this and the push read "connection lost
    (Channel not open for sending)"; it is the same endpoint that ran no command."""
    proxy = PtyOnlyBox(client_key.public_line, close_commands=True)
    await proxy.start()
    try:
        fleet = make_fleet(tmp_path, [{
            "name": "pod", "host": "127.0.0.1", "port": proxy.port, "user": "root",
            "identity_file": str(client_key.private_path),
            "push": {"local_dir": str(tmp_path / "ckpt")}}],
            known_hosts=[proxy.known_hosts_line()])
        (result,) = await push(fleet, tmp_path / "runs" / "r1", "r1")
    finally:
        await proxy.close()
    assert proxy.closed
    assert result.outcome == "failed" and not result.verified
    assert "the SSH server ran no command" in result.message, result.message
    assert PTY_ONLY_FIX in result.message


@pytest.mark.parametrize("force", [
    "true",
    'echo "Error: Your SSH client doesn\'t support PTY"; exit 1',
    'echo "Error: Your SSH client doesn\'t support PTY" >&2; exit 1',
], ids=["silent", "complaint-on-stdout", "complaint-on-stderr"])
async def test_a_push_to_an_endpoint_that_runs_no_command_says_how_to_reach_the_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair, force: str) -> None:
    """An endpoint that takes the command and closes without running it: the push names
    the endpoint's kind and the fix, as a refresh does, not "exited 0 without an answer"."""
    server = sshd_factory("pty", extra_config=f"ForceCommand {force}")
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(tmp_path / "ckpt"))
    (result,) = await push(fleet, run, "r1")
    assert result.outcome == "failed" and not result.verified
    assert "the SSH server ran no command" in result.message, result.message
    assert PTY_ONLY_FIX in result.message
    assert not (tmp_path / "ckpt").exists()


# A stock Vast image: a banner around every session, SFTP listed. The forced command wraps
# the SFTP subsystem too, so what answers on it is the banner, not SFTP.
VAST_BANNER = (
    "ForceCommand echo 'Welcome to your vast.ai container! This session is tmux-managed.'; "
    "echo 'have fun (stderr)' >&2; exec sh -c \"$SSH_ORIGINAL_COMMAND\"")


async def test_a_banner_box_that_lists_sftp_pushes_and_says_which_way_truthfully(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    server = sshd_factory("vast", sftp=True, extra_config=VAST_BANNER)
    assert "Subsystem sftp" in server.config_text()
    run, files = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(tmp_path / "ckpt"))
    (result,) = await push(fleet, run, "r1")
    assert result.outcome == "done" and result.verified, result.message
    for f in result.files:
        assert (Path(result.destination) / f.name).read_bytes() == files[f.name]
    assert result.how == ("over an exec channel (the box's SFTP did not answer as SFTP: "
                          "a login banner or forced command in its way)"), result.how
    assert result.how in result.message and "offers no SFTP" not in result.message


async def test_push_program_noise_around_its_frames_is_ignored(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A box whose shell or libraries print around the program's answer (a login banner,
    a library writing to stdout): only the frames count."""
    noisy = """
_real_send = send
def send(payload):
    _OUT.write(b"Welcome to your vast.ai container!\\n{not json}\\n")
    _real_send(payload)
    _OUT.write(b"\\x1b[2J more chatter\\n")
"""
    server = sshd_factory(env={"PATH": f"{hostile_python(tmp_path, noisy)}:{SYSTEM_PATH}"})
    run, files = make_run(tmp_path / "runs", "r1")
    root = tmp_path / "ckpt"
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(root))
    (result,) = await push(fleet, run, "r1")
    assert result.outcome == "done" and result.verified, result.message
    assert (root / "gpu-1" / "r1" / "weights" / "best.pt").read_bytes() == \
        files["weights/best.pt"]


async def test_a_box_that_says_done_without_uploading_is_not_verified(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """The box reported the Hub's sha256 itself; a box that never uploaded could claim
    every file matched. Now the panel asks the Hub."""
    liar = """
def hub_push(params):
    commit = "f" * 40
    files = {}
    for f in params["files"]:
        with open(os.path.join(params["run_path"], f["name"]), "rb") as src:
            sha = hashlib.sha256(src.read(f["size"])).hexdigest()
        files[f["name"]] = {"sha256": sha, "size": f["size"], "how": "lfs"}
    emit({"committed": commit})
    emit({"done": {"commit": commit, "files": files, "changed": []}})
"""
    bindir = hostile_python(tmp_path, liar)
    server = sshd_factory(env={"PATH": f"{bindir}:{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO)
    with HubServer([REPO], token=TOKEN) as hub:
        (result,) = await push(fleet, run, "r1", token=TOKEN, hub_endpoint=hub.url)
    assert hub.state.commits == [] and hub.state.repos[REPO] == {}
    assert result.outcome == "failed" and not result.verified, result.message
    assert "not verified" in result.message and "the Hub does not list" in result.message
    assert TOKEN not in result.message


async def test_a_box_that_beats_forever_cannot_hold_a_hub_push(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only silence ended a push: a box that kept beating (and naming commits, each one
    kept in a list without end) held the push, and the box's action lock, forever."""
    import tui.actions.push as push_module

    endless = """
def hub_push(params):
    n = 0
    while True:
        emit({"beat": n, "committed": "%040x" % n})
        emit({"committed": "not-a-commit-id " * 1000})
        n += 1
        threading.Event().wait(0.01)
"""
    # Not hours in a test (raising=False: without the limit, the push never ended).
    monkeypatch.setattr(push_module, "DEADLINE_BASE_SECONDS", 3.0, raising=False)
    bindir = hostile_python(tmp_path, endless)
    server = sshd_factory(env={"PATH": f"{bindir}:{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO)
    with HubServer([REPO], token=TOKEN) as hub:
        (result,) = await asyncio.wait_for(
            push(fleet, run, "r1", token=TOKEN, hub_endpoint=hub.url), 120)
    assert result.outcome == "failed" and not result.verified
    assert "ran past its limit" in result.message, result.message
    assert "not-a-commit-id" not in result.message and TOKEN not in result.message
    assert re.search(r"commit [0-9a-f]{12} was made but not verified", result.message)


async def test_a_push_program_frame_over_the_cap_is_refused_whole(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A box that announces a frame of a gigabyte, or floods events before its answer:
    the push is refused with why, nothing is written, and the next push still works."""
    huge = """
def list_files(params):
    for n in range(20000):
        emit({"beat": n})
    send(b"J" + b" " * 64)  # a small frame, then one that claims a gigabyte
    with _LOCK:
        _OUT.write(b"\\n--gpurent-" + _NONCE[0].encode() + b" 1000000000\\n")
        _OUT.flush()
"""
    server = sshd_factory(env={"PATH": f"{hostile_python(tmp_path, huge)}:{SYSTEM_PATH}"})
    run, _ = make_run(tmp_path / "runs", "r1")
    root = tmp_path / "ckpt"
    fleet = fleet_for(tmp_path, server, client_key, local_dir=str(root))
    (result,) = await asyncio.wait_for(push(fleet, run, "r1"), 120)
    assert result.outcome == "failed" and not result.verified
    assert "cannot be read" in result.message and "over the cap" in result.message, \
        result.message
    assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()]


async def test_upload_from_the_panel_keeps_the_token_off_the_box(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    # The loopback Hub speaks LFS, not Xet (read once, when huggingface_hub is imported).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    bindir = hostile_python(tmp_path, "")  # records every program the box is sent
    server = sshd_factory(env={"PATH": f"{bindir}:{SYSTEM_PATH}"})  # no huggingface_hub
    run, files = make_run(tmp_path / "runs", "r1", results=True)
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO, upload_from="panel")
    with HubServer([REPO], token=TOKEN) as hub:
        (result,) = await push(fleet, run, "r1", token=TOKEN, hub_endpoint=hub.url)
    assert result.outcome == "done" and result.verified, result.message
    assert result.how == "pulled to this machine and uploaded from here"
    stored = hub.state.repos[REPO]
    assert {name: f.sha256 for name, f in stored.items()} == \
        {f"r1/{f.name}": sha(files[f.name]) for f in result.files}
    sent = (bindir / "payloads").read_bytes()
    params = [line for line in sent.splitlines() if line.startswith(b"PARAMS = ")]
    assert params and TOKEN.encode() not in sent
    assert not any(b"token" in line or b'"hub"' in line for line in params)
    staging = tmp_path / "xdg" / "state" / "gpurent-tui" / "staging"
    assert not (staging / "gpu-1" / "r1").exists()  # removed once the Hub holds them


async def test_a_box_token_variable_is_used_and_nothing_else(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair,
        monkeypatch: pytest.MonkeyPatch) -> None:
    scoped = "hf_ScopedToOneRepoOnly0123456789abcdef"
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # the wide token must not go to this box
    monkeypatch.delenv("HF_TOKEN_GPU1", raising=False)
    server = sshd_factory(env={"PATH": f"{python3_dir(tmp_path)}:{SYSTEM_PATH}",
                               "HF_HUB_DISABLE_XET": "1"})
    run, _ = make_run(tmp_path / "runs", "r1")
    fleet = fleet_for(tmp_path, server, client_key, hf_repo=REPO, token_env="HF_TOKEN_GPU1")
    with HubServer([REPO], token=scoped) as hub:
        (unset,) = await push(fleet, run, "r1", hub_endpoint=hub.url)
        assert unset.outcome == "failed" and "HF_TOKEN_GPU1" in unset.message
        assert "is not set" in unset.message and hub.state.requests == []
        monkeypatch.setenv("HF_TOKEN_GPU1", scoped)
        (result,) = await push(fleet, run, "r1", hub_endpoint=hub.url)
    assert result.verified, result.message
    assert f"Bearer {TOKEN}" not in hub.state.authorizations
    assert f"Bearer {scoped}" in hub.state.authorizations


def test_a_dropped_push_says_so_in_words_once_and_resumes(
        tmp_path: Path, sshd_factory: Factory, client_key: KeyPair) -> None:
    """A push whose box dropped mid-transfer printed asyncio's `socket.send() raised
    exception.` several times under its own report: SFTP keeps many requests in flight,
    and when the break is first met by a write, the rest of the burst hits a dead socket.
    That race is real but only some drops meet it (about one in three here), so the push
    is dropped three times; the next test provokes the same note every time. The loss is
    said once, in words; a second push resumes."""
    server = sshd_factory(env={"PATH": SYSTEM_PATH})
    root = tmp_path / "runs"
    (root / "r1" / "weights").mkdir(parents=True)
    (root / "r1" / "status.json").write_text('{"schema_version": 1, "state": "completed"}\n')
    best = root / "r1" / "weights" / "best.pt"
    with best.open("wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20) * 8)  # 512 MB: long enough to be cut mid-way
    out = tmp_path / "ckpt"
    fleet = make_fleet(tmp_path, [box_entry(server, client_key, "gpu-1",
                                            runs_roots=[str(root)],
                                            push={"local_dir": str(out)})],
                       known_hosts=[server.known_hosts_line()])
    # Count asyncio's note where it is made, before any filter can drop it.
    site = tmp_path / "count-site"
    site.mkdir()
    counter = tmp_path / "asyncio-notes"
    (site / "sitecustomize.py").write_text(f"""
import asyncio.selector_events as events
class Count:
    def __init__(self, log):
        self.log = log
    def __getattr__(self, name):
        return getattr(self.log, name)
    def warning(self, msg, *args, **kwargs):
        if msg == "socket.send() raised exception.":
            with open({str(counter)!r}, "a") as f:
                f.write("x")
        return self.log.warning(msg, *args, **kwargs)
events.logger = Count(events.logger)
""")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path.cwd())])}
    part = out / "gpu-1" / "r1" / "weights" / ".best.pt.part"
    noise = []
    for _ in range(3):
        start = part.stat().st_size if part.exists() else 0
        push = subprocess.Popen([sys.executable, "-m", "tui", "push", "gpu-1", "--config",
                                 fleet.source], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and push.poll() is None:
            if part.exists() and part.stat().st_size > start + (20 << 20):
                break
            time.sleep(0.05)
        server.stop()
        said, err = (stream.decode() for stream in push.communicate(timeout=60))
        server.start()
        assert push.returncode == 1, said
        assert "stopped" in said and "kept as .part to resume" in said, said
        noise.append(err.count("socket.send() raised exception."))
    raised = len(counter.read_text()) if counter.exists() else 0
    assert sum(noise) == 0, f"{noise} (asyncio raised the note {raised} times)"
    again = subprocess.run([sys.executable, "-m", "tui", "push", "gpu-1", "--config",
                            fleet.source], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stdout
    assert (out / "gpu-1" / "r1" / "weights" / "best.pt").read_bytes() == best.read_bytes()


def test_the_cli_never_prints_asyncios_note_about_writes_after_a_loss(tmp_path: Path) -> None:
    """The same note, made every time: a process that ran the CLI writes ten times to a
    connection the other side reset (what SFTP's burst of requests does when a box drops)."""
    config = tmp_path / "fleet.toml"
    config.write_text('[[box]]\nname = "b"\nhost = "127.0.0.1"\n')
    script = f"""
import asyncio
from tui.__main__ import main
assert main(["check-config", "--config", {str(config)!r}]) == 0

async def go():
    def reset(reader, writer):
        writer.transport.abort()
    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.sleep(0.2)
    for _ in range(10):
        writer.write(b"request")
        await asyncio.sleep(0)
    server.close()

asyncio.run(go())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 0, done.stderr
    assert "socket.send() raised exception." not in done.stderr
