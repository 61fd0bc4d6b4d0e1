"""`stage` and `fetch` against the loopback Hub and a real sshd box: a deterministic tar,
verified by sha256 on both ends, the token on stdin only, hostile tars refused before a byte
is written, a corrupted download dropped, and a box that lies about what it fetched."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import sys
import tarfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest
from support.box_python import make_venv
from support.fleets import box_entry, make_fleet
from support.hub_server import HubServer, StoredFile
from support.libreyolo_train import make_dataset
from support.sshd import KeyPair, Sshd
from support.token_box import received_text, recording_python

from tui.__main__ import main
from tui.actions.stage import StageError, TokenConsent, collect, fetch, pack, stage
from tui.model.config import FleetConfig
from tui.model.sizing import human_bytes
from tui.onbox import fetch as onbox_fetch
from tui.store.journal import Journal

TOKEN = "hf_SeCrEtTokenForTheStageTest0123456789"
REPO = "me/shapes"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(autouse=True)
def no_xet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback Hub speaks LFS, not Xet: this process uploads the LFS way."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture
def hub() -> HubServer:
    with HubServer([], token=TOKEN) as server:
        yield server


def dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "shapes"
    make_dataset(folder)
    (folder / "notes").mkdir()
    (folder / "notes" / "README.txt").write_text("two classes\n")
    (folder / "linked.txt").symlink_to(Path("notes") / "README.txt")  # a link inside: fine
    return folder


def put_tar(hub: HubServer, repo: str, name: str, data: bytes) -> None:
    """A tar placed on the Hub directly (a hostile one: stage would never make it)."""
    key = f"datasets/{repo}"
    hub.state.repos.setdefault(key, {})[name] = StoredFile(data, True)
    hub.state.heads[key] = "ab" * 20


# -- stage --------------------------------------------------------------------------------

def test_the_tar_is_deterministic_and_sorted(tmp_path: Path) -> None:
    folder = dataset(tmp_path)
    entries, notes = collect(folder)
    names = [e.arcname for e in entries]
    assert names[0] == "shapes" and "shapes/linked.txt" in names and notes == []
    first = pack(entries, tmp_path / "a.tar")
    os.utime(folder / "data.yaml", (1, 1))  # times do not matter
    second = pack(collect(folder)[0], tmp_path / "b.tar")
    assert first == second and first[0] == (tmp_path / "a.tar").stat().st_size
    assert first[1] == hashlib.sha256((tmp_path / "a.tar").read_bytes()).hexdigest()
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == names
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)
    linked = next(m for m in members if m.name == "shapes/linked.txt")
    assert linked.isreg() and linked.size == len("two classes\n")  # the link's content


def test_stage_uploads_privately_and_verifies(tmp_path: Path, hub: HubServer,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = dataset(tmp_path)
    steps: list[tuple[str, int, int]] = []
    report = stage(folder, REPO, progress=lambda *a: steps.append(a))
    assert report.verified and report.exit_code == 0, report.message
    stored = hub.state.repos[f"datasets/{REPO}"]["shapes.tar"]
    assert stored.lfs and stored.sha256 == report.sha256 and len(stored.data) == report.size
    assert hub.state.private[f"datasets/{REPO}"] is True
    assert "private" in report.message
    assert report.files == sum(1 for p in folder.rglob("*") if p.is_file()) == 51
    assert steps[-1] == ("upload", report.size, report.size)
    assert any(step == "pack" for step, _, _ in steps)
    assert not list((tmp_path / "xdg" / "cache").rglob("*.tar"))  # removed once verified
    puts = sum(r.startswith("PUT") for r in hub.state.requests)
    code = main(["stage", str(folder), "--repo", REPO])
    out = capsys.readouterr().out
    assert code == 0 and "staged as shapes.tar" in out
    assert sum(r.startswith("PUT") for r in hub.state.requests) == puts  # same bytes: no upload
    assert TOKEN not in out


def test_stage_with_a_refused_token_keeps_the_tar(tmp_path: Path, hub: HubServer) -> None:
    folder = dataset(tmp_path)
    report = stage(folder, REPO, endpoint=hub.url, token=TOKEN + "x")
    assert not report.verified and report.exit_code == 1
    assert "the Hub refused the token" in report.message and TOKEN not in report.message
    kept = tmp_path / "xdg" / "cache" / "gpurent-tui" / "stage" / "shapes.tar"
    assert kept.is_file() and str(kept) in report.message
    with pytest.raises(StageError, match="is not a Hugging Face repo id"):
        stage(folder, "../evil", endpoint=hub.url, token=TOKEN)
    with pytest.raises(StageError, match="is not a folder"):
        stage(tmp_path / "nope", REPO, endpoint=hub.url, token=TOKEN)


def test_a_link_out_of_the_data_set_is_refused_unless_followed_on_purpose(
        tmp_path: Path, hub: HubServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A linked `../secrets.env` would go to the Hub with the data: stage names each link
    out of the folder and uploads nothing, unless --follow-outside says to pack them."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = dataset(tmp_path)
    (tmp_path / "secrets.env").write_text("WANDB_API_KEY=not-for-the-hub\n")
    (folder / "secrets.env").symlink_to(Path("..") / "secrets.env")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "more.txt").write_text("more\n")
    (folder / "notes" / "away").symlink_to(tmp_path / "other")  # a folder out, deeper
    with pytest.raises(StageError) as refused:
        stage(folder, REPO)
    words = str(refused.value)
    assert f"{folder}/secrets.env -> ../secrets.env ({tmp_path}/secrets.env)" in words
    assert f"{folder}/notes/away -> {tmp_path}/other" in words
    assert "--follow-outside" in words and "2 links" in words
    assert hub.state.requests == []  # nothing uploaded, not even a repo made
    code = main(["stage", str(folder), "--repo", REPO])
    err = capsys.readouterr().err
    assert code == 2 and "secrets.env -> ../secrets.env" in err
    assert hub.state.requests == []
    report = stage(folder, REPO, follow_outside=True)
    assert report.verified, report.message
    with tarfile.open(fileobj=io.BytesIO(hub.state.repos[f"datasets/{REPO}"]["shapes.tar"]
                                         .data)) as tar:
        names = tar.getnames()
    assert "shapes/secrets.env" in names and "shapes/notes/away/more.txt" in names
    code = main(["stage", str(folder), "--repo", REPO, "--follow-outside"])
    assert code == 0, capsys.readouterr().err


# -- fetch ----------------------------------------------------------------------------------

def python_with_hub(tmp_path: Path) -> Path:
    """This test run's interpreter (it has huggingface_hub), as a box's `python`."""
    wrapper = tmp_path / "box-bin" / "python"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def box_fleet(tmp_path: Path, sshd_factory: Callable[..., Sshd],
              client_key: KeyPair) -> Callable[..., FleetConfig]:
    def make(python: Path | None = None, **extra: object) -> FleetConfig:
        server = sshd_factory("box", env={"PATH": SYSTEM_PATH, "HF_HUB_DISABLE_XET": "1"})
        entry = box_entry(server, client_key, python=str(python or python_with_hub(tmp_path)),
                          **extra)
        return make_fleet(tmp_path, [entry], known_hosts=[server.known_hosts_line()])

    return make


async def test_fetch_downloads_on_the_box_verifies_and_unpacks(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig],
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = dataset(tmp_path)
    staged = stage(folder, REPO, endpoint=hub.url, token=TOKEN)
    assert staged.verified
    sent: list[tuple[object, ...]] = []
    real = asyncssh.SSHClientConnection.create_process

    async def recording(self: asyncssh.SSHClientConnection, *args: object,
                        **kwargs: object) -> object:
        sent.append((args, kwargs))
        return await real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncssh.SSHClientConnection, "create_process", recording)
    fleet = box_fleet(persistent=str(tmp_path / "volume"))
    steps: list[str] = []
    journal = Journal()
    report = await fetch(fleet, fleet.boxes[0], REPO, journal=journal, endpoint=hub.url,
                         token=TOKEN, progress=lambda step, done, total: steps.append(step),
                         confirmed=True)
    assert report.verified and report.exit_code == 0, report.message
    dest = tmp_path / "volume" / "data"
    assert report.dest == str(dest)
    for path in folder.rglob("*"):
        if path.is_file():
            assert (dest / "shapes" / path.relative_to(folder)).read_bytes() == \
                path.read_bytes()
    assert report.bytes == staged.size and report.members == len(collect(folder)[0])
    assert "sha256 equal to the Hub's" in report.message and "unpacked into" in report.message
    assert "the tar was deleted" in report.message
    home = tmp_path / "home-box"
    assert not [p for p in home.rglob("*.tar") if p.exists()]
    entry = journal.entries[-1]
    assert entry["action"] == "fetch" and entry["verified"] and entry["outcome"] == "done"
    assert entry["files"][0]["sha256"] == staged.sha256
    assert TOKEN not in json.dumps(journal.entries) and TOKEN not in report.message
    assert f"Bearer {TOKEN}" in hub.state.authorizations  # the box used the token...
    assert sent and all(TOKEN not in repr(args) + repr(kwargs) for args, kwargs in sent)
    assert all(args[0].endswith("/python -") for args, _ in sent)  # ...from stdin only


def test_the_fetch_command_reports_bytes_and_time(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpurent-tui fetch BOX ORG/NAME --to PATH [--json]`: the whole command, as typed."""
    staged = stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    fleet = box_fleet()
    dest = tmp_path / "landed"
    code = main(["--config", fleet.source, "fetch", "box", REPO, "--to", str(dest), "--json",
                 "--yes"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["schema"] == "gpurent.fetch/1" and doc["verified"], doc
    assert doc["bytes"] == staged.size and doc["dest"] == str(dest)
    assert doc["download_seconds"] >= 0 and doc["extract_seconds"] >= 0
    assert doc["members"] == len(collect(tmp_path / "shapes")[0])
    assert (dest / "shapes" / "data.yaml").is_file()
    code = main(["--config", fleet.source, "fetch", "box", REPO, "--to", str(dest)])
    out = capsys.readouterr().out  # asked once already (--yes): not again
    assert code == 0, out
    assert re.search(rf"^shapes\.tar \({re.escape(human_bytes(staged.size))}\) fetched onto "
                     r"box box in \d+\.\d s, [\d.]+ [KMG]?B/s, sha256 equal to the Hub's; "
                     r"51 files \(.+\) unpacked into .+ in \d+\.\d s", out), out
    assert TOKEN not in out


async def test_a_corrupted_download_is_not_verified_and_dropped(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig]) -> None:
    stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    hub.state.corrupt.add("shapes.tar")
    fleet = box_fleet()
    report = await fetch(fleet, fleet.boxes[0], REPO, dest=str(tmp_path / "data"),
                         endpoint=hub.url, token=TOKEN, confirmed=True)
    assert not report.verified and report.kind == "mismatch"
    assert "the download's sha256 differs from the Hub's" in report.message
    assert "dropped from the cache" in report.message
    assert not (tmp_path / "data").exists()
    blobs = list((tmp_path / "home-box").rglob("blobs/*"))
    assert blobs == []


def hostile_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name: str, kind: bytes = tarfile.REGTYPE, link: str = "",
                data: bytes = b"x") -> None:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = link
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add("ok/fine.txt")
        add("/tmp/absolute-evil")
        add("../up-evil")
        add("ok/../../up2-evil")
        add("ok/abs-link", tarfile.SYMTYPE, "/etc")
        add("ok/rel-link", tarfile.SYMTYPE, "../../outside")
        add("ok/hard-abs", tarfile.LNKTYPE, "/etc/passwd")
        add("ok/hard-up", tarfile.LNKTYPE, "../x")
        add("ok/fifo", tarfile.FIFOTYPE)
        add("ok/dev", tarfile.CHRTYPE)
        add("ok/\x1b[31mred")
    return buf.getvalue()


async def test_a_hostile_tar_is_refused_before_anything_is_written(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig]) -> None:
    put_tar(hub, REPO, "evil.tar", hostile_tar())
    fleet = box_fleet()
    dest = tmp_path / "data"
    report = await fetch(fleet, fleet.boxes[0], REPO, dest=str(dest), endpoint=hub.url,
                         token=TOKEN)
    assert not report.verified and report.kind == "unsafe"
    assert "10 member(s) refused; nothing was extracted" in report.message
    why = dict(line.split(": ", 1) for line in report.refused)
    assert why["/tmp/absolute-evil"] == "an absolute name"
    assert why["../up-evil"] == why["ok/../../up2-evil"] == "'..' in its name"
    assert why["ok/abs-link"] == "a symlink to an absolute path (/etc)"
    assert why["ok/rel-link"] == "a symlink out of the destination (../../outside)"
    assert why["ok/hard-abs"].startswith("a hard link out of the destination")
    assert why["ok/hard-up"].startswith("a hard link out of the destination")
    assert why["ok/fifo"] == why["ok/dev"] == "a device or fifo"
    assert "\x1b" not in "".join(report.refused) + report.message
    assert not dest.exists()
    assert not Path("/tmp/absolute-evil").exists() and not (tmp_path / "up-evil").exists()


def chained_links_tar() -> bytes:
    """Each link looks inside on its own; together they lead out (d -> ., d/e -> ..)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, link in (("d", "."), ("d/e", "..")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
        info = tarfile.TarInfo("d/e/escaped.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    return buf.getvalue()


async def test_links_that_lead_out_together_are_stopped_on_disk(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig]) -> None:
    put_tar(hub, REPO, "chain.tar", chained_links_tar())
    fleet = box_fleet()
    dest = tmp_path / "inner" / "data"
    report = await fetch(fleet, fleet.boxes[0], REPO, dest=str(dest), endpoint=hub.url,
                         token=TOKEN)
    assert not report.verified and report.kind == "unsafe"
    assert "symlink d/e would point outside the destination" in report.message
    assert not (tmp_path / "inner" / "escaped.txt").exists()
    assert not list(tmp_path.rglob("escaped.txt"))


def test_member_checks_on_their_own(tmp_path: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(hostile_tar())) as tar:
        problems = {m.name: onbox_fetch.member_problem(m, str(tmp_path)) for m in tar}
    assert problems["ok/fine.txt"] is None
    assert sum(p is not None for p in problems.values()) == 10


async def test_fetch_without_huggingface_hub_on_the_box(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig]) -> None:
    stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    fleet = box_fleet(python=make_venv(tmp_path / "bare"))
    report = await fetch(fleet, fleet.boxes[0], REPO, endpoint=hub.url, token=TOKEN,
                         confirmed=True)
    assert not report.verified and report.kind == "no_hub"
    assert report.message.startswith("huggingface_hub is not installed in the box's "
                                     "interpreter: pip install huggingface_hub there")


async def test_fetch_asks_which_tar_when_there_are_several(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig]) -> None:
    put_tar(hub, REPO, "a.tar", b"a" * 512)
    put_tar(hub, REPO, "b.tar", b"b" * 512)
    fleet = box_fleet()
    with pytest.raises(StageError, match=r"holds 2 tar files \(a.tar, b.tar\): name one"):
        await fetch(fleet, fleet.boxes[0], REPO, endpoint=hub.url, token=TOKEN)


LIAR = textwrap.dedent(r'''
    import json, re, sys
    stdin = sys.stdin.read()
    nonce = re.search(r"NONCE = '([0-9a-f]+)'", stdin).group(1)
    def frame(obj):
        data = json.dumps(obj).encode()
        sys.stdout.buffer.write(b"\n--gpurent-%s %d\n" % (nonce.encode(), len(data)) + data)
    frame({"progress": {"step": "download", "done": -5, "total": "lots"}})
    frame({"part": "fetch", "data": {"sha256": "Z" * 64 + "\x1b[2J", "bytes": -1,
           "dest": "/\x1b]0;owned\x07x", "download_s": 1e400, "members": 10**40}})
    frame({"done": True})
''')


async def test_a_lying_box_answer_is_not_believed(tmp_path: Path, hub: HubServer,
                                                  box_fleet: Callable[..., FleetConfig]) -> None:
    stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    liar = tmp_path / "liar"
    liar.write_text(f"#!{sys.executable}\n{LIAR}")
    liar.chmod(0o755)
    fleet = box_fleet(python=liar)
    steps: list[tuple[str, int, int]] = []
    report = await fetch(fleet, fleet.boxes[0], REPO, endpoint=hub.url, token=TOKEN,
                         progress=lambda *a: steps.append(a), confirmed=True)
    assert not report.verified
    assert "answered without a usable sha256 and size" in report.message
    assert report.dest == "/x" and report.members is None
    assert report.download_seconds is None and steps == []


# -- which token goes to the box (tui.model.token_rule) ------------------------------------

BOX_TOKEN = "hf_BoxScopedReadTokenForOneRepo987654"


async def test_fetch_sends_no_token_to_an_upload_from_panel_box(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """upload_from = "panel" means no token ever goes to that box: a public data set needs
    none; a private one is refused, saying why and what to do, before the box is asked."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = dataset(tmp_path)
    stage(folder, REPO, endpoint=hub.url, token=TOKEN)  # private
    python, received = recording_python(tmp_path)
    fleet = box_fleet(python=python, push={"hf_repo": "me/runs", "upload_from": "panel"})
    journal = Journal()
    with pytest.raises(StageError) as refused:
        await fetch(fleet, fleet.boxes[0], REPO, journal=journal, endpoint=hub.url,
                    dest=str(tmp_path / "private"), confirmed=True)
    words = str(refused.value)
    assert 'box box has upload_from = "panel"' in words and f"{REPO} is private" in words
    assert "Nothing was sent" in words and "token_env" in words, words
    assert received_text(received) == "" and not (tmp_path / "private").exists()
    stage(folder, "me/open-shapes", public=True, endpoint=hub.url, token=TOKEN)
    report = await fetch(fleet, fleet.boxes[0], "me/open-shapes", journal=journal,
                         endpoint=hub.url, dest=str(tmp_path / "open"))
    assert report.verified, report.message
    assert "fetch" in received_text(received) and TOKEN not in received_text(received)
    assert journal.entries[-1]["token_sent"] is None


async def test_fetch_sends_the_boxs_own_token_and_never_hf_token(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """token_env = "BOX_TOKEN": the box gets that variable's token (scoped to the repo),
    never the account-wide HF_TOKEN this machine asks the Hub with."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("BOX_TOKEN", BOX_TOKEN)
    hub.state.more_tokens.add(BOX_TOKEN)
    stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    python, received = recording_python(tmp_path)
    fleet = box_fleet(python=python, push={"hf_repo": "me/runs", "token_env": "BOX_TOKEN"})
    journal = Journal()
    with pytest.raises(TokenConsent) as asked:  # its first token: asked, nothing sent
        await fetch(fleet, fleet.boxes[0], REPO, journal=journal, endpoint=hub.url)
    assert "from BOX_TOKEN to box box" in asked.value.notice
    assert received_text(received) == ""
    report = await fetch(fleet, fleet.boxes[0], REPO, journal=journal, endpoint=hub.url,
                         dest=str(tmp_path / "data"), confirmed=True)
    assert report.verified, report.message
    sent = received_text(received)
    assert BOX_TOKEN in sent and TOKEN not in sent
    assert f"Bearer {BOX_TOKEN}" in hub.state.authorizations
    assert journal.entries[-1]["token_sent"] == "BOX_TOKEN"
    assert BOX_TOKEN not in json.dumps(journal.entries)
    monkeypatch.delenv("BOX_TOKEN")  # its own variable unset: refused, never HF_TOKEN
    with pytest.raises(StageError, match=r"its token variable BOX_TOKEN .* is not set"):
        await fetch(fleet, fleet.boxes[0], REPO, journal=journal, endpoint=hub.url,
                    dest=str(tmp_path / "again"), confirmed=True)
    assert TOKEN not in received_text(received)


def test_the_fetch_command_asks_before_the_first_token_goes(
        tmp_path: Path, hub: HubServer, box_fleet: Callable[..., FleetConfig],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """As push asks: off a terminal it stops (exit 2) unless --yes; on one, [y/N]; once
    sent (journaled), not again."""
    stage(dataset(tmp_path), REPO, endpoint=hub.url, token=TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    python, received = recording_python(tmp_path)
    fleet = box_fleet(python=python)
    command = ["--config", fleet.source, "fetch", "box", REPO, "--to", str(tmp_path / "d")]
    assert main(command) == 2
    out = capsys.readouterr().out
    assert "sends your Hugging Face token from HF_TOKEN" in out and "box box" in out
    assert "not fetched: pass --yes" in out
    assert received_text(received) == "" and Journal().entries == []
    answers = iter(["n", "y"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    assert main(command) == 1
    assert "the token stays on this machine" in capsys.readouterr().out
    assert received_text(received) == ""
    assert main(command) == 0
    assert "sends your Hugging Face token" in capsys.readouterr().out
    assert TOKEN in received_text(received)
    assert Journal().entries[-1]["token_sent"] == "HF_TOKEN"
    assert main(command) == 0  # asked once: no answer is left, none is asked for
    assert "sends your Hugging Face token" not in capsys.readouterr().out
