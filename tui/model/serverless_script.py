"""A [[serverless]] entry's `script =`: the Modal/Beam script's own `timeout=`, read with
`lint`'s facts, stands in for the config's `timeout` when that is not given; a config
timeout that disagrees with the script's literal is warned of; a script that sets none
is the guide's problem on the entry. Pure: the I/O layer reads the script's bytes
(tui.runtime.config_file.with_scripts) and passes them in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePath

from tui.model.config import FleetConfig, ServerlessConfig
from tui.model.lint import MAX_BYTES, LintError, gpu_timeouts

NO_TIMEOUT = "no timeout=: a hung run bills forever"

# What reading a script gave: its bytes, or the words of why it could not be read.
ScriptRead = bytes | str


def script_path(config_source: str, script: str) -> PurePath:
    """The script's path: as written when absolute, else beside the config file."""
    path = PurePath(script)
    return path if path.is_absolute() else PurePath(config_source).parent / path


def with_script(entry: ServerlessConfig, read: ScriptRead) -> ServerlessConfig:
    """The entry with its script's timeout facts; its `timeout` the script's literal when
    the config gives none."""
    if isinstance(read, str):
        return replace(entry, script_note=f"script {entry.script}: {read}")
    if len(read) > MAX_BYTES:
        return replace(entry, script_note=f"script {entry.script}: too large "
                       f"({len(read)} bytes, at most {MAX_BYTES})")
    try:
        found = gpu_timeouts(read)
    except LintError as exc:
        return replace(entry, script_note=f"script {entry.script}: {exc}")
    if not found:
        return replace(entry, script_note=f"script {entry.script}: no Modal or Beam GPU "
                       "function found")
    if any(f.unbounded for f in found):
        bare = next(f for f in found if f.unbounded)
        return replace(entry, script_unbounded=True,
                       script_note=f"script {entry.script}: `{bare.function}` sets "
                       f"{NO_TIMEOUT}")
    literals = {f.seconds for f in found}
    if None in literals:
        return replace(entry, script_note=f"script {entry.script}: the GPU function's "
                       "timeout= is not a number without running the script: set `timeout` in "
                       "the config")
    if len(literals) > 1:
        words = ", ".join(f"{f.function}: {f.seconds:g}" for f in found)
        return replace(entry, script_note=f"script {entry.script}: its GPU functions' "
                       f"timeouts differ ({words}): set `timeout` in the config")
    seconds = found[0].seconds
    if entry.timeout is None:
        return replace(entry, timeout=seconds, timeout_from="script", script_timeout=seconds)
    return replace(entry, script_timeout=seconds)


def with_scripts(fleet: FleetConfig, read: Callable[[PurePath], ScriptRead]) -> FleetConfig:
    """Every entry that names a script, given what `read` read of it."""
    if not any(e.script for e in fleet.serverless):
        return fleet
    return replace(fleet, serverless=tuple(
        with_script(e, read(script_path(fleet.source, e.script))) if e.script else e
        for e in fleet.serverless))


def script_warnings(entry: ServerlessConfig) -> list[str]:
    """What `check-config` warns of for the entry's script (the config stays valid)."""
    out = []
    if entry.script_note:
        out.append(entry.script_note)
    if entry.timeout_from == "config" and entry.script_timeout is not None \
            and entry.timeout != entry.script_timeout:
        out.append(f"timeout = {entry.timeout:g} but script {entry.script} says "
                   f"timeout={entry.script_timeout:g}: the provider kills at the script's; "
                   "the countdown follows the config's")
    return out


def entry_problems(entry: ServerlessConfig) -> list[str]:
    """The entry's own problems for status and the panel: the guide's no-timeout rule."""
    return [NO_TIMEOUT] if entry.script_unbounded else []
