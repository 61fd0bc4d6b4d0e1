"""From a box in the fleet config to the chain of SSH hops that reaches it.

The user's ssh config is honoured the way `ssh` honours it: `Include`, `Host`
patterns with wildcards and negation, `Match host`/`Match user` (and the other
criteria asyncssh's parser knows), first value wins; from it HostName, Port,
User, IdentityFile, IdentitiesOnly, IdentityAgent, ProxyJump and
ServerAliveInterval/ServerAliveCountMax (keepalives). The hops are opened by
us, one by one, so that every hop gets the panel's host-key policy and
timeouts rather than whatever defaults a library would pick.

Left out on purpose: ForwardAgent (a rented box is a stranger's machine; the
agent is used locally for every hop, never lent to a box). ProxyCommand is not
run either (a local command per box, outside the panel's host-key policy and
timeouts); a host the config reaches through one is refused in words rather
than dialled directly, unless the fleet's `jump` replaces it as `ssh -J` would.
"""

from __future__ import annotations

import getpass
import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from asyncssh.config import SSHClientConfig

from tui.model.config import BoxConfig, FleetConfig
from tui.model.fields import whole

MAX_JUMPS = 8
KEEPALIVE_SECONDS = 15  # when the ssh config sets no ServerAliveInterval
KEEPALIVE_COUNT = 3
_UNSET = object()


class RouteError(ValueError):
    """The box's address, jump chain or ssh config cannot be used."""


@dataclass(frozen=True)
class Hop:
    """One SSH server on the way: the box itself is the last hop."""

    label: str = field(compare=False)  # how the user wrote it: words only, not identity
    host: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    identity_agent: str | None = None  # None: $SSH_AUTH_SOCK; "none": no agent
    keepalive_interval: float = KEEPALIVE_SECONDS
    keepalive_count: int = KEEPALIVE_COUNT

    @property
    def known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def ssh_destination(hops: list[Hop]) -> str:
    """The `ssh` arguments that reach the last of `hops` through the ones before it,
    ready to paste (advice that runs a command there, e.g. ssh-keyscan)."""
    last = hops[-1]
    jumps = ",".join(f"{h.user}@{h.host}:{h.port}" for h in hops[:-1])
    target = shlex.quote(f"{last.user}@{last.host}")
    return (f"-J {shlex.quote(jumps)} " if jumps else "") + f"-p {last.port} {target}"


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


OPTIONS = ("Hostname", "Port", "User", "IdentityFile", "ProxyJump", "IdentitiesOnly",
           "IdentityAgent", "ServerAliveInterval", "ServerAliveCountMax", "ProxyCommand")
PROXY_COMMAND_FIX = "ProxyCommand is not supported; use ProxyJump or the box's `jump` key"


def _lookup(alias: str, paths: list[Path], user: str | None,
            port: int | None) -> dict[str, object]:
    """The options the ssh config gives `alias`. A user or port the fleet config sets
    counts as given on the command line: it wins, and `Match user` sees it."""
    if not paths:
        return {}
    try:
        config = SSHClientConfig.load(None, paths, False, False, False, getpass.getuser(),
                                      user if user else (), alias, port if port else ())
        if config.has_match_final():  # `Match final` blocks apply on a second pass
            config = SSHClientConfig.load(None, paths, False, False, True, getpass.getuser(),
                                          user if user else (), alias, port if port else ())
    except Exception as exc:  # asyncssh raises its own ConfigParseError and OSError
        raise RouteError(f"cannot read ssh config: {exc}") from exc
    found = {k: config.get(k, _UNSET) for k in OPTIONS}
    return {k: v for k, v in found.items() if v is not _UNSET}


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
         identity: tuple[str, ...], paths: list[Path], depth: int,
         jump_given: bool = False) -> list[Hop]:
    found = _lookup(alias, paths, user, port)
    if found.get("ProxyCommand") and not jump_given:  # `ProxyCommand none` reads None
        # Its text is not repeated: a proxy's command line may carry a token.
        raise RouteError(f"the ssh config reaches {alias} through a ProxyCommand: "
                         f"{PROXY_COMMAND_FIX}")
    listed = found.get("IdentityFile")
    configured = tuple(os.path.expanduser(str(p)) for p in listed) \
        if isinstance(listed, list | tuple) else ()
    agent = found.get("IdentityAgent", _UNSET)
    interval = found.get("ServerAliveInterval")
    count = found.get("ServerAliveCountMax")
    hop = Hop(
        label=label,
        host=str(found.get("Hostname") or alias),
        port=port or whole(found.get("Port"), from_text=True) or 22,
        user=user or str(found.get("User") or getpass.getuser()),
        # Like `ssh -i`: the fleet's identity first, then the config's.
        identity_files=tuple(dict.fromkeys((*identity, *configured))),
        identities_only=found.get("IdentitiesOnly") is True,
        identity_agent=None if agent is _UNSET else ("none" if agent is None else str(agent)),
        keepalive_interval=float(interval) if isinstance(interval, int) else KEEPALIVE_SECONDS,
        keepalive_count=count if isinstance(count, int) and count > 0 else KEEPALIVE_COUNT,
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
    target = _hop(box.host, box.host, box.user, box.port, identity, paths, 0,
                  jump_given=box.jump is not None)
    hops = [*_jumps(box.jump, paths, 1), target[-1]] if box.jump is not None else target
    # A jump host with no key of its own (from the ssh config) is tried with
    # the box's key: one key for the whole route is the common setup.
    return [h if h.identity_files or h is hops[-1] else replace(h, identity_files=identity)
            for h in hops]
