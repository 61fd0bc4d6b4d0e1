"""The action journal: every push, stop, start and destroy, and how it ended, on disk.

Several writers share one file: the panel, `gpurent-tui push` in another
terminal, a second panel. So `entries` is read from the file each time it is
asked for (the new lines only, after a stat), and the record of verified
pushes that the destroy dialog, the guard and the unpushed notes rely on is
never a copy taken when the panel started.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tui.model.instance import PowerAction, PowerResult
from tui.model.launch import LaunchResult
from tui.model.redact import redact_tree
from tui.store import paths
from tui.store.jsonl import append_jsonl, parse_jsonl
from tui.store.secrets import held_secrets

# What the journal records: each kind of action on a box, and the words for how it ended.
JournalAction = Literal[PowerAction, "push", "launch", "check", "fetch", "guard", "guard-remove",
                        "config", "profile"]
PushOutcome = Literal["done", "failed"]
CheckOutcome = Literal["ok", "warnings", "problems", "failed"]  # failed: it did not finish
GuardOutcome = Literal["armed", "dry_run", "failed", "removed"]
ProfileOutcome = Literal["done", "failed", "refused"]  # refused: a run was training there
CancelOutcome = Literal["cancelled"]  # the user cancelled it from the panel while it ran
ConfigOutcome = Literal["reloaded"]  # the config file's edit put in force (box "": the fleet)
JournalOutcome = Literal[PushOutcome, PowerResult, LaunchResult, CheckOutcome, GuardOutcome,
                         ProfileOutcome, CancelOutcome, ConfigOutcome]
# Names and hashes the journal is searched by, kept whole: the rest (the message, the
# error, the details: where a box's or a provider's words land) is redacted on the way in.
FIXED = frozenset({"v", "time", "box", "run", "run_path", "action", "outcome", "files",
                   "destination", "verified", "runs"})
KEPT_WHOLE = frozenset({"sha256", "commit", "oid", "size", "epoch", "best_epoch"})


class Journal:
    """Append-only record of actions. Tokens never enter it: callers pass only
    names, sizes, hashes, destinations and words, and the words (which may quote a
    box or a provider) are redacted here, the one door into the file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "journal.jsonl"
        self.problem: str | None = None
        self.skipped = 0
        self._read: list[dict[str, Any]] = []     # from the file, in order
        self._memory: list[dict[str, Any]] = []   # recorded but not written (file unusable)
        self._offset = 0                          # bytes of the file already read
        self._file: tuple[int, int] | None = None  # (device, inode) of the file read
        self._refresh()

    @property
    def entries(self) -> list[dict[str, Any]]:
        """Every action on record, including those other processes appended since."""
        self._refresh()
        return self._read + self._memory if self._memory else self._read

    @property
    def version(self) -> int:
        """Changes whenever an entry was added, here or by another process (cheap: a stat)."""
        self._refresh()
        return len(self._read) + len(self._memory) + self._offset

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._cannot_read(exc.strerror or str(exc))
            return
        if not stat.S_ISREG(st.st_mode):
            self._cannot_read("not a regular file")  # what was read so far is kept
            return
        if (st.st_dev, st.st_ino) != self._file or st.st_size < self._offset:
            self._read, self._offset, self.skipped = [], 0, 0  # new or rewritten file
            self._file = (st.st_dev, st.st_ino)
        if st.st_size == self._offset:
            return
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except OSError as exc:
            self._cannot_read(exc.strerror or str(exc))
            return
        self._offset += len(data)
        records, skipped = parse_jsonl(data)  # a torn write, or "[[[[..." past the stack
        self._read.extend(records)
        self.skipped += skipped

    @staticmethod
    def _redact(entry: dict[str, Any]) -> None:
        """The words and the details, redacted of every secret in play (a launch's failure
        quoting `--wandb-key V`, a provider echoing its key)."""
        secrets = held_secrets()
        for key, value in entry.items():
            if key not in FIXED:
                entry[key] = redact_tree(value, secrets, KEPT_WHOLE)

    def _cannot_read(self, why: str) -> None:
        if self.problem is None or "cannot be written" not in self.problem:
            self.problem = f"journal {self.path} cannot be read ({why})"

    def record(self, *, box: str, action: JournalAction, outcome: JournalOutcome,
               run: str | None = None,
               run_path: str | None = None, files: Sequence[Mapping[str, Any]] = (),
               destination: str | None = None, verified: bool | None = None,
               message: str = "", error: str | None = None,
               runs: Sequence[Mapping[str, Any]] = (),
               at: float | None = None,
               details: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Append one action. `runs`: the runs a destroy took with it (a forced one lists
        exactly what was lost, in `files` too). `details`: more plain fields (a push's
        epoch and best metric, why a milestone push was made); never the fixed ones."""
        entry: dict[str, Any] = {
            "v": 1, "time": round(at if at is not None else time.time(), 3), "box": box,
            "run": run, "run_path": run_path, "action": action, "outcome": outcome,
            "files": [dict(f) for f in files], "destination": destination,
            "verified": verified, "message": message, "error": error,
        }
        if runs:
            entry["runs"] = [dict(r) for r in runs]
        for key, value in (details or {}).items():
            entry.setdefault(key, value)
        self._redact(entry)
        self._refresh()  # what others wrote comes before this line, as in the file
        try:
            append_jsonl(self.path, entry)
        except OSError as exc:
            self.problem = (f"journal {self.path} cannot be written ({exc.strerror or exc}); "
                            "this session's actions are kept in memory only")
            self._memory.append(entry)
            return entry
        before = len(self._read)
        self._refresh()
        if len(self._read) == before:  # written but not read back: keep it anyway
            self._memory.append(entry)
        return entry
