"""The fleet config as every command reads it, and one box of it by name."""

from __future__ import annotations

from tui.model.config import BoxConfig, ConfigError, ConfigProblem, FleetConfig
from tui.runtime.config_file import load_config
from tui.store import paths


def load_fleet(explicit: str | None) -> FleetConfig:
    """Find, read and validate the fleet config; ConfigError says what is wrong where."""
    path = paths.locate_config(explicit)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "" if explicit else " (run `gpurent-tui init` to write an example)"
        raise ConfigError([ConfigProblem(str(path), f"no such file{hint}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), f"cannot read: {exc}")]) from None
    return load_config(text, str(path))


def box_named(fleet: FleetConfig, name: str) -> BoxConfig:
    """The config's box of that name; a ConfigError (exit 2) naming the known ones if none."""
    try:
        return fleet.box(name)
    except KeyError as exc:
        raise ConfigError([ConfigProblem(fleet.source, str(exc.args[0]))]) from None
