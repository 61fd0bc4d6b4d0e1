"""A run's folder under `local_dir`, written without ever following a link.

A push writes only inside `<local_dir>/<box>/<run>/`, and only the names the
push selected. Every folder below `local_dir` is opened one component at a
time with O_NOFOLLOW relative to its parent (an `lstat` says which one is a
link), every file is opened with O_NOFOLLOW relative to its folder, and a
finished file is renamed into place (a rename replaces a link planted under
the final name, it never writes through it). So a symbolic link planted in
the destination, by a box's name or by anyone, cannot redirect a write.
Folders are made 0700 and files 0600: checkpoints are the user's alone.
`local_dir` itself is the user's own choice and is used as given. A run's
folder names its run (`.gpurent-run`: box and run path), and a push of any
other run into it is refused, so one run's verified copy is never overwritten
by another's (runs of one name, a runs root that moved).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
OWNER = ".gpurent-run"  # which run this folder holds: {"box", "run_path"}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeDestination(OSError):
    """A place in the destination that a push must not write through."""


def check_component(part: str) -> None:
    """A single path component we may create: not empty, not `.`/`..`, no separator."""
    if part in ("", ".", "..") or "/" in part or "\0" in part:
        raise UnsafeDestination(f"{part!r} is not a plain file or folder name")


def _open_child_dir(parent_fd: int, part: str, shown: str) -> int:
    """The folder `part` inside `parent_fd`, made if missing; never through a link."""
    check_component(part)
    with contextlib.suppress(FileExistsError):
        os.mkdir(part, DIR_MODE, dir_fd=parent_fd)
    st = os.stat(part, dir_fd=parent_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDestination(f"{shown} is a symbolic link: refused (a push never writes "
                                "through a link; remove it)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDestination(f"{shown} is not a folder: refused")
    fd = os.open(part, _DIR_FLAGS, dir_fd=parent_fd)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, DIR_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


class RunFolder:
    """`<base>/<parts...>/`, opened component by component. Use as a context manager."""

    def __init__(self, base: Path, parts: list[str]) -> None:
        self.base = base
        self.parts = parts
        self.path = base.joinpath(*parts)
        self._fds: dict[str, int] = {}

    def __enter__(self) -> RunFolder:
        self.base.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        fd = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            shown = self.base
            for part in self.parts:
                shown = shown / part
                child = _open_child_dir(fd, part, str(shown))
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        self._fds[""] = fd
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def folder_of(self, name: str) -> tuple[int, str]:
        """The folder fd holding the relative file `name` (made if missing), and its leaf."""
        *dirs, leaf = name.split("/")
        check_component(leaf)
        key = ""
        fd = self._fds[""]
        for part in dirs:
            sub = f"{key}/{part}" if key else part
            if sub not in self._fds:
                self._fds[sub] = _open_child_dir(fd, part, str(self.path / sub))
            key, fd = sub, self._fds[sub]
        return fd, leaf

    def open_regular(self, name: str) -> int | None:
        """The finished file `name` for reading, or None when absent or not a regular file."""
        folder, leaf = self.folder_of(name)
        try:
            fd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except (FileNotFoundError, OSError):
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    def open_part(self, name: str) -> tuple[int, int]:
        """The `.<leaf>.part` of `name` for writing, created 0600; (fd, bytes already there).

        Whatever else sits under that name (a link, a folder) is removed first.
        """
        folder, leaf = self.folder_of(name)
        part = f".{leaf}.part"
        try:
            st = os.stat(part, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            if stat.S_ISDIR(st.st_mode):
                raise UnsafeDestination(f"{self.path / name}: {part} is a folder: refused")
            os.unlink(part, dir_fd=folder)  # a link: removed, never followed
            st = None
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                     dir_fd=folder)
        os.fchmod(fd, FILE_MODE)
        return fd, os.fstat(fd).st_size

    def finish(self, name: str, mtime_ns: int) -> None:
        """Give the part its mtime and rename it to `name` (over whatever is there)."""
        folder, leaf = self.folder_of(name)
        part = f".{leaf}.part"
        os.utime(part, ns=(mtime_ns, mtime_ns), dir_fd=folder, follow_symlinks=False)
        os.replace(part, leaf, src_dir_fd=folder, dst_dir_fd=folder)

    def claim(self, box: str, run_path: str) -> None:
        """Mark the folder as this run's, or refuse it when it holds another run's push."""
        fd = self._fds[""]
        owner = {"box": box, "run_path": run_path}
        try:
            held = os.open(OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except FileNotFoundError:
            held = None
        except OSError as exc:  # a link planted there (ELOOP), a folder, unreadable
            raise UnsafeDestination(f"{self.path / OWNER} cannot be read "
                                    f"({exc.strerror or exc}): refused") from None
        if held is not None:
            try:
                text = os.read(held, 1 << 16)
            finally:
                os.close(held)
            try:
                other = json.loads(text)
            except ValueError:
                other = None
            if other == owner:
                return
            who = (f"run {other.get('run_path')!r} of box {other.get('box')!r}"
                   if isinstance(other, dict) else "another run (its .gpurent-run is unreadable)")
            raise UnsafeDestination(f"{self.path} holds the push of {who}; this run's push would "
                                    "overwrite it: refused (move that folder away to push here)")
        part = f".{OWNER}.part"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part, dir_fd=fd)
        out = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      FILE_MODE, dir_fd=fd)
        try:
            os.write(out, json.dumps(owner).encode())
            os.fsync(out)
        finally:
            os.close(out)
        os.replace(part, OWNER, src_dir_fd=fd, dst_dir_fd=fd)

    def held(self, name: str) -> int:
        """Bytes of `name` already here, whole or as its `.part` (regular files only, never
        through a link): what a pull of it need not find room for again."""
        folder, leaf = self.folder_of(name)
        most = 0
        for each in (leaf, f".{leaf}.part"):
            try:
                st = os.stat(each, dir_fd=folder, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                most = max(most, st.st_size)
        return most

    def discard_part(self, name: str) -> None:
        folder, leaf = self.folder_of(name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f".{leaf}.part", dir_fd=folder)

    def fix_mode(self, fd: int) -> None:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
