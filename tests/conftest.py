"""Shared fixtures: real sshd servers on 127.0.0.1, a client key, and fleets that use them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sshd import KeyPair, Sshd, make_keypair

from tui.model.config import FleetConfig, parse_config

DATA = Path(__file__).parent / "data" / "libreyolo"


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the panel's own files (pinned keys, ledger) and any agent out of the user's home."""
    home = tmp_path / "xdg"
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                     ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("GPURENT_CONFIG", raising=False)
    return home


@pytest.fixture(scope="session")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return make_keypair(tmp_path_factory.mktemp("client"), "id_ed25519")


@pytest.fixture
def sshd_factory(tmp_path: Path, client_key: KeyPair) -> Iterator[Callable[..., Sshd]]:
    """Start real sshd processes; every one is stopped (sessions included) at teardown."""
    started: list[Sshd] = []

    def start(name: str = "box", *, authorized: Sequence[str] | None = None,
              env: dict[str, str] | None = None, **options: Any) -> Sshd:
        # Sessions get an empty HOME, as on a fresh rented box: this machine's
        # own ~/.bashrc (sourced by bash for ssh commands) must not slow or
        # block them.
        server = Sshd(tmp_path / f"sshd-{name}",
                      authorized if authorized is not None else [client_key.public_line],
                      home=tmp_path / f"home-{name}", env=env, **options)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


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
