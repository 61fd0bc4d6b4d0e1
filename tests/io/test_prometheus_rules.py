"""The alert rules and the Grafana dashboard in contrib/, read by Prometheus' own promtool
(Debian package `prometheus`): the rules load and their unit tests pass; and, with or
without promtool, every metric and label they name is one `watch --metrics` serves, as
its own code builds the families (a renamed family fails here, not on a team's pager)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.prometheus import (
    DASHBOARD,
    ROOT,
    RULE_TESTS,
    RULES,
    TARGET_LABELS,
    dashboard,
    dashboard_exprs,
    grouping_labels,
    names,
    need,
    panels,
    selector_labels,
    served,
)

TEMPLATE_LABEL = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")
MATCHER_NAME = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=")


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_loads_the_rules() -> None:
    promtool = need("promtool")
    done = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout, done.stdout


def test_promtools_unit_tests_of_the_rules_pass() -> None:
    promtool = need("promtool")
    done = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout, done.stdout


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    """Each alert has a promtool case where it fires and one where it does not."""
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for case in test["alert_rule_test"]]
    for rule in _rules():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']}: no case where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']}: none where it is quiet"
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]


def test_every_metric_and_label_the_rules_name_is_served() -> None:
    families = served()
    for rule in _rules():
        expr, alert = rule["expr"], rule["alert"]
        used = names(expr)
        assert used <= set(families), f"{alert}: {used - set(families)} not served"
        assert used or "up{" in expr, alert  # `up` is Prometheus' own
        known = set(TARGET_LABELS).union(*(families[n] for n in used))
        for metric, label in selector_labels(expr):
            assert label in families[metric] or label in TARGET_LABELS, (alert, metric, label)
        assert grouping_labels(expr) <= known, (alert, grouping_labels(expr) - known)
        said = " ".join(rule["annotations"].values())
        assert set(TEMPLATE_LABEL.findall(said)) <= known, (alert, said)
    # The unit tests' input reads as watch serves it too: a renamed label fails here.
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for series in test["input_series"]:
            name, _, body = series["series"].partition("{")
            if name == "up":
                continue
            assert name in families, series
            labels = set(MATCHER_NAME.findall(body))
            assert labels <= set(families[name]) | TARGET_LABELS, series


def test_the_dashboard_is_an_importable_model_naming_only_served_metrics() -> None:
    board = dashboard()
    assert board["title"] and board["uid"] and isinstance(board["schemaVersion"], int)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"box", "run"} <= set(variables)
    families = served()
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    exprs = list(dashboard_exprs(board))
    assert len(exprs) > 10
    for where, expr in exprs:
        used = names(expr)
        assert used, where
        assert used <= set(families), f"{where}: {used - set(families)} not served"
        known = set(TARGET_LABELS).union(*(families[n] for n in used))
        for metric, label in selector_labels(expr):
            assert label in families[metric] or label in TARGET_LABELS, (where, metric, label)
        assert grouping_labels(expr) <= known, (where, expr)
    for panel in panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            if "run" in families.get(min(names(target["expr"])), ()):
                assert '$run' in target["expr"], (panel["title"], target["expr"])
    titles = {p["title"] for p in panels(board)}
    assert {"Boxes up", "At rest", "Unreachable", "$/hr now", "Spent", "Epoch", "Train loss",
            "ETA", "Unpushed $"} <= titles, titles
    assert DASHBOARD.read_text().endswith("\n")


@pytest.mark.parametrize(("test", "required"), [
    ("test_prometheus_rules.py::test_promtool_loads_the_rules", "1"),
    ("test_prometheus_rules.py::test_promtool_loads_the_rules", ""),
    ("test_prometheus_scrape.py", "1")])
def test_a_missing_prometheus_fails_where_it_is_required(tmp_path: Path, test: str,
                                                        required: str) -> None:
    """scripts/test-all (CI) sets GPURENT_REQUIRE_PROMETHEUS=1: that Prometheus reads the
    rules and scrapes `watch` cannot vanish as a skip there; elsewhere a missing one skips."""
    empty = tmp_path / "bin"  # a PATH where neither promtool nor prometheus is found
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "GPURENT_REQUIRE_PROMETHEUS": required}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(Path(__file__).parent / test)], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120)
    if required:
        assert done.returncode == 1, done.stdout
        assert re.search(r"\b1 (failed|error)\b", done.stdout), done.stdout
        assert "GPURENT_REQUIRE_PROMETHEUS=1 requires" in done.stdout, done.stdout
    else:
        assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout


def test_the_docs_name_every_alert_and_every_family() -> None:
    """docs/prometheus.md has a line for each alert and a row for each family served."""
    doc = (ROOT / "docs" / "prometheus.md").read_text()
    missing = [r["alert"] for r in _rules() if f"| `{r['alert']}` |" not in doc]
    missing += [name for name in served() if f"| `{name}` |" not in doc]
    assert not missing, missing
