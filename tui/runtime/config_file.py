"""The fleet config file, looked at every few seconds while the runtime runs.

A stat (mtime, size) each look, the bytes read and hashed only when it moved:
cheap, and true over any filesystem (no inotify on a network mount). Each
distinct content is judged once: a valid one is handed back to apply, an
invalid one (a typo, or an editor's save caught half-written) is reported once
and the config in force is kept; the same bytes again say nothing new.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePath

from tui.model.config import ConfigError, ConfigProblem, FleetConfig, parse_config
from tui.model.lint import MAX_BYTES
from tui.model.serverless_script import ScriptRead, with_scripts

CONFIG_POLL_SECONDS = 3.0


@dataclass(frozen=True)
class Reloaded:
    """A new valid content of the file."""

    fleet: FleetConfig


@dataclass(frozen=True)
class Refused:
    """A new content that is not a valid config: why, one problem a line."""

    error: ConfigError


def read_script(path: PurePath) -> ScriptRead:
    """A [[serverless]] entry's script: its bytes (one past lint's limit at most, so a
    huge file is said too large, not read whole), or why it could not be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return f"no such file ({path})"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"


def load_config(text: str, source: str) -> FleetConfig:
    """parse_config, then each [[serverless]] entry's script read (its timeout=)."""
    return with_scripts(parse_config(text, source), read_script)


class ConfigFile:
    """Which content of the config file was judged last (by stat, then by hash)."""

    def __init__(self, path: Path, text: str | None = None) -> None:
        self.path = path
        self._stat = self._look()
        if text is None:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
        self._digest = hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _look(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def check(self) -> Reloaded | Refused | None:
        """What changed since the last check: None when no new content."""
        look = self._look()
        if look == self._stat:
            return None
        self._stat = look
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError as exc:
            return self._judged(f"unreadable:{exc}".encode(), Refused(ConfigError([
                ConfigProblem(str(self.path), f"cannot read: {exc}; the config in force "
                              "is kept")])))
        if data is None:
            return self._judged(b"\0missing", Refused(ConfigError([ConfigProblem(
                str(self.path), "the file is gone; the config in force is kept")])))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self._judged(data, Refused(ConfigError([ConfigProblem(
                str(self.path), f"not UTF-8 ({exc.reason}); the config in force is kept")])))
        try:
            fleet = load_config(text, str(self.path))
        except ConfigError as exc:
            return self._judged(data, Refused(exc))
        return self._judged(data, Reloaded(fleet))

    def _judged(self, data: bytes, verdict: Reloaded | Refused) -> Reloaded | Refused | None:
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._digest:
            return None  # touched, or saved back as it was: nothing new to say
        self._digest = digest
        return verdict
