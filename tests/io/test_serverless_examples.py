"""Every serverless example the project ships passes `check-config` as a user would
write its entry: the GPU its script asks for, the script named beside the config, no
price override. A GPU without a citable published price must not be in an example."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from tui.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "tests" / "data" / "serverless").glob("*.py"))
TOML_BLOCK = re.compile(r"```toml\n(.*?)```", re.S)


def asked_gpus(script: Path) -> list[str]:
    """The literal gpu= of each decorator in the script, as its author wrote it."""
    gpus = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "gpu" and isinstance(keyword.value, ast.Constant):
                    gpus.append(str(keyword.value.value))
    return gpus


def test_there_are_examples_of_both_providers() -> None:
    assert {"modal_train.py", "beam_train.py"} <= {p.name for p in EXAMPLES}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_each_example_script_passes_check_config_without_a_price_override(
        tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    provider = "beam" if re.search(r"^from beam import", script.read_text(), re.M) \
        else "modal"
    (gpu,) = set(asked_gpus(script))
    shutil.copy(script, tmp_path / script.name)
    entry = {"name": "app", "provider": provider, "app": "yolo-train", "volume": "runs",
             "runs_path": "/runs", "gpu": gpu, "script": script.name}
    config = tmp_path / "fleet.toml"
    config.write_text("[[serverless]]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                                   for k, v in entry.items()))
    assert main(["check-config", "--config", str(config)]) == 0, capsys.readouterr()
    assert ": ok, 1 serverless app(s)" in capsys.readouterr().out


@pytest.mark.parametrize("doc", ["docs/config.md", "docs/serverless.md",
                                 "docs/serverless-beam.md", "README.md"])
def test_each_serverless_toml_block_in_the_docs_passes_check_config(
        tmp_path: Path, doc: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for b in TOML_BLOCK.findall((ROOT / doc).read_text())
              if "[[serverless]]" in b]
    for block in blocks:
        (tmp_path / "modal_train.py").write_bytes(
            (ROOT / "tests" / "data" / "serverless" / "modal_train.py").read_bytes())
        config = tmp_path / "fleet.toml"
        config.write_text(block)
        assert main(["check-config", "--config", str(config)]) == 0, (block,
                                                                       capsys.readouterr())
