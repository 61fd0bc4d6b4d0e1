"""The guide's steps before the GPU bills: `check`, `doctor`, `stage`, `fetch`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tui.cli.ask import token_asked
from tui.cli.fleet import box_named, load_fleet
from tui.cli.output import print_json
from tui.model.exit_codes import EXIT_FAILED, EXIT_USAGE
from tui.model.fetch_doc import fetch_document
from tui.model.preflight_doc import check_document, doctor_document

if TYPE_CHECKING:
    from tui.model.staging import FetchReport


def cmd_check(args: argparse.Namespace) -> int:
    from tui.actions.preflight import check
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)

    def stage(name: str) -> None:
        if not args.json:
            print(f"  {name} ...", file=sys.stderr, flush=True)

    report = asyncio.run(check(fleet, box, Journal(), deadline=args.timeout, on_stage=stage))
    if args.json:
        print_json(check_document(report))
    else:
        print("\n".join(report.lines()))
    return report.exit_code


def cmd_doctor(args: argparse.Namespace) -> int:
    from tui.actions.preflight import doctor

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    report = asyncio.run(doctor(fleet, box, args.data_yaml, fast=args.fast, strict=args.strict,
                                deadline=args.timeout))
    if args.json:
        print_json(doctor_document(report))
    else:
        print("\n".join(report.lines()))
    return report.exit_code


class _Bar:
    """A progress bar on stderr (a terminal), or one line per step (a log)."""

    WIDTH = 30

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.step: str | None = None

    def __call__(self, step: str, done: int, total: int) -> None:
        from tui.model.sizing import human_bytes

        if step != self.step:
            if self.step is not None and self.tty:
                sys.stderr.write("\n")
            self.step = step
            if not self.tty:
                print(f"{step}: {human_bytes(total)} ...", file=sys.stderr, flush=True)
        if not self.tty:
            return
        share = done / total if total else 1.0
        filled = int(self.WIDTH * min(share, 1.0))
        sys.stderr.write(f"\r{step:>8} [{'#' * filled}{'-' * (self.WIDTH - filled)}] "
                         f"{share:4.0%} {human_bytes(done)} / {human_bytes(total)}   ")
        sys.stderr.flush()

    def end(self) -> None:
        if self.step is not None and self.tty:
            sys.stderr.write("\n")


def cmd_stage(args: argparse.Namespace) -> int:
    from tui.actions.stage import StageError, stage
    from tui.model.staging import repo_problem

    if problem := repo_problem(args.repo):
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    bar = _Bar()
    try:
        report = stage(Path(args.dir), args.repo, public=args.public, name=args.name,
                       tar_path=Path(args.tar) if args.tar else None, keep_tar=args.keep_tar,
                       progress=bar, follow_outside=args.follow_outside)
    except StageError as exc:
        bar.end()
        print(f"stage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    bar.end()
    print(report.message)
    print(f"  {report.name}: {report.size} bytes, sha256 {report.sha256}")
    return report.exit_code


def cmd_fetch(args: argparse.Namespace) -> int:
    from tui.actions.stage import StageError, TokenConsent, fetch
    from tui.model.staging import repo_problem
    from tui.store.journal import Journal

    fleet = load_fleet(args.config)
    box = box_named(fleet, args.box)
    if problem := repo_problem(args.repo):
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    bar = _Bar()
    journal = Journal()

    def run(confirmed: bool) -> FetchReport:
        return asyncio.run(fetch(fleet, box, args.repo, filename=args.file, dest=args.to,
                                 journal=journal, deadline=args.timeout,
                                 keep_tar=args.keep_tar, progress=bar, confirmed=confirmed))

    try:
        try:
            report = run(args.yes)
        except TokenConsent as asked:  # nothing was sent: ask, as push asks
            bar.end()
            if (code := token_asked(asked.notice, box.name, False, "fetched")) is not None:
                return code
            report = run(True)
    except StageError as exc:
        bar.end()
        print(f"fetch: {exc}", file=sys.stderr)
        return EXIT_FAILED
    bar.end()
    if args.json:
        print_json(fetch_document(report))
    else:
        print(report.message)
        for line in report.refused:
            print(f"  refused: {line}")
    return report.exit_code


def add_preflight(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`check`, `doctor`, `stage` and `fetch`, in the help's order."""
    check = sub.add_parser("check", parents=[common],
                           help="check a box before training: torch, CUDA, one real matmul per "
                                "GPU, GPU health, LibreYOLO, HF_HOME (exit 1 on a problem)")
    check.add_argument("box")
    check.add_argument("--json", action="store_true", help="print the gpurent.check/1 document")
    check.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                       help="give up after this long (default 300)")
    check.set_defaults(func=cmd_check)
    doctor = sub.add_parser("doctor", parents=[common],
                            help="run LibreYOLO's `doctor` on a data set on the box, with the "
                                 "box's interpreter (exit 1 when it finds errors)")
    doctor.add_argument("box")
    doctor.add_argument("data_yaml", metavar="DATA_YAML",
                        help="the data set's YAML on the box (relative: to the login's home)")
    doctor.add_argument("--json", action="store_true", help="print the gpurent.doctor/1 document")
    doctor.add_argument("--fast", action="store_true",
                        help="skip image decoding (LibreYOLO's --fast)")
    doctor.add_argument("--strict", action="store_true",
                        help="warnings fail too (LibreYOLO's --strict)")
    doctor.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="give up after this long (default 1800)")
    doctor.set_defaults(func=cmd_doctor)
    stage = sub.add_parser("stage", parents=[common],
                           help="pack a data set folder into one tar and upload it to a Hugging "
                                "Face dataset repo (private), verified by sha256")
    stage.add_argument("dir", metavar="DIR")
    stage.add_argument("--repo", required=True, metavar="ORG/NAME")
    stage.add_argument("--public", action="store_true", help="create the repo public")
    stage.add_argument("--name", help="the tar's name in the repo (default: <DIR's name>.tar)")
    stage.add_argument("--tar", metavar="PATH",
                       help="write the tar here and keep it (default: a cache file, removed "
                            "once the upload is verified)")
    stage.add_argument("--keep-tar", action="store_true", help="keep the packed tar")
    stage.add_argument("--follow-outside", action="store_true",
                       help="pack what links out of DIR point to (refused by default, listed)")
    stage.set_defaults(func=cmd_stage)
    fetch = sub.add_parser("fetch", parents=[common],
                           help="download a staged tar on the box (its own huggingface_hub), "
                                "verify its sha256 against the Hub's, unpack it safely")
    fetch.add_argument("box")
    fetch.add_argument("repo", metavar="ORG/NAME")
    fetch.add_argument("--to", metavar="PATH",
                       help="where to unpack on the box (default: <persistent>/data, else "
                            "~/data)")
    fetch.add_argument("--file", help="the tar in the repo (default: its only .tar)")
    fetch.add_argument("--json", action="store_true", help="print the gpurent.fetch/1 document")
    fetch.add_argument("--yes", action="store_true",
                       help="send the box's Hub token without asking (asked the first time "
                            "a token goes to a box, for a private data set)")
    fetch.add_argument("--keep-tar", action="store_true",
                       help="keep the tar in the box's HF cache (default: deleted once "
                            "unpacked, so it holds no billed disk)")
    fetch.add_argument("--timeout", type=float, default=4 * 3600.0, metavar="SECONDS",
                       help="give up after this long (default 4 h)")
    fetch.set_defaults(func=cmd_fetch)
