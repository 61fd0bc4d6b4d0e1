"""What taking the held secrets out of a box's answer costs a refresh, beside the fold.

Why: every refresh of every box passes its answer through `redact_answer`
(tui/model/box_redact.py) before `fold_answer`, and the panel is meant for 1,000
boxes; the redaction must be small beside what a refresh already costs.

One box's runs are LibreYOLO-shaped (benchmarks/_fleet.py: `--runs` runs with
`--epochs` epochs of history); the probe builds its answers from them in this
process (the box's work, not timed). Two answers: the first look (every run's
whole history) and a steady refresh (each run one epoch on). For each, the median
of `--repeats` rounds of 1,000 calls: decode (inflate + JSON), fold, the held
secrets' lookup and the redaction, with three secrets held (a Hub token, a 64-hex
provider key, a 40-hex W&B key, none of them in the answer: the common case).

    python benchmarks/box_redact.py [--runs 3] [--epochs 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fleet import (
    Run,
    code_line,
    code_under_test,
    machine,
    machine_line,
    print_json,
)

import tui.onbox.probe as probe
from tui.model.box import BoxState, fold_answer, probe_request
from tui.model.box_redact import redact_answer
from tui.remote.session import decode_answer
from tui.store.secrets import recent_held_secrets

CALLS = 1000  # boxes: each figure is the time of one refresh step for this many


def per_thousand(step: Callable[[], object], repeats: int) -> float:
    """Milliseconds for CALLS calls of `step`, the median of `repeats` rounds."""
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            step()
        rounds.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(rounds), 1)


def measure(payload: bytes, state: BoxState, repeats: int) -> dict[str, Any]:
    answer = decode_answer(payload)
    secrets = recent_held_secrets(["BOX_TOKEN"])
    return {
        "answer_kib": round(len(payload) / 1024, 1),
        "decode_ms": per_thousand(lambda: decode_answer(payload), repeats),
        "fold_ms": per_thousand(lambda: fold_answer(state, answer, time.time()), repeats),
        "held_secrets_ms": per_thousand(lambda: recent_held_secrets(["BOX_TOKEN"]), repeats),
        "redact_ms": per_thousand(lambda: redact_answer(answer, secrets), repeats),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    os.environ.update(HF_TOKEN="hf_" + "Qx7mN2pL9vR4tK8wZ3bC6yD1fG5hJ0sAeU",
                      VAST_API_KEY="a3f9" * 16,
                      WANDB_API_KEY="7c1e0b9a4f2d8e6b3a5c0f1d9e8b7a6c5d4e3f2a")
    with tempfile.TemporaryDirectory(prefix="gpurent-redact-") as tmp:
        root = Path(tmp) / "runs"
        runs = [Run.create(root / f"run{n}", args.epochs, time.time())
                for n in range(args.runs)]
        state = BoxState(name="b")
        first, _, _ = probe.answer_payload({**probe_request(state, (str(root),)),
                                            "gpu": False})
        looked = fold_answer(state, decode_answer(first), time.time())
        for run in runs:
            run.advance()
        steady, _, _ = probe.answer_payload({**probe_request(looked, (str(root),)),
                                             "gpu": False})
        phases = {"first look": measure(first, state, args.repeats),
                  "steady": measure(steady, looked, args.repeats)}
    code, info = code_under_test(), machine()
    print(code_line(code))
    print(machine_line(info))
    print(f"one box of {args.runs} runs x {args.epochs} epochs; ms per {CALLS} boxes, "
          f"median of {args.repeats}")
    print(f"{'':12}{'answer':>10}{'decode':>10}{'fold':>10}{'secrets':>10}{'redact':>10}"
          f"{'share':>8}")
    for name, p in phases.items():
        share = (p["held_secrets_ms"] + p["redact_ms"]) / (p["decode_ms"] + p["fold_ms"])
        p["share_of_decode_fold"] = round(share, 3)
        print(f"{name:12}{p['answer_kib']:>8} K{p['decode_ms']:>10}{p['fold_ms']:>10}"
              f"{p['held_secrets_ms']:>10}{p['redact_ms']:>10}{share:>8.0%}")
    print_json({"benchmark": "gpurent-tui/box_redact", "machine": info, "code": code,
                "args": vars(args), "phases": phases})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
