"""A `gpurent-tui watch` process's stdout, read by a thread so a silent process cannot
hang the test (test_watch and test_hostile_numbers both read one)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time


class WatchOutput:
    """Lines as they come; `wait_for` a line holding some text, `rest` once it exits."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        stream = proc.stdout
        self.lines: list[str] = []
        self.queue: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for line in stream:
                self.queue.put(line)
            self.queue.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def wait_for(self, wanted: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"no {wanted!r} in the watch's output:\n{self.text()}")
            self.lines.append(line)
            if wanted in line:
                return line

    def text(self) -> str:
        return "".join(self.lines)

    def rest(self) -> str:
        while (line := self.queue.get(timeout=30)) is not None:
            self.lines.append(line)
        return self.text()
