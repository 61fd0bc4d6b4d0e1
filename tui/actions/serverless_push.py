"""`p` on a serverless run: its weights copied from the volume to `local_dir`, written as a
box's local push is (tui.actions.localdir: never through a link, 0600, renamed into place,
one run per folder), and journaled as a push.

What "verified" means here, since the volume's listing gives no hash: each file is
fetched twice, both copies hash the same (sha256), the volume's listing of it is the same
before and after (its rounded size exactly; its time within what the listing can say:
Modal's to the minute exactly, Beam's "N seconds ago" read against our clock within its
unit), and the file written here hashes the same again. That vouches the bytes did not
change while they were copied; it cannot vouch they are the bytes training wrote (the
provider keeps no hash we can read).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tui.actions.flows import Report
from tui.actions.localdir import RunFolder, UnsafeDestination
from tui.actions.push import run_folder, safe_component
from tui.model.config import ServerlessConfig
from tui.model.runs import RunState
from tui.model.serverless import ServerlessError, VolumeEntry, same_listing
from tui.providers.serverless import adapter, cli_options, volume_join
from tui.store.journal import Journal

WEIGHTS = ("best.pt", "last.pt")  # what a push takes from weights/ (as a box's push does)
_BLOCK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _listed(entries: list[VolumeEntry]) -> dict[str, VolumeEntry]:
    return {e.path.rsplit("/", 1)[-1]: e for e in entries if not e.is_dir}


def _write(folder: RunFolder, name: str, source: Path, mtime: float | None) -> str:
    """Copy `source` into the run folder as `name` (its .part, then renamed); its sha256."""
    fd, _ = folder.open_part(name)
    digest = hashlib.sha256()
    try:
        os.ftruncate(fd, 0)
        with source.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
                os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    stamp = int((mtime if mtime is not None else source.stat().st_mtime) * 1e9)
    folder.finish(name, stamp)
    return digest.hexdigest()


async def push_run(entry: ServerlessConfig, run: RunState, journal: Journal,
                   clock: Callable[[], float], *,
                   env: Mapping[str, str] | None = None,
                   volume_path: str | None = None) -> Report:
    """Copy the run's best.pt and last.pt from the volume into
    `<local_dir>/<entry>/<run>/`, verified as the module says. `volume_path`: the run's
    folder as the CLI printed it, when its shown path was cleaned of escapes."""
    report = Report()
    if not entry.local_dir:
        return report.fail(f"{entry.name}: no local_dir in its [[serverless]] entry: set one "
                           "to copy a run's weights from the volume")
    api = adapter(entry.provider)
    options = cli_options(entry, env)
    weights_dir = volume_join(volume_path or run.path, "weights")
    files: list[dict[str, Any]] = []
    base = Path(entry.local_dir).expanduser()
    destination = base / safe_component(entry.name) / run_folder(run.name, run.path)
    try:
        try:
            before = _listed(await api.list_volume(entry.volume, weights_dir, **options))
        except ServerlessError as exc:
            if exc.kind != "path_missing":
                raise
            # A run that has not saved an epoch yet: said plainly, not as the CLI's error.
            return report.fail(f"{run.name} has no weights yet (no {weights_dir} on volume "
                               f"{entry.volume})")
        wanted = [name for name in WEIGHTS if name in before]
        if not wanted:
            return report.fail(f"{run.name}: no best.pt or last.pt in {entry.volume}:"
                               f"{weights_dir}")
        with RunFolder(base, [safe_component(entry.name),
                              *run_folder(run.name, run.path).split("/")]) as folder:
            folder.claim(entry.name, run.path)
            with tempfile.TemporaryDirectory(dir=folder.path, prefix=".fetch-") as tmp:
                for name in wanted:
                    remote = volume_join(weights_dir, name)
                    first, second = Path(tmp) / f"{name}.1", Path(tmp) / f"{name}.2"
                    await api.fetch_volume_file(entry.volume, remote, first, **options)
                    await api.fetch_volume_file(entry.volume, remote, second, **options)
                    sha, again = _sha256(first), _sha256(second)
                    after = _listed(await api.list_volume(entry.volume, weights_dir,
                                                          **options))
                    if sha != again or not same_listing(before.get(name), after.get(name)):
                        report.fail(f"{name}: changed on the volume while it was copied "
                                    "(two fetches or the listing differ): not kept; push "
                                    "again once the epoch's save is done")
                        continue
                    written = _write(folder, name, first, before[name].mtime)
                    if written != sha:
                        report.fail(f"{name}: the copy written here does not hash as fetched")
                        continue
                    size = first.stat().st_size
                    files.append({"name": f"weights/{name}", "size": size, "sha256": sha})
                    report.say(f"{name}: {size} bytes, sha256 {sha[:12]}…, fetched twice, "
                               "the same")
    except (ServerlessError, UnsafeDestination, OSError) as exc:
        report.fail(f"push of {run.name} from {entry.volume}: {exc}")
    verified = bool(files) and report.code == 0
    journal.record(box=entry.name, action="push", outcome="done" if verified else "failed",
                   run=run.name, run_path=run.path, files=files,
                   destination=str(destination), verified=verified,
                   message=report.lines[-1] if report.lines else "", at=clock(),
                   details={"volume": entry.volume, "provider": entry.provider})
    if verified:
        report.say(f"{run.name}: {len(files)} file(s) in {destination}, verified (two fetches "
                   "agree; the volume keeps no hash to compare with)")
    return report
