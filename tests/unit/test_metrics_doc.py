"""`watch --metrics`' families from a box's answer as a hostile box would send it, through
prometheus_client's own exposition and parser: bounded labels, bounded series, one
series per run, and the `--metrics HOST:PORT` words."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tui.model.box import BoxState, Connection, parse_gpu_rows
from tui.model.meter import FleetCost
from tui.model.metrics_doc import (
    LABEL_CHARS,
    MAX_GPUS_PER_BOX,
    MAX_RUNS_PER_BOX,
    Family,
    label_value,
    metric_families,
    parse_listen,
)
from tui.model.rest import Rest
from tui.model.runs import Health, RunState
from tui.model.watchdog import GuardStep, GuardView
from tui.runtime.metrics import _metric


class _Fixed:
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return (_metric(f) for f in self.families)


def _exposed(boxes: list[BoxState], actions: dict[tuple[str, str, str], int] | None = None
             ) -> tuple[str, dict[str, list[tuple[dict[str, str], float]]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(metric_families(boxes, None, {}, {"b": "vast"}, actions or {},
                                             1.8e9)))
    text = generate_latest(registry).decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return text, samples


def _run(name: str, path: str | None = None, health: Health = Health.RUNNING) -> RunState:
    return RunState(path=path or f"/runs/{name[:20]}", name=name, root="/runs", health=health)


def test_a_ten_kilobyte_run_name_is_one_bounded_printable_series() -> None:
    hostile = 'a"b\\c\n}\x1b[2J\x00\u202e' + "Z" * 10_000
    text, samples = _exposed([BoxState(name="b", connection=Connection.OK,
                                       runs=(_run(hostile), _run("ok")))])
    runs = [labels["run"] for labels, _ in samples["gpurent_run_health"]
            if labels["health"] == "running"]
    assert len(runs) == 2 and "ok" in runs
    odd = next(r for r in runs if r != "ok")
    assert len(odd) == LABEL_CHARS and odd.isprintable() and odd.endswith("~")
    assert odd.startswith('a"b\\c')
    assert len(text) < 20_000  # the 10 kB went nowhere


def test_ten_thousand_runs_make_a_bounded_series_count_and_say_so() -> None:
    runs = (*(_run(f"r{i}", health=Health.COMPLETED) for i in range(10_000)), _run("live"))
    _, samples = _exposed([BoxState(name="b", connection=Connection.OK, runs=runs)])
    assert len(samples["gpurent_run_health"]) == MAX_RUNS_PER_BOX * len(Health)
    assert samples["gpurent_truncated"] == [({"box": "b", "provider": "vast"},
                                             10_001 - MAX_RUNS_PER_BOX)]
    assert any(labels["run"] == "live" for labels, _ in samples["gpurent_run_health"])


def test_each_gpu_is_its_own_series_as_status_says() -> None:
    """Two GPUs as nvidia-smi prints them: one series each, labelled by index and model;
    a figure the card does not report is no sample."""
    gpus, _ = parse_gpu_rows(["0, NVIDIA H200, 17, 1529, 143771, 36, 125.59",
                              "1, NVIDIA H200, 100, 143771, 143771, [N/A], [N/A]"])
    _, samples = _exposed([BoxState(name="b", connection=Connection.OK, gpus=gpus)])
    at = {"box": "b", "provider": "vast", "model": "NVIDIA H200"}
    assert samples["gpurent_gpu_utilization_ratio"] == [({**at, "gpu": "0"}, 0.17),
                                                       ({**at, "gpu": "1"}, 1.0)]
    assert samples["gpurent_gpu_memory_used_ratio"] == [({**at, "gpu": "0"}, 1529 / 143771),
                                                       ({**at, "gpu": "1"}, 1.0)]
    assert samples["gpurent_gpu_temperature_celsius"] == [({**at, "gpu": "0"}, 36.0)]
    assert samples["gpurent_gpu_power_watts"] == [({**at, "gpu": "0"}, 125.59)]
    assert samples["gpurent_gpus_truncated"] == [({"box": "b", "provider": "vast"}, 0.0)]


def test_a_box_claiming_ten_thousand_gpus_gets_a_bounded_series_count_and_says_so() -> None:
    """A hostile box's nvidia-smi answer: 10,000 rows, one repeating an index (two series
    alike would spoil the whole scrape), a 10 kB model name with escapes."""
    odd = "\x1b[2J\n" + "Z" * 10_000
    lines = [f"{i}, {odd if i == 3 else 'H100'}, 50, 1, 2, 3, 4" for i in range(10_000)]
    lines.insert(1, "0, H100, 99, 1, 2, 3, 4")  # index 0 again
    gpus, _ = parse_gpu_rows(lines)
    text, samples = _exposed([BoxState(name="b", connection=Connection.OK, gpus=gpus)])
    util = samples["gpurent_gpu_utilization_ratio"]
    assert len(util) == MAX_GPUS_PER_BOX
    assert sorted(int(labels["gpu"]) for labels, _ in util) == list(range(MAX_GPUS_PER_BOX))
    assert [v for labels, v in util if labels["gpu"] == "0"] == [0.5]  # the first row's
    models = {labels["model"] for labels, _ in util}
    assert all(len(m) <= LABEL_CHARS and m.isprintable() for m in models)
    assert samples["gpurent_gpus_truncated"] == [({"box": "b", "provider": "vast"},
                                                  10_001 - MAX_GPUS_PER_BOX)]
    assert len(text) < 150_000


def test_names_equal_after_the_cut_stay_two_series() -> None:
    long = "x" * 100
    _, samples = _exposed([BoxState(name="b", connection=Connection.OK,
                                    runs=(_run(long + "1", "/r/1"), _run(long + "2", "/r/2")))])
    names = {labels["run"] for labels, _ in samples["gpurent_run_health"]}
    assert len(names) == 2 and all(len(n) <= LABEL_CHARS for n in names)


def test_actions_count_by_kind_and_outcome() -> None:
    _, samples = _exposed([BoxState(name="b")], {("b", "push", "done"): 2,
                                                  ("b", "stop", "unknown"): 1})
    assert sorted((labels["kind"], labels["outcome"], v)
                  for labels, v in samples["gpurent_action_total"]) == \
        [("push", "done", 2.0), ("stop", "unknown", 1.0)]
    assert samples["gpurent_box_up"][0][1] == 0.0


def test_label_value_strips_control_sequences() -> None:
    assert label_value("\x1b[31mred\x1b[0m\nx") == "red x"
    assert all(c.isprintable() for c in label_value("\x1b]0;title\x07a\tb\rc"))


@pytest.mark.parametrize(("text", "want"), [
    ("127.0.0.1:0", ("127.0.0.1", 0)), (":9100", ("127.0.0.1", 9100)),
    ("9100", ("127.0.0.1", 9100)), ("0.0.0.0:9100", ("0.0.0.0", 9100)),
    ("[::1]:9100", ("::1", 9100))])
def test_listen_addresses(text: str, want: tuple[str, int]) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["host:", "host:http", "1:70000", "127.0.0.1:-1"])
def test_bad_listen_addresses_name_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match="--metrics"):
        parse_listen(text)


def test_a_box_at_rest_is_told_apart_from_a_box_down() -> None:
    """A box we stopped reads at rest (kind, by whom), one down with no stop of ours does
    not: the unreachable alert pages for the second only."""
    _, samples = _exposed([
        BoxState(name="b", connection=Connection.UNREACHABLE,
                 rest=Rest("stopped", "budget", 1.8e9)),
        BoxState(name="down", connection=Connection.UNREACHABLE)])
    rest = {labels["box"]: (labels, v) for labels, v in samples["gpurent_box_at_rest"]}
    assert rest["b"] == ({"box": "b", "provider": "vast", "kind": "stopped", "by": "budget"},
                         1.0)
    assert rest["down"][1] == 0.0 and rest["down"][0]["kind"] == ""
    assert {labels["box"]: v for labels, v in samples["gpurent_box_up"]} == \
        {"b": 0.0, "down": 0.0}


@pytest.mark.parametrize(("box", "want"), [
    (BoxState(name="b", connection=Connection.OK, guard=GuardView(
        armed=True, fired=GuardStep("stalled", "fired", 1.8e9, "no progress"))),
     ("stalled", "seen")),
    (BoxState(name="b", connection=Connection.OK, guard=GuardView(
        armed=True, dry_run=True, fired=GuardStep("idle", "fired", 1.8e9, "GPUs idle"))),
     ("idle", "dry_run")),
    (BoxState(name="b", connection=Connection.UNREACHABLE,
              rest=Rest("stopped", "watchdog", 1.8e9, sure=False, note="most likely")),
     ("unknown", "likely")),
    (BoxState(name="b", connection=Connection.OK, guard=GuardView(armed=True)), None),
])
def test_the_watchdogs_firing_is_one_series_saying_how_it_is_known(
        box: BoxState, want: tuple[str, str] | None) -> None:
    _, samples = _exposed([box])
    ((labels, value),) = samples["gpurent_watchdog_fired"]
    if want is None:
        assert value == 0.0 and labels["trigger"] == labels["how"] == ""
    else:
        assert value == 1.0 and (labels["trigger"], labels["how"]) == want


def test_the_fleets_budget_and_spend_are_the_status_documents() -> None:
    cost = FleetCost(boxes={}, usd_per_hr=2.0, accrued_usd=81.5, today_usd=3.0,
                     to_finish_usd=0.0, budget_usd=100.0, budget_level="warning")
    families = {f.name: f for f in metric_families([], cost, {}, {}, {}, 1.8e9)}
    assert families["gpurent_fleet_budget_usd"].series == [((), 100.0)]
    assert families["gpurent_fleet_spent_usd_total"].series == [((), 81.5)]
    unbudgeted = {f.name: f for f in metric_families(
        [], FleetCost(boxes={}, usd_per_hr=0, accrued_usd=0, today_usd=0, to_finish_usd=0),
        {}, {}, {}, 1.8e9)}
    assert unbudgeted["gpurent_fleet_budget_usd"].series == []  # no budget: no sample


def test_every_familys_name_is_the_sample_name_it_is_served_as() -> None:
    """The rules and the dashboard name what a scrape shows; a counter's family carries
    its `_total` already, so the families' names are those."""
    families = metric_families([], None, {}, {}, {}, 1.8e9)
    for family in families:
        family.add(tuple("x" for _ in family.labels), 1)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    served = {s.name for f in text_string_to_metric_families(generate_latest(registry).decode())
              for s in f.samples}
    assert served == {f.name for f in families}
