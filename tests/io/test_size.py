"""`gpurent-tui size` from the command line: LibreYOLO's save period unless told otherwise,
a finished run's real checkpoint, the JSON document, and the stopped price per provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fleets import make_fleet

from tui.__main__ import main
from tui.model.cost import RUNPOD_STOPPED_USD_PER_GB_MONTH
from tui.model.sizing import CHECKPOINT_BYTES, DEFAULT_SAVE_PERIOD, GB


def size_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["size", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpurent.size/1"
    return doc


def test_without_save_period_size_counts_libreyolos_default(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Omitting --save-period must not undercount: LibreYOLO writes an epoch file every 10."""
    assert DEFAULT_SAVE_PERIOD == 10
    assert main(["size", "--data", "5", "--model", "yolox-x", "--epochs", "300"]) == 0
    text = capsys.readouterr().out
    assert "32 x 1.2 GB" in text  # best + last + 300 // 10
    assert "every 10 epochs: LibreYOLO's default save_period" in text
    doc = size_json(capsys, "--data", "5", "--model", "yolox-x", "--epochs", "300")
    assert doc["checkpoints"] == 32 and doc["save_period"] == 10
    assert doc["checkpoint_bytes"] == CHECKPOINT_BYTES["yolox-x"]
    assert doc["data_bytes"] == 5 * GB
    assert doc["allocate_gb"] == -(-int(doc["needed_bytes"]) * 13 // (10 * GB))
    # Saving off is still there, said as such.
    off = size_json(capsys, "--data", "5", "--model", "yolox-x", "--epochs", "300",
                    "--save-period", "0")
    assert off["checkpoints"] == 2 and off["save_period"] == 0
    assert main(["size", "--data", "5", "--model", "yolox-x", "--epochs", "300",
                 "--save-period", "0"]) == 0
    assert "no epoch files (save period 0)" in capsys.readouterr().out


def test_a_finished_runs_checkpoint_and_a_measured_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run" / "weights"
    run.mkdir(parents=True)
    (run / "last.pt").write_bytes(b"x" * 3000)
    (run / "best.pt").write_bytes(b"x" * 5000)
    (run / "notes.txt").write_bytes(b"x" * 90000)  # not a checkpoint
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    (data / "images" / "a.jpg").write_bytes(b"y" * 1234)
    (data / "data.yaml").write_bytes(b"z" * 66)
    doc = size_json(capsys, "--data", str(data), "--from-run", str(tmp_path / "run"),
                    "--epochs", "20", "--save-period", "5")
    assert doc["checkpoint_bytes"] == 5000 and doc["checkpoints"] == 6
    assert doc["data_bytes"] == 1300
    assert main(["size", "--data", str(data), "--from-run", str(tmp_path / "empty"),
                 "--epochs", "20"]) == 2
    assert "has no weights/*.pt" in capsys.readouterr().err


def test_runpod_prices_the_stopped_disk_at_its_volume_rate(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--data", "100", "--model", "yolox-s", "--epochs", "100",
                 "--provider", "runpod"]) == 0
    text = capsys.readouterr().out
    doc = size_json(capsys, "--data", "100", "--model", "yolox-s", "--epochs", "100",
                    "--provider", "runpod")
    gb = int(doc["allocate_gb"])  # type: ignore[call-overload]
    rate = gb * RUNPOD_STOPPED_USD_PER_GB_MONTH / 730
    assert doc["stopped_usd_per_hr"] == pytest.approx(rate)
    assert f"${rate:.4f}/hr" in text and "RunPod's volume rate" in text
    # Vast has no rate of its own to fall back on: the user is told how to give one.
    assert main(["size", "--data", "100", "--model", "yolox-s", "--epochs", "100",
                 "--provider", "vast"]) == 0
    assert "give --usd-per-gb-month" in capsys.readouterr().out


def test_a_boxs_pricing_or_its_provider_prices_the_disk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "id"
    key.write_text("")
    base = {"host": "127.0.0.1", "port": 22, "user": "root", "identity_file": str(key)}
    fleet = make_fleet(tmp_path, [
        {"name": "vast-4090", "provider": "vast", **base,
         "pricing": {"storage_usd_per_gb_month": 0.15}},
        {"name": "pod", "provider": "runpod", **base},
    ])
    vast = size_json(capsys, "--config", fleet.source, "--data", "100", "--model", "yolox-s",
                     "--epochs", "100", "--box", "vast-4090")
    gb = int(vast["allocate_gb"])  # type: ignore[call-overload]
    assert vast["stopped_usd_per_hr"] == pytest.approx(gb * 0.15 / 720)
    pod = size_json(capsys, "--config", fleet.source, "--data", "100", "--model", "yolox-s",
                    "--epochs", "100", "--box", "pod")
    assert pod["stopped_usd_per_hr"] == pytest.approx(gb * RUNPOD_STOPPED_USD_PER_GB_MONTH / 730)


def test_a_staged_data_set_is_sized_from_the_hub(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--data ORG/NAME: the staged tar's size as the Hub reports it (stage removes its
    local tar once verified, so the repo is where the size is)."""
    from huggingface_hub import constants
    from support.hub_server import HubServer
    from support.libreyolo_train import make_dataset

    from tui.actions.stage import stage

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    token = "hf_SizeFromTheHubToken0123456789abcdef"
    with HubServer([], token=token) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", token)
        make_dataset(tmp_path / "shapes")
        staged = stage(tmp_path / "shapes", "me/shapes")
        assert staged.verified, staged.message
        monkeypatch.chdir(tmp_path)  # no local folder me/shapes to measure instead
        doc = size_json(capsys, "--data", "me/shapes", "--model", "yolox-s", "--epochs", "20")
        assert doc["data_bytes"] == staged.size
        assert main(["size", "--data", "me/nothing-staged", "--model", "yolox-s",
                     "--epochs", "20"]) == 2
        err = capsys.readouterr().err
        assert "me/nothing-staged" in err and token not in err


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--epochs", "-5", "below 1"), ("--epochs", "0", "below 1"), ("--epochs", "x", "whole"),
    ("--save-period", "-3", "below 0"), ("--system-gb", "-30", "0 or more"),
    ("--system-gb", "nan", "0 or more"), ("--usd-per-gb-month", "-1", "0 or more"),
])
def test_a_negative_or_odd_figure_is_refused_by_name(
        capsys: pytest.CaptureFixture[str], flag: str, value: str, words: str) -> None:
    """A negative figure shrank the disk asked for (--system-gb -30 allocated 1 GB)."""
    args = ["size", "--data", "5", "--model", "yolox-s", "--epochs", "10", flag, value]
    with pytest.raises(SystemExit) as ended:
        main(args)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: {value!r}" in err and words in err
