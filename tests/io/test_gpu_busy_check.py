"""scripts/gpu_busy_check.py, the check for a machine with a real card, run here on the
stand-ins: an `nvidia-smi` replaying the H200's recordings and a libnvidia-ml.so.1 built
from tests/support/fake_nvml.c. The busy figures come through the real path (the probe
kept as the panel keeps it, its answers folded by the panel's reader); what a real card
adds (the load, the real driver) is the script's to report on the next machine with one."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.nvidia_smi import (
    FIXTURES,
    fake_nvml,
    replaying_nvidia_smi,
    utilisation_answers_served,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_busy_check.py"
CALLS = 4


def run(tmp_path: Path, env: dict[str, str], *args: str,
        timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={"HOME": os.environ.get("HOME", str(tmp_path)), **env})
    path = out / "gpu_busy_check.json"
    return done, json.loads(path.read_text()) if path.exists() else {}


def test_the_driver_average_through_nvidia_smi_against_its_one_sample_reads(
        tmp_path: Path) -> None:
    """No NVML here: the probe forks `nvidia-smi -q -d UTILIZATION` (17 % primes it, then
    39, 70, 70 % at one-second reads); the one-sample `utilization.gpu` read said 0 % each
    time, so the integral is far off that reference and the check fails (exit 1)."""
    bin_dir = tmp_path / "bin"
    env = replaying_nvidia_smi(bin_dir, "util-17.txt", "util-39.txt", "util-70.txt")
    done, doc = run(tmp_path, env, "--no-load", "--seconds", "3", "--every", "1",
                    "--calls", str(CALLS))
    assert done.returncode == 1, done.stderr
    busy = doc["busy"]
    assert busy["gpus"] == [{"index": 0, "name": "NVIDIA H200"}]
    assert busy["primed"] == {"span": 14.0, "pct": 17.0}
    assert [(w["src"], w["span"], w["pct"]) for w in busy["windows"]] == [
        ("nvidia-smi", 14.0, 39.0), ("nvidia-smi", 14.0, 70.0), ("nvidia-smi", 14.0, 70.0)]
    # each read covers the second since the one before (the window's own 14 s reach
    # further back, into time already covered), so the integral is near (39+70+70)/3
    assert 2.9 <= busy["covered_s"] <= 3.3
    assert 39.0 < busy["probe_pct"] < 70.0
    assert abs(busy["probe_pct"] - 100 * busy["busy_s"] / busy["covered_s"]) < 0.1
    assert busy["reference_pct"] == 0.0 and busy["reference_reads"] == 12
    assert doc["difference_pts"] == round(busy["probe_pct"], 2)
    assert doc["within_tolerance"] is False and doc["exit_code"] == 1
    cost = doc["cost"]
    assert cost["nvml"] is None and "did not load" in cost["nvml_note"]
    assert cost["smi_answer"] == [[70.0, 14.0]] and cost["smi"]["median_ms"] > 0
    assert cost["smi_text"] == (FIXTURES / "util-70.txt").read_text()
    assert utilisation_answers_served(bin_dir) == 4 + 1 + CALLS + 1
    assert "the probe's busy integral" in done.stdout and "OUTSIDE" in done.stdout
    assert "nvidia-smi -q -d UTILIZATION" in done.stdout


def test_nvml_is_read_since_the_last_read_and_costs_less_than_nvidia_smi(
        tmp_path: Path) -> None:
    """The stand-in NVML (71 samples 200 ms apart, odd slots 99 % busy, its clock one
    second on per read): the kept probe reads the five samples since its last read each
    time and never forks nvidia-smi; within a 60-point tolerance the check passes."""
    nvml = fake_nvml(tmp_path / "lib")
    if nvml is None:
        pytest.skip("no C compiler to build the stand-in libnvidia-ml.so.1")
    bin_dir = tmp_path / "bin"
    env = {**replaying_nvidia_smi(bin_dir, "util-39.txt"), **nvml,
           "FAKE_NVML_STEP_US": "1000000"}
    done, doc = run(tmp_path, env, "--no-load", "--seconds", "3", "--every", "1",
                    "--calls", str(CALLS), "--tolerance", "60")
    assert done.returncode == 0, done.stderr
    busy = doc["busy"]
    assert busy["primed"]["span"] == 14.2  # the driver's whole buffer, before the window
    assert [(w["src"], w["span"], w["pct"]) for w in busy["windows"]] == [
        ("nvml", 1.0, 39.6), ("nvml", 1.0, 59.4), ("nvml", 1.0, 39.6)]
    assert 39.6 < busy["probe_pct"] < 59.4 and doc["within_tolerance"] is True
    assert 2.9 <= busy["covered_s"] <= 3.0
    # the probe never forked nvidia-smi -q; the cost measure did (and read its text once)
    assert utilisation_answers_served(bin_dir) == 1 + CALLS + 1
    cost = doc["cost"]
    assert cost["nvml_answer"][0][1] == 14.2 and cost["smi_answer"] == [[39.0, 14.0]]
    assert cost["nvml"]["median_ms"] < cost["smi"]["median_ms"]
    assert "NVML nvmlDeviceGetSamples, whole buffer" in done.stdout
    assert "within" in done.stdout and done.stdout.rstrip().endswith("gpu_busy_check.json")


def test_no_nvidia_smi_means_no_card(tmp_path: Path) -> None:
    done, doc = run(tmp_path, {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin"},
                    "--no-load", "--seconds", "3", "--every", "1")
    assert done.returncode == 2
    assert "gpu_busy_check: no nvidia-smi on PATH: no NVIDIA card or driver on this " \
           "machine" in done.stderr
    assert doc["exit_code"] == 2 and doc["busy"] is None and "no nvidia-smi" in doc["no_card"]


def bare_python(tmp_path: Path) -> Path:
    """This interpreter started with -S: no site-packages, so no torch and no libreyolo
    (whatever this machine has installed)."""
    python = tmp_path / "python-without-packages"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    python.chmod(0o755)
    return python


def test_a_load_that_cannot_reach_gpu_0_means_no_card(tmp_path: Path) -> None:
    """nvidia-smi answers (the stand-in) but `--python` cannot run torch on GPU 0 (here
    it has no torch at all; a torch without CUDA ends the same way): the load never gets
    ready and the check says so, exit 2."""
    env = replaying_nvidia_smi(tmp_path / "bin", "util-17.txt")
    done, doc = run(tmp_path, env, "--seconds", "3", "--every", "1",
                    "--python", str(bare_python(tmp_path)))
    assert done.returncode == 2, done.stdout
    assert "the load could not start on GPU 0 (torch, CUDA): " in done.stderr
    assert "No module named 'torch'" in done.stderr
    assert doc["busy"] is None and doc["exit_code"] == 2


def test_usage_errors_are_refused_before_anything_runs(tmp_path: Path) -> None:
    for args in (["--every", "20"], ["--duty", "1.5"], ["--try", "workers=x"]):
        done, doc = run(tmp_path, {"PATH": "/usr/bin:/bin"}, *args)
        assert done.returncode == 2 and doc == {}
        assert "error:" in done.stderr


def test_a_profile_where_libreyolo_is_missing_says_so(tmp_path: Path) -> None:
    """The on-box profile program runs under `--python` (here one started with -S: no
    site-packages, so no libreyolo) and reports its absence; the check fails (exit 1)."""
    python = bare_python(tmp_path)
    done, doc = run(tmp_path, {"PATH": "/usr/bin:/bin"}, "--skip-busy", "--profile",
                    "--python", str(python), "--data", "d.yaml", "--weights", "w.pt")
    assert done.returncode == 1, done.stderr
    prof = doc["profile"]
    assert prof["outcome"] == "failed" and prof["cells"] == []
    assert prof["message"].startswith(f"libreyolo is not installed for {python}")
    assert isinstance(prof["cpus"], int) and prof["cpus"] >= 1
    assert "profile (failed): libreyolo is not installed" in done.stdout


@pytest.mark.training
def test_profile_on_the_cpu_from_a_data_set_and_checkpoint_made_offline(
        tmp_path: Path) -> None:
    """No --data/--weights: the script draws a small data set and saves a fresh yolox-n,
    then runs real `libreyolo profile run` through the on-box program (~25 s here)."""
    if importlib.util.find_spec("libreyolo") is None:
        pytest.skip("libreyolo is not installed (the train extra)")
    done, doc = run(tmp_path, {"PATH": os.environ["PATH"]}, "--skip-busy", "--profile",
                    "--device", "cpu", "--imgsz", "64", "--batch", "8", "--workers", "0",
                    "--steps", "2", "--warmup", "1", "--images", "16", "--image-size", "64",
                    "--usd-per-hr", "0.5", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    prof = doc["profile"]
    assert prof["outcome"] == "done" and prof["settings"]["device"] == "cpu"
    assert prof["settings"]["weights"].endswith("/yolox_n.pt")
    assert not Path(prof["settings"]["weights"]).exists()  # made in a folder removed after
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_busy_check.json"]
    (cell,) = prof["cells"]
    assert cell["problem"] is None and cell["img_per_s"] > 0
    assert 0 <= cell["dataload_frac"] <= 1
    assert cell["usd_per_1k_images"] == pytest.approx(0.5 / (cell["img_per_s"] * 3.6))
    assert cell["libreyolo_bound"] == "host / launch"
    assert prof["verdict"] == prof["message"]
    assert "GPU" not in prof["verdict"] or prof["verdict"].startswith("profiled on the CPU")
    assert f"{cell['img_per_s']:.1f} img/s" in done.stdout
    assert "profile (done): " + prof["verdict"] in done.stdout
