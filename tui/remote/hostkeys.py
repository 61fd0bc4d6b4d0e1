"""Host keys: checked against known_hosts; `accept-new` pins first-seen keys.

A key that differs from a known one is always refused, whatever the policy:
the message shows the offered fingerprint, the file and line that disagree,
and the command that removes the stale entry once the user has checked why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from tui.model.config import FleetConfig
from tui.store import paths


@dataclass(frozen=True)
class KnownEntry:
    file: Path
    line: int


class HostKeyStore:
    """The known_hosts files the panel trusts, plus its own pinning file."""

    def __init__(self, known_hosts: Path, pinned: Path, accept_new: bool) -> None:
        self.known_hosts = known_hosts
        self.pinned = pinned
        self.accept_new = accept_new

    def _files(self) -> list[Path]:
        return [p for p in (self.known_hosts, self.pinned) if p.is_file()]

    def trusted(self) -> asyncssh.SSHKnownHosts:
        """Re-read on every connect, so an entry the user fixes applies at the next retry."""
        text = []
        for path in self._files():
            try:
                text.append(path.read_text(errors="replace"))
            except OSError:
                continue
        return asyncssh.import_known_hosts("\n".join(text))

    def entries_for(self, host: str, port: int) -> list[KnownEntry]:
        """Where known_hosts already names this host (what a changed key contradicts)."""
        found = []
        for path in self._files():
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for number, line in enumerate(lines, 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                try:
                    matches = asyncssh.import_known_hosts(line).match(host, "", port)
                except (ValueError, asyncssh.KeyImportError):
                    continue
                if matches[0]:
                    found.append(KnownEntry(path, number))
        return found

    def pin(self, host: str, port: int, key: asyncssh.SSHKey) -> None:
        """Remember a first-seen key (accept-new) in the panel's own known_hosts."""
        name = host if port == 22 else f"[{host}]:{port}"
        self.pinned.parent.mkdir(parents=True, exist_ok=True)
        line = f"{name} {key.export_public_key('openssh').decode().strip()}\n"
        fd = os.open(self.pinned, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(line)


def host_key_store(fleet: FleetConfig) -> HostKeyStore:
    """The store a fleet's config asks for: its known_hosts, the panel's pins, its policy."""
    known = Path(fleet.known_hosts or "~/.ssh/known_hosts").expanduser()
    return HostKeyStore(known, paths.pinned_known_hosts(), fleet.host_keys == "accept-new")


def fingerprint(key: asyncssh.SSHKey | None) -> str:
    if key is None:
        return "(no key offered)"
    return f"{key.get_algorithm()} {key.get_fingerprint('sha256')}"


def unknown_message(hop_label: str, name: str, key: asyncssh.SSHKey | None,
                    store: HostKeyStore) -> str:
    return (f"host key of {hop_label} ({name}) is not in {store.known_hosts}: offered "
            f"{fingerprint(key)}. Check it, then add it with "
            f"`ssh-keyscan -p PORT HOST >> {store.known_hosts}` or set host_keys = \"accept-new\"")


def changed_message(hop_label: str, name: str, key: asyncssh.SSHKey | None,
                    entries: list[KnownEntry]) -> str:
    where = ", ".join(f"{e.file}:{e.line}" for e in entries)
    files = sorted({str(e.file) for e in entries})
    fix = "; ".join(f"ssh-keygen -R '{name}' -f {f}" for f in files)
    return (f"HOST KEY CHANGED for {hop_label} ({name}): offered {fingerprint(key)}, "
            f"which differs from {where}. Refused. If the box was rebuilt, remove the old "
            f"entry ({fix}) and refresh; otherwise someone may be intercepting the connection")
