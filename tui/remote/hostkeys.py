"""Host keys: checked against known_hosts; `accept-new` pins first-seen keys.

A key that differs from a known one is always refused, whatever the policy:
the message shows the offered fingerprint, the file and line that disagree,
and the commands that replace the stale entry once the user has checked why.
A key that a known_hosts line marks `@revoked` is refused in both policies,
for boxes and jump hosts alike, before anything is pinned.

That "changed" alarm must never cry wolf: two connections may reach one host
at once (a box, and the same machine as another box's jump host), each having
read known_hosts before the other pinned. So the decision is taken again at
the moment the key is offered, under a lock on the pin file: a key equal to
one now pinned is accepted, and only a different key is refused.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from tui.model.config import FleetConfig
from tui.store import paths

# What asyncssh's known_hosts callable may return: trusted host keys, trusted CA keys,
# revoked keys (asyncssh.known_hosts.match_known_hosts accepts this tuple).
HostKeyLists = tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]
KnownHostsMatch = Callable[[str, str, int | None], HostKeyLists]


@dataclass(frozen=True)
class KnownEntry:
    """One known_hosts line that names a host."""

    file: Path
    line: int
    key: asyncssh.SSHKey | None = None
    marker: str | None = None  # None (a trusted key), "revoked" or "cert-authority"
    with_port: bool = True     # matched as [host]:port (else as the bare host name)


class _Parsed:
    """A known_hosts file's parsed lines, with an index of the plain host names they name:
    a connection looks at the lines naming its host and at the ones no index can hold
    (wildcards, negations, hashed names), not at every line (at 1,000 boxes a scan per
    connection was half of the fleet's start)."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[tuple[int, Any]]] = {}
        self.hashed: list[tuple[bytes, bytes, int, Any]] = []  # |1|salt|hash: salt, hash
        self.scanned: list[tuple[int, Any]] = []  # patterns, negations: matched each time

    def add(self, number: int, line: str, parsed: Any) -> None:
        fields = line.split()
        hosts = fields[1] if fields and fields[0].startswith("@") and len(fields) > 1 \
            else (fields[0] if fields else "")
        names = hosts.split(",")
        if len(names) == 1 and names[0].startswith("|1|"):
            try:
                salt, digest = (base64.b64decode(part, validate=True)
                                for part in names[0][3:].split("|"))
            except (ValueError, binascii.Error):
                salt = digest = b""
            if salt and digest:
                self.hashed.append((salt, digest, number, parsed))
                return
        if any(not n or n[0] in "|!" or any(c in n for c in "*?") for n in names):
            self.scanned.append((number, parsed))
            return
        for name in {n.lower() for n in names}:
            self.by_name.setdefault(name, []).append((number, parsed))

    def candidates(self, names: list[str]) -> list[tuple[int, Any]]:
        """The lines that may match any of `names`, in file order: the index's, the hashed
        lines whose HMAC of a name is theirs (as ssh checks them), and every pattern line."""
        seen: dict[int, Any] = dict(self.scanned)
        for name in names:
            seen.update(self.by_name.get(name.lower(), ()))
            for raw in {name.encode(), name.lower().encode()}:
                seen.update((number, parsed) for salt, digest, number, parsed in self.hashed
                            if hmac.new(salt, raw, hashlib.sha1).digest() == digest)
        return sorted(seen.items(), key=lambda item: item[0])


def known_name(host: str, port: int) -> str:
    """How known_hosts (and ssh-keygen -R) spell a host at a port."""
    return host if port == 22 else f"[{host}]:{port}"


class HostKeyStore:
    """The known_hosts files the panel trusts, plus its own pinning file."""

    def __init__(self, known_hosts: Path, pinned: Path, accept_new: bool) -> None:
        self.known_hosts = known_hosts
        self.pinned = pinned
        self.accept_new = accept_new
        self._parsed: dict[Path, tuple[tuple[int, int, int], _Parsed]] = {}

    @property
    def policy(self) -> tuple[str, str, bool]:
        """What makes two stores the same (connections shared between boxes use it)."""
        return str(self.known_hosts), str(self.pinned), self.accept_new

    def _files(self) -> list[Path]:
        return [p for p in (self.known_hosts, self.pinned) if p.is_file()]

    def entries_for(self, host: str, port: int) -> list[KnownEntry]:
        """Every line naming this host, re-read now (an entry the user fixes counts at
        once). A line that cannot be read is skipped, as ssh skips it."""
        names = [(known_name(host, port), True)]
        if port != 22:
            names.append((host, False))
        found: list[KnownEntry] = []
        for path in self._files():
            for number, parsed in self._lines(path).candidates([n for n, _ in names]):
                for name, with_port in names:
                    trusted, cas, revoked = parsed.match(name, "", None)[:3]
                    for marker, keys in ((None, trusted), ("cert-authority", cas),
                                         ("revoked", revoked)):
                        found.extend(KnownEntry(path, number, k, marker, with_port)
                                     for k in keys)
                    if trusted or cas or revoked:
                        break
        return found

    def _lines(self, path: Path) -> _Parsed:
        """The readable lines of a known_hosts file, parsed once per change of the file
        (a big file is not parsed again for every hop of every box)."""
        try:
            st = path.stat()
        except OSError:
            return _Parsed()
        sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == sig:
            return cached[1]
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return _Parsed()
        parsed = _Parsed()
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                parsed.add(number, line, asyncssh.import_known_hosts(line))
            except (ValueError, asyncssh.KeyImportError):
                continue
        self._parsed[path] = (sig, parsed)
        return parsed

    def judge(self, host: str, port: int) -> tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey],
                                                   list[asyncssh.SSHKey]]:
        """Trusted keys, CA keys, revoked keys for this host, as ssh reads known_hosts.

        A `[host]:port` entry wins over a bare host entry (the bare name counts only
        when no entry names the port, as asyncssh does); a revoked key counts in
        either spelling and is never trusted.
        """
        entries = self.entries_for(host, port)
        revoked = [e.key for e in entries if e.marker == "revoked" and e.key is not None]

        def pick(marker: str | None) -> list[asyncssh.SSHKey]:
            exact = [e.key for e in entries if e.marker == marker and e.with_port and e.key]
            bare = [e.key for e in entries if e.marker == marker and not e.with_port and e.key]
            return exact or bare

        trusted = [k for k in pick(None) if k not in revoked]
        return trusted, pick("cert-authority"), revoked

    def known_hosts_for(self, host: str, port: int) -> KnownHostsMatch:
        """What asyncssh checks a hop's key against: the trusted and CA keys. Revoked
        keys are left out of it on purpose, so that a revoked key reaches the
        client's own check (which says why) instead of a bare refusal."""
        def match(_host: str, _addr: str, _port: int | None) -> HostKeyLists:
            trusted, cas, _ = self.judge(host, port)
            return trusted, cas, []
        return match

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the pin file's lock: one pin decision at a time, across processes too."""
        self.pinned.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.pinned, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def decide(self, host: str, port: int, key: asyncssh.SSHKey) -> str:
        """The verdict on a key that was not trusted when the connection began:
        "ok" (pinned meanwhile, or pinned now under accept-new), "revoked",
        "changed" (another key is known) or "unknown" (none is, and strict)."""
        with self._locked():
            trusted, _, revoked = self.judge(host, port)
            if key in revoked:
                return "revoked"
            if key in trusted:
                return "ok"
            if trusted:
                return "changed"
            if not self.accept_new:
                return "unknown"
            line = f"{known_name(host, port)} {key.export_public_key('openssh').decode().strip()}\n"
            with open(self.pinned, "a", encoding="ascii") as f:
                f.write(line)
            return "ok"


def host_key_store(fleet: FleetConfig) -> HostKeyStore:
    """The store a fleet's config asks for: its known_hosts, the panel's pins, its policy."""
    known = Path(fleet.known_hosts or "~/.ssh/known_hosts").expanduser()
    return HostKeyStore(known, paths.pinned_known_hosts(), fleet.host_keys == "accept-new")


def fingerprint(key: asyncssh.SSHKey | None) -> str:
    if key is None:
        return "(no key offered)"
    return f"{key.get_algorithm()} {key.get_fingerprint('sha256')}"


def keyscan(host: str, port: int, target: Path, via: str | None) -> str:
    """The literal command that fetches a host's key into `target` (through the jump
    host before it, if any: the panel's machine may not reach the host directly)."""
    scan = f"ssh-keyscan -p {port} {host}"
    return f"ssh {via} {scan} >> {target}" if via else f"{scan} >> {target}"


def unknown_message(hop_label: str, host: str, port: int, key: asyncssh.SSHKey | None,
                    store: HostKeyStore, via: str | None = None) -> str:
    return (f"host key of {hop_label} ({known_name(host, port)}) is not in "
            f"{store.known_hosts}: offered {fingerprint(key)}. Check it, then add it with "
            f"`{keyscan(host, port, store.known_hosts, via)}` (and compare the fingerprint "
            f"with `ssh-keygen -lf`) or set host_keys = \"accept-new\"")


def changed_message(hop_label: str, host: str, port: int, key: asyncssh.SSHKey | None,
                    entries: list[KnownEntry], store: HostKeyStore,
                    via: str | None = None) -> str:
    name = known_name(host, port)
    trusted = [e for e in entries if e.marker is None]
    where = ", ".join(f"{e.file}:{e.line}" for e in trusted)
    files = sorted({str(e.file) for e in trusted})
    remove = "; ".join(f"ssh-keygen -R '{name}' -f {f}" for f in files)
    if store.accept_new:
        then = "then refresh (accept-new pins the new key)"
    else:
        then = (f"then add the new key, which host_keys = \"strict\" never does by itself: "
                f"`{keyscan(host, port, store.known_hosts, via)}`")
    return (f"HOST KEY CHANGED for {hop_label} ({name}): offered {fingerprint(key)}, "
            f"which differs from {where}. Refused. If the box was rebuilt, remove the old "
            f"entry (`{remove}`), {then}; otherwise someone may be intercepting the "
            f"connection")


def revoked_message(hop_label: str, host: str, port: int, key: asyncssh.SSHKey | None,
                    entries: list[KnownEntry]) -> str:
    where = ", ".join(f"{e.file}:{e.line}" for e in entries
                      if e.marker == "revoked" and e.key == key) or "known_hosts"
    return (f"HOST KEY REVOKED for {hop_label} ({known_name(host, port)}): it offered "
            f"{fingerprint(key)}, which {where} marks @revoked. Refused, and nothing was "
            f"pinned. Ask whoever runs the host why; a revoked key is never accepted")
