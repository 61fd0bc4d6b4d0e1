"""`size`: the disk to rent for one training job, and what it costs stopped."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from tui.cli.fleet import box_named, load_fleet
from tui.cli.output import print_json
from tui.model.exit_codes import EXIT_OK, EXIT_USAGE
from tui.model.size_doc import size_document


def cmd_size(args: argparse.Namespace) -> int:
    from tui.model.sizing import DEFAULT_SAVE_PERIOD, GB, disk_rate, model_checkpoint, plan_disk

    data = _data_bytes(args.data)
    if data is None:
        from tui.model.staging import repo_problem

        if repo_problem(args.data) is not None:
            print(f"size: --data {args.data!r} is neither a number of GB, an existing folder "
                  "or file, nor a staged Hub dataset repo (ORG/NAME)", file=sys.stderr)
            return EXIT_USAGE
        from tui.actions.hub import resolve_token
        from tui.actions.stage import StageError, hub_expected

        try:  # a staged data set: the tar's size as the Hub reports it
            data = hub_expected(args.data, None, endpoint=os.environ.get("HF_ENDPOINT"),
                                token=resolve_token(None)).size
        except StageError as exc:
            print(f"size: {exc}", file=sys.stderr)
            return EXIT_USAGE
    checkpoint = None
    if args.checkpoint_mb is not None:
        checkpoint = int(args.checkpoint_mb * 1e6)
    elif args.from_run:
        weights = [p for p in Path(args.from_run).glob("weights/*.pt") if p.is_file()]
        if not weights:
            print(f"size: {args.from_run} has no weights/*.pt", file=sys.stderr)
            return EXIT_USAGE
        checkpoint = max(p.stat().st_size for p in weights)
    elif args.model:
        checkpoint = model_checkpoint(args.model)
        if checkpoint is None:
            from tui.model.sizing import CHECKPOINT_BYTES

            print(f"size: no measured checkpoint size for {args.model!r} (known: "
                  f"{', '.join(CHECKPOINT_BYTES)}); give --checkpoint-mb or --from-run",
                  file=sys.stderr)
            return EXIT_USAGE
    else:
        print("size: give --model, --checkpoint-mb or --from-run", file=sys.stderr)
        return EXIT_USAGE
    period = DEFAULT_SAVE_PERIOD if args.save_period is None else args.save_period
    plan = plan_disk(data, checkpoint, args.epochs, period,
                     system_bytes=int(args.system_gb * GB))
    provider, pricing, name = args.provider, None, None
    if args.box:
        box = box_named(load_fleet(args.config), args.box)
        provider, pricing, name = provider or box.provider, box.pricing, box.name
    rate, hours, source = disk_rate(provider, pricing, box=name,
                                    usd_per_gb_month=args.usd_per_gb_month,
                                    hours_per_month=args.hours_per_month)
    if args.json:
        print_json(size_document(plan, rate, hours))
    else:
        print("\n".join(plan.lines(rate, hours, source)))
    return EXIT_OK


def _count(text: str, least: int = 0) -> int:
    """A whole number, `least` or more (epochs: 1; a save period: 0, none)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} is below {least}")
    return value


def _epochs(text: str) -> int:
    return _count(text, least=1)


def _size(text: str) -> float:
    """A size or price, 0 or more and finite (a negative one would shrink the disk asked for)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size of 0 or more")
    return value


def _data_bytes(text: str) -> int | None:
    """--data: GB as a number, or a local folder or tar whose size is measured."""
    from tui.model.sizing import GB

    try:
        value = float(text)
    except ValueError:
        value = None
    if value is not None and value >= 0 and value == value:
        return int(value * GB)
    path = Path(text).expanduser()
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return None


def add_size(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`size`."""
    size = sub.add_parser("size", parents=[common],
                          help="the disk to rent: data + checkpoints + 30%% headroom, and what "
                               "it costs stopped")
    size.add_argument("--data", required=True, metavar="GB|PATH|ORG/NAME",
                      help="the data set: GB, a local folder or tar to measure, or the Hub "
                           "dataset repo it was staged to")
    which = size.add_mutually_exclusive_group()
    which.add_argument("--model", help="e.g. yolox-s, yolo9-c (measured checkpoint sizes)")
    which.add_argument("--checkpoint-mb", type=_size, metavar="MB",
                       help="one checkpoint's size")
    which.add_argument("--from-run", metavar="DIR",
                       help="a finished run's folder: its largest weights/*.pt")
    size.add_argument("--epochs", type=_epochs, required=True)
    size.add_argument("--save-period", type=_count, default=None, metavar="K",
                      help="an epoch_<N>.pt every K epochs (LibreYOLO's save_period; "
                           "default LibreYOLO's own, 10; 0: none)")
    size.add_argument("--system-gb", type=_size, default=0.0, metavar="GB",
                      help="the image and its Python environment, where the provider counts "
                           "them in the disk")
    size.add_argument("--box", help="price the stopped disk with this box's [box.pricing]")
    size.add_argument("--provider", choices=("vast", "runpod", "lambda", "manual"),
                      help="the provider's hours-per-month convention")
    size.add_argument("--usd-per-gb-month", type=_size, metavar="USD")
    size.add_argument("--hours-per-month", type=float, metavar="H")
    size.add_argument("--json", action="store_true")
    size.set_defaults(func=cmd_size)
