"""`profile`: LibreYOLO's profiler on a box for a few steps, and what its figures are worth."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tui.cli.fleet import box_named, load_fleet
from tui.cli.output import print_json
from tui.model.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tui.model.profile import (
    ProfileError,
    ProfileRequest,
    check_steps,
    model_size,
    parse_grid,
    table_rows,
)
from tui.model.profile_doc import profile_document

HEADER = ["batch", "workers", "img/s", "dataload", "GPU busy", "$/1k img", "LibreYOLO"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in [HEADER, *rows]]


def cmd_profile(args: argparse.Namespace) -> int:
    from tui.actions.profile import journal_profile, profile_box
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    try:
        size = model_size(args.model) if args.model else None
        parse_grid(args.try_ or (), args.batch or 16, args.workers or 8)  # before any box
        check_steps(args.steps, args.warmup)
    except ProfileError as exc:
        print(f"profile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.run is None and (args.data is None or args.weights is None):
        print("profile: give --data YAML and --weights PT (or a RUN on the box, whose "
              "settings and last.pt are used)", file=sys.stderr)
        return EXIT_USAGE
    request = ProfileRequest(data=args.data, weights=args.weights, size=size,
                             batch=args.batch, imgsz=args.imgsz, workers=args.workers,
                             device=args.device, steps=args.steps, warmup=args.warmup,
                             grid=args.try_ or (), run=args.run, force=args.force)

    def say(line: str) -> None:
        if not args.json:
            print(line, file=sys.stderr, flush=True)

    from tui.store.ledger import Ledger

    billed = Ledger().running_rate(box.name)  # where the config names no running rate
    report = asyncio.run(profile_box(fleet, box, request, say=say, usd_per_hr=billed))
    journal_profile(Journal(), report)
    if args.json:
        print_json(profile_document(report))
    elif report.outcome == "done":
        if len(report.cells) > 1 or any(not c.measured for c in report.cells):
            print("\n".join(_table(table_rows(report.cells, report.usd_per_hr))))
        one = report.cells[0]
        if len(report.cells) == 1:
            print(f"{one.img_per_s:.1f} img/s on box {box.name} (batch {one.batch}, "
                  f"workers {one.workers}); LibreYOLO says: {one.bound or '?'}")
        print(report.verdict)
        if report.usd_per_hr is None:
            print(f"(no $/1k images: box {box.name} has no running_usd_per_hr and never ran on "
                  "the ledger's record)")
    else:
        print(f"profile {report.outcome}: {report.message}", file=sys.stderr)
    return {"done": EXIT_OK, "usage": EXIT_USAGE}.get(report.outcome, EXIT_FAILED)


def add_profile(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`profile`."""
    p = sub.add_parser(
        "profile", parents=[common],
        help="run LibreYOLO's profiler (libreyolo profile run) on a box for a few steps and "
             "say what limits training and what a change is worth in $/1k images",
        usage="%(prog)s BOX [RUN] --data YAML --weights PT [--model M] [--batch B] "
              "[--imgsz N] [--workers W] [--device D] [--steps N] "
              "[--try workers=1,8,12 batch=16,64] [--force] [--json]")
    p.add_argument("box")
    p.add_argument("run", nargs="?",
                   help="a run on the box: its train_config.yaml settings and last.pt")
    p.add_argument("--data", metavar="YAML", help="the data set's yaml, a path on the box")
    p.add_argument("--weights", metavar="PT", help="a LibreYOLO checkpoint on the box")
    p.add_argument("--model", metavar="M", help="size variant (n, s, t, or yolox-n)")
    p.add_argument("--batch", type=int, metavar="B")
    p.add_argument("--imgsz", type=int, metavar="N")
    p.add_argument("--workers", type=int, metavar="W")
    p.add_argument("--device", metavar="D", help="GPU index or cpu (default 0)")
    p.add_argument("--steps", type=int, default=10, metavar="N",
                   help="measured steps per setting (default 10)")
    p.add_argument("--warmup", type=int, default=3, metavar="N",
                   help="warmup steps before measuring (default 3)")
    p.add_argument("--try", dest="try_", nargs="+", metavar="KEY=V,V",
                   help="a small grid: workers=1,8,12 batch=16,64 (at most 12 settings)")
    p.add_argument("--force", action="store_true",
                   help="profile even though a run is training on the GPU asked for (or which "
                        "GPU a run uses cannot be told)")
    p.add_argument("--json", action="store_true", help="print the gpurent.profile/1 document")
    p.set_defaults(func=cmd_profile)
