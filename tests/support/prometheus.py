"""What the Prometheus tests share: Debian's `prometheus` tools found (or the test skipped,
or failed where GPURENT_REQUIRE_PROMETHEUS=1 requires it), the families `watch --metrics`
serves as its own code builds them, the names a PromQL expression or a dashboard uses, and
a real Prometheus server scraping one target with contrib/'s rules loaded."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tui.model.metrics_doc import metric_families

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "contrib" / "prometheus" / "gpurent-alerts.yml"
RULE_TESTS = ROOT / "contrib" / "prometheus" / "gpurent-alerts.test.yml"
DASHBOARD = ROOT / "contrib" / "grafana" / "gpurent-fleet.json"
# Labels Prometheus itself puts on every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})
METRIC = re.compile(r"\bgpurent_[a-zA-Z0-9_]+")
SELECTOR = re.compile(r"\b(gpurent_[a-zA-Z0-9_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
SETTLE_SECONDS = 15.0  # scrapes every second: what a test waits on comes in one or two


def need(tool: str) -> str:
    """The tool's path; without it a skip, except where it is required (scripts/test-all,
    CI: the proof that Prometheus reads the rules must not vanish as a skip)."""
    found = shutil.which(tool)
    if found is not None:
        return found
    if os.environ.get("GPURENT_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(f"{tool} is not installed, and GPURENT_REQUIRE_PROMETHEUS=1 requires this "
                    "test (install Debian's prometheus, as scripts/test-all does)",
                    pytrace=False)
    pytest.skip(f"needs {tool} (Debian package prometheus)")


def served() -> dict[str, tuple[str, ...]]:
    """Every family `watch --metrics` serves, by the sample name it is served as, with its
    labels: from metric_families itself (it returns every family, with or without series)."""
    return {f.name: f.labels for f in metric_families([], None, {}, {}, {}, 0.0)}


def names(expr: str) -> set[str]:
    """The gpurent metric names a PromQL expression reads."""
    return set(METRIC.findall(expr))


def selector_labels(expr: str) -> Iterator[tuple[str, str]]:
    """(metric, label) for every label matcher on a gpurent metric's selector."""
    for metric, body in SELECTOR.findall(expr):
        for label in MATCHER.findall(body):
            yield metric, label


def grouping_labels(expr: str) -> set[str]:
    """Labels named in by / without / on / ignoring (...)."""
    return {label.strip() for group in GROUPING.findall(expr)
            for label in group.split(",") if label.strip()}


def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside rows too."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            yield f"variable {var['name']}", query["query"] if isinstance(query, dict) else query


def as_promql(expr: str) -> str:
    """A dashboard expression as Prometheus runs it with every variable at All."""
    return re.sub(r"\$\{?(box|run)\}?", ".*", expr)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """One Prometheus server on 127.0.0.1 scraping `target` every second, rules loaded."""

    def __init__(self, binary: str, workdir: Path, target: str) -> None:
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {json.dumps(str(RULES))}\n"
            "scrape_configs:\n  - job_name: gpurent\n"
            f"    static_configs:\n      - targets: [{json.dumps(target)}]\n")
        self.port = free_port()
        self.log = (workdir / "prometheus.log").open("w+")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path: str, **query: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> dict[tuple[str, ...], float]:
        """An instant query's vector: (box, run, ...) label values -> value."""
        found = {}
        for item in self.api("query", query=expr)["result"]:
            labels = item["metric"]
            key = tuple(labels.get(k, "") for k in ("box", "run", "kind", "by"))
            found[key] = float(item["value"][1])
        return found

    def until(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            try:
                if ready():
                    return
            except OSError:  # still starting
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise AssertionError(f"Prometheus never saw {what}:\n{self.log.read()[-4000:]}")
            time.sleep(0.2)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
