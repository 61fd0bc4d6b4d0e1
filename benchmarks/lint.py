"""What `lint` costs: the guide's example, and the worst 1 MiB scripts a hostile file can
be (many statements, thousands of train() calls and commits, nesting past the bound).

Why: `lint` reads files it did not write. A script at the size bound must be answered in
seconds, never in minutes: each check is linear in the script's size (one walk of the
tree, commits indexed once), and the parser's own cost is what remains.

    python benchmarks/lint.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui

from _fleet import REPO, code_line, code_under_test, machine, machine_line, print_json

from tui.model.lint import MAX_BYTES, LintError, lint


def cases() -> dict[str, bytes]:
    guide = (REPO / "tests" / "data" / "serverless" / "modal_train.py").read_bytes()
    head = (b"import modal\napp = modal.App()\nv = modal.Volume.from_name('x')\n"
            b"@app.function(gpu='T4', volumes={'/v': v}, timeout=9)\ndef f():\n")
    body = b"    m.train(data=1, project='/v/r')\n    v.commit()\n"
    fns = b"import modal\n" + b"".join(
        b"@app.function(gpu='T4')\ndef f%d(): m.train(data=1)\n" % i for i in range(18_000))
    # Beam functions sharing one image that sets HF_HOME off every function's volume,
    # each mounting its own: the image and the settings are read once, not per function.
    beam_head = (b"from beam import Image, Volume, function\nimport os\n"
                 b"img = Image(commands=['apt-get install -y libgl1 libglib2.0-0'], "
                 b"env_vars=['HF_HOME=/elsewhere'])\n"
                 + b"".join(b"os.environ['HF_HOME'] = '/x/%d'\n" % i for i in range(8_000)))
    beam_fn = (b"@function(gpu='T4', timeout=T * 2, image=img, volumes=[Volume(name='v', "
               b"mount_path='/v%d')])\ndef f%d(): pass\n")
    parts = [beam_head, b"T = 60\n"]
    size, i = sum(map(len, parts)), 0
    while size + len(beam_fn % (i, i)) <= MAX_BYTES:
        parts.append(beam_fn % (i, i))
        size, i = size + len(parts[-1]), i + 1
    beam = b"".join(parts)
    return {
        "the guide's Modal example": guide,
        "1 MiB of `x = 1` lines": b"x = 1\n" * (MAX_BYTES // 6),
        "1 MiB: train() + commit, x20k in one function":
            head + body * ((MAX_BYTES - len(head)) // len(body)),
        "~1 MiB: 18k GPU functions without timeout": fns,
        "1 MiB: 6k Beam functions, 8k HF_HOME settings": beam,
        "1 MiB of nested unary minus": b"-" * (MAX_BYTES - 2) + b"1\n",
        "1 MiB of chained subscripts": b"x" + b"[0]" * ((MAX_BYTES - 2) // 3) + b"\n",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = {}
    for name, data in cases().items():
        best = float("inf")
        outcome = ""
        for _ in range(args.repeat):
            start = time.perf_counter()
            try:
                result = lint(data)
                outcome = f"{len(result.findings)} finding(s)"
            except LintError as exc:
                outcome = f"refused: {exc}"
            best = min(best, time.perf_counter() - start)
        rows[name] = {"bytes": len(data), "seconds": round(best, 4), "outcome": outcome}
        print(f"{name:48} {len(data):>9} B {best * 1000:>9.1f} ms  {outcome}", flush=True)
    code, info = code_under_test(), machine()
    print(code_line(code))
    print(machine_line(info))
    print_json({"benchmark": "lint", "best_of": args.repeat, "cases": rows, "code": code,
                "machine": info})


if __name__ == "__main__":
    main()
