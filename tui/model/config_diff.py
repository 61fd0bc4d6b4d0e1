"""What changed between two fleet configs, in words, and which boxes must be watched anew.

Pure. The runtime reloads the config file while it runs (tui/runtime/config_file.py):
every change applies live, and is journaled as one line a person reads back
("config reloaded: box-c rate 1.20 → 1.50"). A box whose way in changed (host,
port, user, key, jump host, timeout) gets a new watcher; the rest keep theirs.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tui.model.config import BoxConfig, FleetConfig, Pricing

# What a box's SSH session is made of: a change restarts its watcher.
CONNECTION_KEYS = ("host", "port", "user", "identity_file", "jump", "timeout_seconds",
                   "runs_roots")
# Fleet keys whose change restarts every watcher (each session reads them).
FLEET_CONNECTION_KEYS = ("host_keys", "known_hosts", "ssh_config", "timeout_seconds")
# Said as "changed", never quoted: a command line or a webhook URL may carry a secret.
COMMANDS = ("stop_command", "destroy_command", "observe_command")
# Named in words of their own, before the rest, in this order.
_NAMED = {"budget_usd": "budget", "idle_minutes": "idle alarm minutes",
          "on_budget": "on_budget", "refresh_seconds": "refresh seconds"}


def _money(value: object) -> str:
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:.2f}"
    return "none" if value is None else str(value)


def _plain(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def _rate(box: BoxConfig) -> float | None:
    return box.pricing.running_usd_per_hr if box.pricing is not None else None


def _dataclass_changes(prefix: str, old: Any, new: Any, skip: tuple[str, ...] = (),
                       secret: tuple[str, ...] = ()) -> list[str]:
    """`prefix key old → new` for each field that differs (a secret's value never shown)."""
    if old == new:
        return []
    if old is None or new is None:
        return [f"{prefix} {'added' if old is None else 'removed'}".strip()]
    words = []
    for f in fields(old):
        if f.name in skip:
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a == b:
            continue
        if f.name in secret:
            words.append(f"{prefix} {f.name} changed".strip())
        else:
            words.append(f"{prefix} {f.name} {_plain(a)} → {_plain(b)}".strip())
    return words


def box_changes(old: BoxConfig, new: BoxConfig) -> list[str]:
    """One box's changes in words: its rate and budget first, then every other key."""
    name = new.name
    words = []
    if _rate(old) != _rate(new):
        words.append(f"{name} rate {_money(_rate(old))} → {_money(_rate(new))}")
    if old.budget_usd != new.budget_usd:
        words.append(f"{name} budget {_money(old.budget_usd)} → {_money(new.budget_usd)}")
    words += _dataclass_changes(f"{name} pricing", old.pricing or Pricing(),
                                new.pricing or Pricing(), skip=("running_usd_per_hr",))
    words += _dataclass_changes(f"{name} push", old.push, new.push)
    words += _dataclass_changes(name, old, new, skip=("name", "budget_usd", "pricing", "push"),
                                secret=COMMANDS)
    return words


def config_changes(old: FleetConfig, new: FleetConfig) -> list[str]:
    """Every difference between `old` and `new`, in words (empty: nothing that matters)."""
    words: list[str] = []
    before = {b.name: b for b in old.boxes}
    after = {b.name: b for b in new.boxes}
    for name in after:
        if name not in before:
            words.append(f"box {name} added ({after[name].host})")
    for name in before:
        if name not in after:
            words.append(f"box {name} removed")
    for name, box in after.items():
        if name in before:
            words += box_changes(before[name], box)
    for key, label in _NAMED.items():
        a, b = getattr(old, key), getattr(new, key)
        if a != b:
            shown = _money if key == "budget_usd" else _plain
            words.append(f"fleet {label} {shown(a)} → {shown(b)}")
    words += _dataclass_changes("alerts", old.alerts, new.alerts,
                                secret=("webhook", "command"))
    words += _dataclass_changes("connect", old.connect, new.connect)
    words += serverless_changes(old, new)
    words += _dataclass_changes("fleet", old, new,
                                skip=("source", "boxes", "alerts", "connect", "serverless",
                                      *_NAMED))
    return words


def serverless_changes(old: FleetConfig, new: FleetConfig) -> list[str]:
    """The [[serverless]] entries added, removed or changed, in words."""
    before = {e.name: e for e in old.serverless}
    after = {e.name: e for e in new.serverless}
    words = [f"serverless {name} added ({after[name].provider} app {after[name].app})"
             for name in after if name not in before]
    words += [f"serverless {name} removed" for name in before if name not in after]
    for name, entry in after.items():
        if name in before:
            words += _dataclass_changes(f"serverless {name}", before[name], entry,
                                        skip=("name",))
    return words


def needs_restart(old: FleetConfig, new: FleetConfig) -> list[str]:
    """The changed keys that take effect only when the panel or `watch` starts again: the
    key bindings (set on the panel at its start), the provider API URLs and the provider
    requests at once (its clients are made once). The handshake limits apply live."""
    later = [key for key in ("keys", "providers") if getattr(old, key) != getattr(new, key)]
    if old.connect.per_provider != new.connect.per_provider:
        later.append("connect.per_provider")
    return later


def rewatch(old: FleetConfig, new: FleetConfig) -> tuple[set[str], set[str], set[str]]:
    """(added, removed, reconnect): the boxes to start watching, to stop watching, and
    those whose watcher must start again because the way in to them changed."""
    before = {b.name: b for b in old.boxes}
    after = {b.name: b for b in new.boxes}
    added = set(after) - set(before)
    removed = set(before) - set(after)
    fleetwide = any(getattr(old, k) != getattr(new, k) for k in FLEET_CONNECTION_KEYS)
    reconnect = {n for n in set(after) & set(before)
                 if fleetwide or any(getattr(before[n], k) != getattr(after[n], k)
                                     for k in CONNECTION_KEYS)}
    return added, removed, reconnect
