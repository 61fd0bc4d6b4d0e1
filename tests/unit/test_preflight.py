"""The check's pure verdicts: arch lists against compute capabilities, recorded nvidia-smi
answers, drivers against CUDA builds, where HF_HOME lives, LibreYOLO's doctor answer,
and the config keys `python` and `persistent`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tui.model.config import ConfigError, parse_config
from tui.model.preflight import (
    ERROR,
    INFO,
    WARNING,
    arch_span,
    driver_too_old,
    interpreter_command,
    judge_check,
    judge_doctor,
    kernels_for,
    newest_cuda_for_driver,
    parse_smi_base,
    plain,
    read_smi,
    throttle_reasons,
)
from tui.model.preflight_doc import doctor_document

SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"


def recorded(scenario: str) -> dict[str, Any]:
    """The smi part as the on-box program sends it, from the recorded answers."""
    folder = SMI / scenario
    part: dict[str, Any] = {}
    for name in ("base", "compute_cap", "remapped"):
        part[name] = answer(folder, name)
    part["throttle"] = answer(folder, "event")
    if part["throttle"]["rc"] != 0:
        part["throttle"] = answer(folder, "throttle")
    return part


def answer(folder: Path, name: str) -> dict[str, Any]:
    if (folder / f"{name}.err").exists():
        return {"rc": 2, "out": "", "err": (folder / f"{name}.err").read_text()}
    return {"rc": 0, "out": (folder / f"{name}.csv").read_text(), "err": ""}


# -- architectures ------------------------------------------------------------------

@pytest.mark.parametrize(("arch", "capability", "how"), [
    (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], (9, 0), None),   # H100, old wheel
    (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], (8, 9), "sass"),  # 4090 runs sm_86
    (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], (6, 1), None),  # 1080 Ti, new
    (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], (12, 0), "sass"),
    (["sm_80", "compute_80"], (9, 0), "ptx"),                                  # PTX JIT
    (["sm_90a"], (9, 0), "sass"),
    (["sm_90a"], (10, 0), None),                                               # arch-specific
    (["sm_86"], (8, 0), None),                                                 # minor too high
])
def test_which_kernels_a_wheel_has_for_a_card(arch: list[str], capability: tuple[int, int],
                                              how: str | None) -> None:
    assert kernels_for(arch, capability) == how


def test_arch_span_reads_like_the_issue() -> None:
    assert arch_span(["sm_50", "sm_86", "compute_86", "sm_60"]) == "sm_50..sm_86"
    assert arch_span(["sm_120", "sm_75", "sm_100"]) == "sm_75..sm_120"
    assert arch_span(["compute_90"]) == "no sm_ architectures"


def test_drivers_against_cuda_builds() -> None:
    assert driver_too_old("470.182.03", "13.0") == (580, 65)
    assert driver_too_old("535.104.05", "12.8") is None
    assert driver_too_old("525.60.13", "12.1") is None
    assert driver_too_old("520.61.05", "12.1") == (525, 60)
    assert driver_too_old(None, "12.1") is None and driver_too_old("550", None) is None
    assert newest_cuda_for_driver("470.182.03") == 11
    assert newest_cuda_for_driver("580.95.05") == 13


# -- nvidia-smi -----------------------------------------------------------------------

def test_recorded_healthy_h100() -> None:
    gpus, notes = read_smi(recorded("h100-healthy"), None)
    assert notes == []
    (h100,) = gpus
    assert h100.name == "NVIDIA H100 80GB HBM3" and h100.bus_id == "00000000:18:00.0"
    assert h100.compute_cap == (9, 0) and h100.throttle_mask == 1
    assert h100.ecc_uncorrected == 0 and h100.retired_pending is None
    assert (h100.remapped_pending, h100.remapped_failure) == (False, False)
    assert (h100.link_gen, h100.link_gen_max, h100.link_under_load) == (1, 5, False)
    busy = {"rc": 0, "out": (SMI / "h100-healthy" / "pcie.csv").read_text()}
    (loaded,), _ = read_smi(recorded("h100-healthy"), busy)
    assert (loaded.link_gen, loaded.link_width, loaded.link_under_load) == (5, 16, True)


def test_recorded_sick_a100() -> None:
    busy = {"rc": 0, "out": (SMI / "a100-sick" / "pcie.csv").read_text()}
    gpus, _ = read_smi(recorded("a100-sick"), busy)
    sick = gpus[1]
    assert sick.ecc_uncorrected == 3 and sick.remapped_pending is True
    assert sick.throttle_mask == 0x48 and sick.temp_c == 92
    assert [w for w, _ in throttle_reasons(sick.throttle_mask)] == [
        "hardware slowdown", "hardware thermal slowdown"]
    report = judge_check({"smi": recorded("a100-sick"), "pcie_busy": busy}, box="b",
                         python="python3", checked_at=0.0)
    codes = {f.code: f.severity for f in report.findings}
    assert codes == {"gpu1.ecc": ERROR, "gpu1.remap_pending": ERROR, "gpu1.throttle": ERROR,
                     "gpu1.temperature": ERROR, "gpu1.pcie": WARNING}


def test_retired_pages_and_a_failed_remap_are_named() -> None:
    """A V100 with pages waiting to be retired (its generation retires pages), an A100 whose
    row remapping failed (Ampere remaps rows instead); the healthy cards beside them pass."""
    v100, _ = read_smi(recorded("v100-retired-pages"), None)
    assert [g.retired_pending for g in v100] == [False, True]
    assert [g.remapped_pending for g in v100] == [None, None]  # [N/A]: Volta remaps no rows
    report = judge_check({"smi": recorded("v100-retired-pages")}, box="b", python="p",
                         checked_at=0.0)
    assert {f.code: f.severity for f in report.findings if f.severity != INFO} == {
        "gpu1.retired_pages": ERROR}  # (the idle links at gen 1 are info: read at rest)
    a100, _ = read_smi(recorded("a100-remap-failure"), None)
    assert [(g.remapped_pending, g.remapped_failure) for g in a100] == [(False, False),
                                                                      (False, True)]
    report = judge_check({"smi": recorded("a100-remap-failure")}, box="b", python="p",
                         checked_at=0.0)
    (failed,) = [f for f in report.findings if f.severity != INFO]
    assert failed.code == "gpu1.remap_failure" and failed.severity == ERROR
    assert failed.fix == "rent another box"


def test_recorded_old_driver_answers_what_it_knows() -> None:
    gpus, notes = read_smi(recorded("rtx3090-old-driver"), None)
    (card,) = gpus
    assert card.throttle_mask == 1 and card.compute_cap is None
    assert card.remapped_pending is None and card.ecc_uncorrected is None
    assert card.driver == "470.182.03"
    assert notes == []


def test_an_idle_link_is_not_a_problem_but_a_narrow_one_is() -> None:
    idle = "0, b, 550.1, 1, 30, 0, No, 1, 4, 16, 16, Card\n"
    narrow = "0, b, 550.1, 1, 30, 0, No, 1, 4, 4, 16, Card\n"
    for text, severity in ((idle, INFO), (narrow, WARNING)):
        report = judge_check({"smi": {"base": {"rc": 0, "out": text}}}, box="b",
                             python="p", checked_at=0)
        assert [f.severity for f in report.findings] == [severity]


def test_smi_lines_that_cannot_be_read_are_counted() -> None:
    gpus, bad = parse_smi_base("garbage\n0, b, 1, 2, 3, 4, 5, 6, 7, 8, 9, Name, with comma\n")
    assert bad == 1 and gpus[0].name == "Name, with comma"
    _, notes = read_smi({"base": {"timeout": 15}}, None)
    assert notes == ["nvidia-smi did not answer within 15 s"]
    _, notes = read_smi({"base": {"rc": 9, "out": "", "err": "NVML: Driver/library mismatch"}},
                        None)
    assert notes == ["nvidia-smi exited 9: NVML: Driver/library mismatch"]


# -- where HF_HOME lives --------------------------------------------------------------

def place(path: str, dev: int, real: str | None = None) -> dict[str, Any]:
    return {"path": path, "real": real or path, "exists": True, "dev": dev, "mount": "/",
            "fstype": "overlay", "free": 10**11}


def test_hf_home_on_the_container_disk_is_warned_about() -> None:
    host = {"hf_home": place("/root/.cache/huggingface", 1),
            "persistent": place("/workspace", 2),
            "runs_roots": [place("/workspace/runs", 2), place("/root/runs", 1)]}
    report = judge_check({"host": host}, box="pod", python="p", checked_at=0,
                         persistent="/workspace", runs_roots=("/workspace/runs", "/root/runs"))
    assert [(f.code, f.severity) for f in report.findings] == [
        ("hf_home.ephemeral", WARNING), ("runs_root.ephemeral", WARNING)]
    assert "export HF_HOME=/workspace/hf" in report.findings[0].fix
    assert "/root/runs" in report.findings[1].message
    assert report.verdict == "warnings" and report.exit_code == 0


def test_hf_home_linked_into_the_volume_persists() -> None:
    host = {"hf_home": place("~/.cache/huggingface", 2, real="/workspace/hf"),
            "persistent": place("/workspace", 2)}
    report = judge_check({"host": host}, box="pod", python="p", checked_at=0,
                         persistent="/workspace")
    assert report.findings == ()


def test_without_persistent_the_check_says_it_cannot_tell() -> None:
    report = judge_check({"host": {"hf_home": place("/root/.cache/huggingface", 1)}},
                         box="vast", python="p", checked_at=0)
    assert [(f.code, f.severity) for f in report.findings] == [("hf_home.unknown", INFO)]
    assert "set `persistent` for box vast" in report.findings[0].fix
    missing = judge_check({"host": {"persistent": {"path": "/workspace", "exists": False}}},
                          box="pod", python="p", checked_at=0, persistent="/workspace")
    assert missing.findings[0].code == "persistent.missing"


# -- torch verdicts -------------------------------------------------------------------

def torch_part(**extra: Any) -> dict[str, Any]:
    return {"installed": True, "version": "2.14.1+cu130", "cuda": "13.0", "available": True,
            "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
            "device_count": 1, **extra}


def card(**extra: Any) -> dict[str, Any]:
    return {"index": 0, "name": "NVIDIA GeForce GTX 1080 Ti", "capability": [6, 1],
            "memory": 11 << 30, **extra}


def test_an_old_card_predicted_and_proved_without_kernels() -> None:
    error = "AcceleratorError: CUDA error: no kernel image is available for execution on the device"
    report = judge_check({"torch": torch_part(gpus=[card(error=error)])}, box="b",
                         python="p", checked_at=0)
    assert [f.message for f in report.errors] == [
        "no kernel image: this torch wheel has no kernels for sm_61 (compiled for "
        "sm_75..sm_120); install a torch build for this card"]


def test_a_wrong_or_nan_result_is_a_failed_matmul() -> None:
    nan = {"finite": False, "sum": "nan", "n": 2000, "best_s": 0.001, "first_s": 0.2}
    off = {"finite": True, "sum": 1.0e9, "n": 2000, "best_s": 0.001, "first_s": 0.2}
    good = {"finite": True, "sum": 2.0001e9, "n": 2000, "best_s": 0.002, "first_s": 0.2}
    h100 = {"name": "H100", "capability": [9, 0]}
    for matmul, words in ((nan, "not finite (nan)"), (off, "the matmul's result is off")):
        report = judge_check({"torch": torch_part(gpus=[card(**h100, matmul=matmul)])},
                             box="b", python="p", checked_at=0)
        assert words in report.errors[0].message and report.errors[0].code == "gpu0.matmul"
    report = judge_check({"torch": torch_part(gpus=[card(**h100, matmul=good)])},
                         box="b", python="p", checked_at=0)
    assert report.findings == () and report.gpus[0].tflops == pytest.approx(8.0)
    assert report.summary == "1 GPU ok, torch 2.14.1+cu130"


def test_a_cpu_only_build_and_a_missing_gpu() -> None:
    cpu = judge_check({"torch": torch_part(cuda=None, available=False, version="2.5.1+cpu")},
                      box="b", python="p", checked_at=0)
    assert cpu.errors[0].message == "torch 2.5.1+cpu is a CPU-only build: it cannot use a GPU"
    hidden = judge_check(
        {"torch": torch_part(available=False),
         "host": {"cuda_visible_devices": ""},
         "smi": {"base": {"rc": 0, "out": "0, b, 580.95.05, 1, 30, 0, No, 1, 4, 16, 16, G\n"}}},
        box="b", python="p", checked_at=0)
    assert hidden.errors[0].message == ("CUDA not available although nvidia-smi sees 1 GPU(s); "
                                        "CUDA_VISIBLE_DEVICES=''")


# -- doctor ---------------------------------------------------------------------------

DOCTOR = {"summary": {"errors": 1, "warnings": 1, "infos": 0},
          "stats": {"yaml": "/d/data.yaml", "root": "/d", "nc": 2,
                    "splits": {"train": {"images": 16, "instances": 32}}},
          "findings": [{"check_id": "labels.syntax", "severity": "error",
                        "message": "1 malformed label line(s)", "split": "train",
                        "count": 1, "paths": ["/d/labels/train/a.txt"]},
                       {"check_id": "splits.leakage_near", "severity": "warning",
                        "message": "1 pair \x1b[31mleaking", "paths": ["a", "b"]}],
          "data": "/d/data.yaml", "exit_code": 1, "schema_version": 1}


def test_doctor_findings_are_libreyolos_own() -> None:
    report = judge_doctor({"installed": True, "version": "1.6.0", "report": DOCTOR,
                           "rc": 1}, box="b", data="/d/data.yaml", python="p")
    assert report.exit_code == 1
    assert [f.check_id for f in report.errors] == ["labels.syntax"]
    assert report.warnings[0].message == "1 pair leaking"
    assert report.lines()[1] == "  1 errors, 1 warnings, 0 infos"
    clean = {**DOCTOR, "summary": {"errors": 0, "warnings": 0, "infos": 0}, "findings": [],
             "exit_code": 0}
    assert judge_doctor({"installed": True, "report": clean}, box="b", data="d",
                        python="p").exit_code == 0
    cli_error = {"schema_version": 1, "error": "data_not_found", "message": "no such yaml",
                 "suggestion": None}
    failed = judge_doctor({"installed": True, "report": cli_error}, box="b", data="d",
                          python="p")
    assert failed.failure == "libreyolo doctor: data_not_found: no such yaml"
    assert failed.exit_code == 1


def test_strict_doctor_fails_on_warnings_alone() -> None:
    """--strict: LibreYOLO's warnings fail the exit code too, as its own CLI does."""
    warned = {**DOCTOR, "summary": {"errors": 0, "warnings": 1, "infos": 0},
              "findings": DOCTOR["findings"][1:], "exit_code": 0}
    lenient = judge_doctor({"installed": True, "report": warned, "rc": 0}, box="b", data="d",
                           python="p")
    assert lenient.exit_code == 0 and doctor_document(lenient)["strict"] is False
    strict = judge_doctor({"installed": True, "report": warned, "rc": 0}, box="b", data="d",
                          python="p", strict=True)
    assert strict.exit_code == 1 and doctor_document(strict)["strict"] is True
    assert strict.lines()[1] == "  0 errors, 1 warnings, 0 infos (--strict: warnings fail)"
    # LibreYOLO's own verdict counts even where its findings were trimmed away.
    said = {**warned, "findings": [], "summary": {}, "exit_code": 1}
    assert judge_doctor({"installed": True, "report": said}, box="b", data="d",
                        python="p").exit_code == 1


# -- config and the command line on the box ---------------------------------------------

def test_python_and_persistent_keys() -> None:
    fleet = parse_config('[[box]]\nname = "a"\nhost = "h"\npython = "/opt/conda/bin/python"\n'
                         'persistent = "/workspace"\n', "f.toml")
    assert fleet.boxes[0].python == "/opt/conda/bin/python"
    assert fleet.boxes[0].persistent == "/workspace"
    default = parse_config('[[box]]\nname = "a"\nhost = "h"\n', "f.toml").boxes[0]
    assert default.python == "python3" and default.persistent is None
    with pytest.raises(ConfigError) as info:
        parse_config('[[box]]\nname = "a"\nhost = "h"\npython = ""\npersistent = "work"\n',
                     "f.toml")
    assert [str(p) for p in info.value.problems] == [
        "f.toml:4: box 'a': key 'python': must not be empty",
        "f.toml:5: box 'a': key 'persistent': must be an absolute path on the box (or start "
        "with ~), got 'work'"]


def test_the_interpreter_is_one_quoted_word() -> None:
    assert interpreter_command("python3") == "python3 -"
    assert interpreter_command("/opt/my env/bin/python") == "'/opt/my env/bin/python' -"
    assert interpreter_command("~/venv/bin/python") == "\"$HOME\"/venv/bin/python -"
    assert interpreter_command("~/x $(reboot)/python") == "\"$HOME\"/'x $(reboot)/python' -"


def test_plain_strips_terminal_controls() -> None:
    assert plain("a\x1b[31mred\x1b[0m\x07 \x1b]0;title\x07b") == "ared\ufffd b"
    assert plain({"a": 1}) == "" and plain(3.5) == "3.5"
    assert len(plain("x" * 10_000, 50)) == 50


# -- a box with no GPU, by config ----------------------------------------------------------

def test_a_box_without_a_gpu_by_config_is_not_a_red_verdict() -> None:
    """`gpu = false`: training there is `--device cpu`, a legitimate choice; no CUDA is what
    the config said, not a problem."""
    fleet = parse_config('[[box]]\nname = "cpu-box"\nhost = "h"\ngpu = false\n', "f.toml")
    assert fleet.boxes[0].gpu is False
    assert parse_config('[[box]]\nname = "a"\nhost = "h"\n', "f.toml").boxes[0].gpu is True
    for torch in (torch_part(cuda=None, available=False, version="2.5.1+cpu", device_count=0),
                  torch_part(available=False, device_count=0)):
        report = judge_check({"torch": torch, "smi": {"absent": True}}, box="cpu-box",
                             python="p", checked_at=0, has_gpu=False)
        assert report.errors == [] and report.verdict == "ok"
        assert report.summary.startswith("no GPU, by config")
        assert any(line.startswith("verdict: ok") for line in report.lines())
    missing = judge_check({"torch": {"installed": False}}, box="cpu-box", python="p",
                          checked_at=0, has_gpu=False)
    assert missing.errors[0].code == "torch.missing"  # torch is still needed on a CPU


def test_gpu_must_be_true_or_false() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[[box]]\nname = "a"\nhost = "h"\ngpu = "no"\n', "f.toml")
    assert "key 'gpu'" in str(info.value.problems[0])
