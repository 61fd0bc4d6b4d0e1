"""Where gpurent-tui keeps its files (XDG base directories, on every platform)."""

from __future__ import annotations

import os
from pathlib import Path

APP = "gpurent-tui"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    base = Path(value) if value and os.path.isabs(value) else Path.home() / fallback
    return base / APP


def config_dir() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config")


def data_dir() -> Path:
    """Pinned host keys (`accept-new`) live here."""
    return _xdg("XDG_DATA_HOME", ".local/share")


def state_dir() -> Path:
    """Ledger and journal live here."""
    return _xdg("XDG_STATE_HOME", ".local/state")


def cache_dir() -> Path:
    """What can be rebuilt: the tar `stage` packs before uploading it."""
    return _xdg("XDG_CACHE_HOME", ".cache")


def default_config_path() -> Path:
    return config_dir() / "fleet.toml"


def locate_config(explicit: str | None) -> Path:
    """--config PATH, else $GPURENT_CONFIG, else ~/.config/gpurent-tui/fleet.toml."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("GPURENT_CONFIG")
    if env:
        return Path(env).expanduser()
    return default_config_path()


def pinned_known_hosts() -> Path:
    return data_dir() / "known_hosts"
