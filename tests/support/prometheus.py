"""What the Prometheus tests share: Debian's `prometheus` tools found (or the test skipped,
or failed where GPURENT_REQUIRE_PROMETHEUS=1 requires it), the families `watch --metrics`
serves as its own code builds them, and the names a PromQL expression or a dashboard uses."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
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
