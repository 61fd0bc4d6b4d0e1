"""Shared fixtures: real sshd servers on 127.0.0.1, a client key, and fleets that use them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.sshd import KeyPair, Sshd, make_keypair


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the panel's own files (pinned keys, ledger) and any agent out of the user's home."""
    home = tmp_path / "xdg"
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                     ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")):
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


LAYER_MARKERS = ("unit", "io", "ui", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test is marked by its folder: `pytest -m unit` runs the pure tests alone."""
    for item in items:
        folder = item.path.parent.name
        if folder in LAYER_MARKERS:
            item.add_marker(getattr(pytest.mark, folder))
