"""Which GPUs a training run holds, read from its train_config.yaml `device` as LibreYOLO
1.6 writes it (TrainConfig.to_yaml: yaml.dump(..., default_flow_style=False,
sort_keys=False)) and the environment its process started with; and when a profile
beside it is refused. A hostile config names nothing we place, and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.model.gpu_claim import (
    Placement,
    parse_device,
    place,
    refusal,
    run_placement,
    visible,
)
from tui.onbox.profile import config_device

REAL = Path(__file__).resolve().parents[2] / "tui" / "demo_data" / "yolox-n-40e" / \
    "train_config.yaml"


def written(device: Any) -> str:
    """A real train_config.yaml (the demo's, LibreYOLO's own) with `device` as LibreYOLO's
    to_yaml writes it."""
    config = yaml.safe_load(REAL.read_text())
    config["device"] = device
    return yaml.dump(config, default_flow_style=False, sort_keys=False)


@pytest.mark.parametrize(("device", "gpus"), [
    (0, ("0",)), ("0", ("0",)), ("1", ("1",)), ("cuda:1", ("1",)), ("0,1", ("0", "1")),
    ([0, 1], ("0", "1")), ([1], ("1",)), ("", ("0",)), ("auto", ("0",)), ("cuda", ("0",)),
])
def test_what_libreyolo_writes_places_the_run(device: Any, gpus: tuple[str, ...]) -> None:
    raw = config_device(written(device))
    assert place(parse_device(raw), {}) == Placement(gpus=gpus)


def test_a_run_on_the_cpu_holds_no_gpu() -> None:
    assert config_device(REAL.read_text()) == "cpu"
    assert place(parse_device(config_device(written("cpu"))), {}) == Placement(cpu=True)


@pytest.mark.parametrize("device", [
    "9" * 400, "99", 10**30, -1, "-1", "tpu", "cuda:x", "0,x", "mps", None, True, [],
    [0] * 100, "\x1b]52;c;aGk=\x07", "0;rm -rf /", "٣", "cuda:0,cuda:1",
])
def test_a_device_that_names_nothing_is_said_never_guessed(device: Any) -> None:
    asked = parse_device(device)
    assert asked.unknown is not None and not asked.indices
    assert "\x1b" not in asked.unknown and len(asked.unknown) < 120
    held = place(asked, {})
    assert held.unknown is not None and not held.gpus and not held.cpu


def test_the_mask_renumbers_a_single_gpu_run() -> None:
    assert place(parse_device("0"), {"CUDA_VISIBLE_DEVICES": "1"}).gpus == ("1",)
    assert place(parse_device("1"), {"CUDA_VISIBLE_DEVICES": "2,3"}).gpus == ("3",)
    uuid = "GPU-5c5a3f41-0e1c-4a8e-9b1f-0123456789ab"
    assert place(parse_device("0"), {"CUDA_VISIBLE_DEVICES": uuid}).gpus == (uuid,)
    assert place(parse_device("2"), {"CUDA_VISIBLE_DEVICES": "0,1"}).unknown == \
        "device 2 is past its CUDA_VISIBLE_DEVICES='0,1'"
    assert place(parse_device(""), {"CUDA_VISIBLE_DEVICES": ""}) == Placement(cpu=True)
    assert place(parse_device(""), {"CUDA_VISIBLE_DEVICES": "-1"}) == Placement(cpu=True)
    assert place(parse_device("0"), {"CUDA_VISIBLE_DEVICES": "-1"}).unknown is not None
    assert visible("0,bogus")[1] == "CUDA_VISIBLE_DEVICES='0,bogus' cannot be read"


def test_a_multi_gpu_worker_holds_the_gpus_libreyolo_masked_it_to() -> None:
    """LibreYOLO's spawner gives each worker CUDA_VISIBLE_DEVICES = the asked GPUs (through
    the launcher's own mask) and leaves `device` as asked: '1,3' runs on GPUs 1 and 3."""
    assert place(parse_device("1,3"), {"CUDA_VISIBLE_DEVICES": "1,3"}).gpus == ("1", "3")
    assert place(parse_device("0,1"), {"CUDA_VISIBLE_DEVICES": "4,5,6"}).gpus == ("4", "5")


def test_torchrun_ranks_take_the_first_gpus_whatever_the_device_says() -> None:
    env = {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    assert place(parse_device("auto"), env).gpus == ("0", "1")
    assert place(parse_device("0"), {"LOCAL_RANK": "0"}).unknown is not None
    assert place(parse_device("cpu"), env) == Placement(cpu=True)


def test_an_environment_that_cannot_be_read_leaves_the_gpus_unknown() -> None:
    held = place(parse_device("0"), None, "PermissionError: [Errno 13]")
    assert held.unknown is not None and "PermissionError" in held.unknown


def test_a_hostile_placing_entry_is_typed_and_bounded() -> None:
    for entry in (None, 7, {"config": "yes"}, {"config": True, "device": {"a": 1}},
                  {"config": True, "device": "0", "env": {"CUDA_VISIBLE_DEVICES": 3}},
                  {"config": True, "device": ["0"] * 10**4, "env": {}}):
        placed = run_placement(entry)
        assert placed.unknown is not None or placed.gpus == ("0",), entry
    assert run_placement({"config": True, "device": "1", "env": {}}).gpus == ("1",)
    assert run_placement({"config": False}).unknown == \
        "it has no train_config.yaml the box could read"


def test_a_profile_is_refused_only_where_a_run_holds_its_gpu() -> None:
    on0 = [("shapes-s", Placement(gpus=("0",)))]
    assert refusal("h200", Placement(gpus=("1",)), on0) is None
    assert refusal("h200", Placement(gpus=("0",)), on0) == (
        "run shapes-s is training on GPU 0 of box h200: profiling there now would compete "
        "for it and measure neither; pick another GPU (--device); --force to profile anyway")
    assert refusal("h200", Placement(gpus=("1",)), [("a", Placement(gpus=("0", "1")))])
    unknown = [("a", Placement(unknown="its process's environment cannot be read"))]
    assert "which GPU it uses cannot be told (its process's environment cannot be read)" in \
        (refusal("h200", Placement(gpus=("1",)), unknown) or "")
    assert "on the CPU of box h200" in (refusal("h200", Placement(gpus=("1",)),
                                                [("a", Placement(cpu=True))]) or "")
    assert "a profile on the CPU" in (refusal("h200", Placement(cpu=True), on0) or "")
    assert refusal("h200", Placement(unknown="x"), on0)


def test_config_device_reads_only_the_top_level_key() -> None:
    assert config_device("model:\n  device: 0\nsize: n\n") is None
    assert config_device("device: [0, 1]\n") == ["0", "1"]
    assert config_device("device:\n  - 2\n  - 3\nbatch: 8\n") == ["2", "3"]
    assert config_device("device: '1' # the second\n") == "1"
    assert len(config_device("device:\n" + "- 0\n" * 10**5) or []) == 65
    many = parse_device(config_device("device:\n" + "- 0\n" * 10**5))
    assert many.unknown is not None and many.unknown.endswith("names no GPU gpurent-tui can place")


def test_a_gpu_named_by_uuid_is_compared_only_with_uuids() -> None:
    """CUDA_VISIBLE_DEVICES may name a GPU by UUID (or its unique prefix): against a
    profile's index it may be the same card or not, so the profile is refused."""
    uuid = "GPU-5c5a3f41-0e1c-4a8e-9b1f-0123456789ab"
    run = [("a", place(parse_device("0"), {"CUDA_VISIBLE_DEVICES": uuid}))]
    mixed = refusal("h200", Placement(gpus=("1",)), run)
    assert mixed is not None and "CUDA_VISIBLE_DEVICES names one by UUID" in mixed
    assert "GPU 1 of" not in mixed
    assert refusal("h200", Placement(gpus=("GPU-5C5A3F41",)), run)  # its prefix: the same
    assert refusal("h200", Placement(gpus=("GPU-77",)), run) is None
    assert refusal("h200", Placement(gpus=("MIG-77",)), run)


def test_the_box_sends_back_exactly_the_variables_the_client_judges_by() -> None:
    """The on-box program (stdlib, sent alone) keeps its own list: it must be this one,
    no more (nothing else of a process's environment may leave the box), no fewer."""
    from tui.model import gpu_claim
    from tui.onbox import profile
    assert profile.PLACING_ENV == gpu_claim.PLACING_ENV
