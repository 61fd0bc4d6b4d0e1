"""Fleets as a user would write them: a fleet.toml over test servers, recorded runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.sshd import KeyPair, Sshd
from tui.model.config import FleetConfig, parse_config

DATA = Path(__file__).resolve().parents[1] / "data" / "libreyolo"


def runs_root_with(tmp_path: Path, *fixtures: str, name: str = "runs") -> Path:
    """A runs root holding copies of recorded LibreYOLO runs."""
    root = tmp_path / name
    root.mkdir(exist_ok=True)
    for fixture in fixtures:
        shutil.copytree(DATA / fixture, root / fixture)
    return root


def toml_value(value: Any) -> str:
    """JSON scalars and arrays are valid TOML; tables become inline tables."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def make_fleet(tmp_path: Path, boxes: list[dict[str, Any]], *, known_hosts: Sequence[str] = (),
               **top: Any) -> FleetConfig:
    """Write known_hosts and a fleet.toml the way a user would, and load it."""
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(line + "\n" for line in known_hosts))
    settings = {"known_hosts": str(kh), "ssh_config": "", "refresh_seconds": 1,
                "timeout_seconds": 10, **top}
    lines = [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    for box in boxes:
        lines.append("[[box]]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in box.items())
    path = tmp_path / "fleet.toml"
    path.write_text("\n".join(lines) + "\n")
    return parse_config(path.read_text(), str(path))


def box_entry(server: Sshd, key: KeyPair, name: str = "box", **extra: Any) -> dict[str, Any]:
    return {"name": name, "host": "127.0.0.1", "port": server.port, "user": "root",
            "identity_file": str(key.private_path), **extra}
