"""The keys one hop offers, chosen the way OpenSSH chooses them.

On a jump host the user's keys usually live in a forwarded agent, not in
files, so the agent counts for every hop: an `IdentityFile` whose private half
is missing or encrypted is still usable when the agent holds that key (its
`.pub` names it). The order is OpenSSH's: agent keys named by an identity
file, then the agent's other keys (unless `IdentitiesOnly`), then identity
files the agent does not hold. Identity files are loaded one by one so that an
unusable one is named in an `auth_failed` message instead of surfacing as a
network error.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from tui.model.box import Connection
from tui.remote.errors import BoxError
from tui.remote.route import Hop

DEFAULT_IDENTITIES = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk")


@dataclass
class Identities:
    """What one hop will offer, and what to say if the server accepts none of it."""

    keys: list[asyncssh.SSHKeyPair] = field(default_factory=list)
    files: list[str] = field(default_factory=list)      # identity files in use
    missing: list[str] = field(default_factory=list)    # identity files that do not exist
    agent_keys: int = 0
    agent: asyncssh.SSHAgentClient | None = None

    def describe(self) -> str:
        parts = list(self.files)
        if self.agent_keys:
            parts.append(f"{self.agent_keys} key(s) from the agent")
        said = ", ".join(parts) or "no key at all: no identity file and no agent"
        missing = "".join(f"; identity file {f} does not exist" for f in self.missing)
        return said + missing

    def close(self) -> None:
        """The agent is needed only while logging in."""
        if self.agent is not None:
            with contextlib.suppress(Exception):
                self.agent.close()
            self.agent = None


def agent_path(hop: Hop) -> str | None:
    """The agent socket for `hop`: IdentityAgent if the ssh config sets one, else
    $SSH_AUTH_SOCK; None when there is none (or IdentityAgent none)."""
    if hop.identity_agent is None or hop.identity_agent == "SSH_AUTH_SOCK":
        path = os.environ.get("SSH_AUTH_SOCK") or ""
    elif hop.identity_agent.lower() == "none":
        path = ""
    else:
        path = os.path.expanduser(hop.identity_agent)
    return path or None


async def _agent_keys(path: str, timeout: float) -> tuple[asyncssh.SSHAgentClient | None,
                                                         list[asyncssh.SSHKeyPair]]:
    """Every key the agent holds; an agent that cannot be reached holds none (as in ssh)."""
    agent = asyncssh.SSHAgentClient(path)
    try:
        keys = list(await asyncio.wait_for(agent.get_keys(), timeout))
    except (ValueError, OSError, TimeoutError, asyncssh.Error):
        agent.close()
        return None, []
    return agent, keys


def _public_blob(path: Path) -> bytes | None:
    """The public key a file (or its `.pub` beside it) names, if it can be read."""
    for candidate in (path, path.with_name(path.name + ".pub")):
        with contextlib.suppress(OSError, ValueError, asyncssh.KeyImportError):
            if candidate.is_file():
                return asyncssh.read_public_key(candidate).public_data
    return None


def _load_file(who: str, key_file: str) -> asyncssh.SSHKeyPair:
    path = Path(key_file)
    if not path.is_file():
        raise BoxError(Connection.AUTH_FAILED, f"{who}: identity file {key_file} is not a file")
    try:
        (pair, *_) = asyncssh.load_keypairs([key_file])
    except (asyncssh.KeyImportError, OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise BoxError(Connection.AUTH_FAILED,
                       f"{who}: cannot load identity file {key_file}: {reason}") from None
    return pair


async def load_identities(hop: Hop, who: str, timeout: float) -> Identities:
    """The keys `hop` offers, in OpenSSH's order. BoxError (auth_failed) names an
    identity file that exists but cannot be used and that no agent key stands for."""
    found = Identities()
    path = agent_path(hop)
    agent_keys: list[asyncssh.SSHKeyPair] = []
    if path is not None:
        found.agent, agent_keys = await _agent_keys(path, timeout)
    by_blob = {k.public_data: k for k in agent_keys}

    explicit = bool(hop.identity_files)
    files = list(hop.identity_files) if explicit else [
        str(Path("~/.ssh").expanduser() / name) for name in DEFAULT_IDENTITIES]
    in_agent: list[asyncssh.SSHKeyPair] = []
    from_files: list[asyncssh.SSHKeyPair] = []
    try:
        for key_file in files:
            path_obj = Path(key_file)
            blob = _public_blob(path_obj)
            if blob is not None and blob in by_blob:
                if by_blob[blob] not in in_agent:
                    in_agent.append(by_blob[blob])
                found.files.append(key_file)
                continue
            if not path_obj.exists():
                if explicit:
                    found.missing.append(key_file)
                continue
            try:
                from_files.append(_load_file(who, key_file))
            except BoxError:
                if explicit:
                    raise
                continue  # a default key that cannot be used is skipped, as ssh does
            found.files.append(key_file)
    except BaseException:
        found.close()
        raise
    others = [] if hop.identities_only else [k for k in agent_keys if k not in in_agent]
    found.keys = [*in_agent, *others, *from_files]
    found.agent_keys = len(in_agent) + len(others)
    if not found.keys and found.missing:
        found.close()
        raise BoxError(Connection.AUTH_FAILED,
                       f"{who}: identity file {found.missing[0]} does not exist"
                       + ("" if path is None else " and the agent holds no usable key"))
    return found
