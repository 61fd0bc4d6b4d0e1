"""A `gpurent-tui watch` process's stdout, read by a thread so a silent process cannot
hang the test (test_watch and test_hostile_numbers both read one)."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
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


class MetricsWatch:
    """A `gpurent-tui watch --config CONFIG --metrics 127.0.0.1:0` child: its output, and
    the port its /metrics landed on (said on its first line)."""

    def __init__(self, config: str, env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tui", "watch", "--config", config,
             "--metrics", "127.0.0.1:0"],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.out = WatchOutput(self.proc)
        self.port = 0

    def __enter__(self) -> MetricsWatch:
        try:
            said = self.out.wait_for("watch: metrics on")
            found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", said)
            assert found is not None, said
            self.port = int(found[1])
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self) -> str:
        """SIGTERM, as a service manager stops it; everything it said."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        return self.out.rest()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.kill()
