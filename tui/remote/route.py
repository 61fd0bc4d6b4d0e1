"""From a box in the fleet config to the chain of SSH hops that reaches it.

The user's ssh config is honoured the way `ssh` honours it (Host aliases with
HostName, Port, User, IdentityFile, ProxyJump), but the hops are opened by us,
one by one, so that every hop gets the panel's host-key policy, keys and
timeouts rather than whatever defaults a library would pick.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, replace
from pathlib import Path

from asyncssh.config import SSHClientConfig

from tui.model.config import BoxConfig, FleetConfig

MAX_JUMPS = 8


class RouteError(ValueError):
    """The box's address, jump chain or ssh config cannot be used."""


@dataclass(frozen=True)
class Hop:
    """One SSH server on the way: the box itself is the last hop."""

    label: str
    host: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()

    @property
    def known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def ssh_config_paths(fleet: FleetConfig) -> list[Path]:
    """The ssh config files to read: the configured one, else ~/.ssh/config if present."""
    if fleet.ssh_config == "":
        return []
    if fleet.ssh_config is not None:
        path = Path(fleet.ssh_config).expanduser()
        if not path.is_file():
            raise RouteError(f"ssh_config {fleet.ssh_config!r} does not exist")
        return [path]
    default = Path("~/.ssh/config").expanduser()
    return [default] if default.is_file() else []


def _lookup(alias: str, paths: list[Path]) -> dict[str, object]:
    if not paths:
        return {}
    try:
        config = SSHClientConfig.load(None, paths, False, False, False,
                                      getpass.getuser(), (), alias, ())
    except Exception as exc:  # asyncssh raises its own ConfigParseError and OSError
        raise RouteError(f"cannot read ssh config: {exc}") from exc
    keys = ("Hostname", "Port", "User", "IdentityFile", "ProxyJump")
    return {k: config.get(k) for k in keys if config.get(k) is not None}


def split_spec(spec: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (or `[user@][v6addr]:port`) into its parts."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port: int | None = None
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = _port(rest[1:], spec)
    elif spec.count(":") == 1:
        host, port_text = spec.split(":")
        port = _port(port_text, spec)
    else:
        host = spec
    if not host:
        raise RouteError(f"no host in {spec!r}")
    return user or None, host, port


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise RouteError(f"bad port in {spec!r}")
    return int(text)


def _hop(label: str, alias: str, user: str | None, port: int | None,
         identity: tuple[str, ...], paths: list[Path], depth: int) -> list[Hop]:
    found = _lookup(alias, paths)
    host = str(found.get("Hostname") or alias)
    hop = Hop(
        label=label,
        host=host,
        port=port or int(found.get("Port") or 22),  # type: ignore[call-overload]
        user=user or str(found.get("User") or getpass.getuser()),
        identity_files=identity or tuple(
            os.path.expanduser(str(p)) for p in found.get("IdentityFile") or ()),  # type: ignore[attr-defined]
    )
    proxy = found.get("ProxyJump")
    chain = _jumps(str(proxy), paths, depth + 1) if proxy and str(proxy) != "none" else []
    return [*chain, hop]


def _jumps(spec: str, paths: list[Path], depth: int) -> list[Hop]:
    if depth > MAX_JUMPS:
        raise RouteError(f"jump chain longer than {MAX_JUMPS} hops (a ProxyJump loop?)")
    hops: list[Hop] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise RouteError(f"empty hop in jump chain {spec!r}")
        if part.startswith("ssh://"):
            part = part[len("ssh://"):]
        user, host, port = split_spec(part)
        hops.extend(_hop(part, host, user, port, (), paths, depth))
    return hops


def resolve_route(box: BoxConfig, fleet: FleetConfig) -> list[Hop]:
    """Every hop to reach `box`, jump hosts first, the box last.

    An explicit `jump` replaces any ProxyJump the ssh config gives the host.
    """
    paths = ssh_config_paths(fleet)
    identity = (os.path.expanduser(box.identity_file),) if box.identity_file else ()
    target = _hop(box.host, box.host, box.user, box.port, identity, paths, 0)
    hops = [*_jumps(box.jump, paths, 1), target[-1]] if box.jump is not None else target
    # A jump host with no key of its own (from the ssh config) is tried with
    # the box's key: one key for the whole route is the common setup.
    return [h if h.identity_files or h is hops[-1] else replace(h, identity_files=identity)
            for h in hops]
