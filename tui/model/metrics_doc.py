"""What `watch --metrics` serves: the fleet as Prometheus metric families. Pure.

The figures are read from `status --json`'s own documents (box_document, run_document),
so a scrape and a `status --json` of the same instant agree by construction. Run names
and other words a box sends become label values: each is cleaned of control sequences,
kept to printable characters and cut to LABEL_CHARS; a box's runs are cut to
MAX_RUNS_PER_BOX (the rest counted in `gpurent_truncated`) and its GPUs to MAX_GPUS_PER_BOX
(the rest, and any repeated index, counted in `gpurent_gpus_truncated`), so a hostile box
can neither break the text format nor blow up the series count.

A [[serverless]] entry (Modal, Beam) is read from its own `status --json` part
(serverless_document): its app in the `gpurent_serverless_*` families, its runs in the
`gpurent_run_*` families with `box` = the entry's name (names are unique across boxes and
entries, so `on (instance, box)` joins a run to its app) and `provider` = modal or beam.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tui.model.box import BoxState, Connection
from tui.model.guard import PushRecord
from tui.model.meter import FleetCost
from tui.model.runs import Health
from tui.model.serverless_doc import Entry, serverless_document
from tui.model.status_doc import box_document, fleet_document, run_document
from tui.model.text import plain

LABEL_CHARS = 64  # a label value's length at most (run names, metric names, action kinds)
MAX_RUNS_PER_BOX = 50  # runs per box given series; running ones first, the rest counted
MAX_GPUS_PER_BOX = 64  # GPUs per box given series (a box's own probe reads no more); the
# rest, and rows repeating an index (two series alike would spoil the scrape), counted
DEFAULT_HOST = "127.0.0.1"

Kind = Literal["gauge", "counter"]


@dataclass(frozen=True)
class Family:
    """One metric family: its name (a counter's ends in _total), type, help, label names
    and series (label values in that order, value)."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    series: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, values: tuple[str, ...], value: float | int | bool | None) -> None:
        """A series, unless its value is unknown (None: no sample rather than a made-up 0)."""
        if value is None:
            return
        self.series.append((values, float(value)))


def label_value(text: object, cap: int = LABEL_CHARS) -> str:
    """A label value from words a box may have sent: no control sequences, printable
    characters only, at most `cap` of them (a cut one ends in "~")."""
    words = "".join(c if c.isprintable() else "?" for c in plain(str(text), 4 * cap))
    return words if len(words) <= cap else words[:cap - 1] + "~"


def action_kind(what: str) -> str:
    """An action's kind for `gpurent_action_total`: "milestone push (run completed)" ->
    "milestone push"."""
    return label_value(what.split(" (", 1)[0])


def parse_listen(text: str) -> tuple[str, int]:
    """`--metrics HOST:PORT` (or `:PORT`, `PORT`, `[::1]:PORT`); port 0: a free one.
    ValueError with the words to show otherwise."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--metrics {text!r}: expected HOST:PORT (port 0 for a free one)"
                         ) from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--metrics {text!r}: port {port} is not a port "
                         "(1 to 65535, or 0 for a free one)")
    return host or DEFAULT_HOST, port


def _ratio(pct: float | None) -> float | None:
    return None if pct is None else pct / 100.0


def _watchdog_fired(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(trigger, how) when the box's watchdog fired, from `status --json`'s guard and rest:
    "seen" (its state says it fired), "dry_run" (it only said what it would do), "likely"
    (the box went silent as a trigger came due), or a rest the journal puts on the watchdog
    with neither read ("seen" when that stop was seen, "likely" otherwise)."""
    guard, rest = doc["guard"] or {}, doc["rest"] or {}
    if guard.get("fired"):
        return str(guard["fired"]["trigger"]), "dry_run" if guard.get("dry_run") else "seen"
    if guard.get("likely_fired"):
        return str(guard["likely_fired"]["trigger"]), "likely"
    if rest.get("by") == "watchdog":
        return "unknown", "seen" if rest.get("sure") else "likely"
    return None


def _kept_runs(doc: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The box's runs given series (running ones first, then in the box's order) and how
    many were left out."""
    runs = list(doc["runs"])
    ordered = sorted(runs, key=lambda r: r["health"] != Health.RUNNING)  # stable
    return ordered[:MAX_RUNS_PER_BOX], max(0, len(runs) - MAX_RUNS_PER_BOX)


def _kept_gpus(doc: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The box's GPU rows given series (the first MAX_GPUS_PER_BOX distinct indexes, in the
    box's order) and how many rows were left out."""
    rows, seen = list(doc["gpus"]), set()
    kept: list[Mapping[str, Any]] = []
    for row in rows:
        if len(kept) < MAX_GPUS_PER_BOX and row["index"] not in seen:
            seen.add(row["index"])
            kept.append(row)
    return kept, len(rows) - len(kept)


def _share(used: float | None, total: float | None) -> float | None:
    """used / total, unknown without a positive total."""
    return None if used is None or total is None or total <= 0 else used / total


def _run_labels(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each run's `run` label: its cleaned, cut name; two that read the same after the
    cut get "#2", "#3" so no two series of a box collide."""
    seen: dict[str, int] = {}
    out = []
    for run in runs:
        name = label_value(run["name"] or run["path"])
        count = seen.get(name, 0) + 1
        seen[name] = count
        out.append(name if count == 1 else label_value(name, LABEL_CHARS - 4) + f"#{count}")
    return out


def _eta_past_timeout(run: Mapping[str, Any]) -> bool | None:
    """Whether a live serverless run's ETA lies past its timeout (it is killed before it
    ends); None when either is unknown or the run is not live."""
    left, eta = run.get("timeout_seconds_left"), run["eta_seconds"]
    if left is None or eta is None or run["health"] not in (Health.RUNNING, Health.STALLED):
        return None
    return bool(eta > left)


def _timeout_left(doc: Mapping[str, Any]) -> float | None:
    """Seconds until the entry's timeout kills its live run (the soonest of them)."""
    lefts = [r["timeout_seconds_left"] for r in doc["runs"]
             if r["timeout_seconds_left"] is not None
             and r["health"] in (Health.RUNNING, Health.STALLED)]
    return min(lefts) if lefts else None


def metric_families(boxes: Iterable[BoxState], cost: FleetCost | None,
                    pushes: Mapping[str, Mapping[str, PushRecord]],
                    providers: Mapping[str, str],
                    actions: Mapping[tuple[str, str, str], int],
                    now: float, serverless: Sequence[Entry] = ()) -> list[Family]:
    """Every family for one scrape. `providers`: box -> its provider (the config);
    `actions`: (box, kind, outcome) -> actions ended since watch started; `serverless`:
    each [[serverless]] entry with its last poll."""
    box_l, run_l = ("box", "provider"), ("box", "provider", "run")
    up = Family("gpurent_box_up", "gauge", "1 while the box answers its probes", box_l)
    rate = Family("gpurent_box_usd_per_hour", "gauge",
                  "what the box is billed per hour now (status --json cost.usd_per_hr)", box_l)
    spent = Family("gpurent_box_spent_usd_total", "counter",
                   "dollars the box has accrued (status --json cost.accrued_usd)", box_l)
    busy = Family("gpurent_box_gpu_busy_ratio", "gauge",
                  "the box's GPUs' busy share over the billed time, 0 to 1", box_l)
    idle_gpu = Family("gpurent_box_gpu_idle_usd", "gauge",
                      "the card's running money x (1 - busy share): paid for GPU time that "
                      "went unused (status --json cost.gpu_idle_usd)", box_l)
    covered = Family("gpurent_box_gpu_busy_covered_seconds", "gauge",
                     "the seconds the busy share rests on (status --json gpu_busy_covered_s)",
                     box_l)
    disk = Family("gpurent_box_disk_used_ratio", "gauge",
                  "used share of the filesystem holding a runs root, 0 to 1", (*box_l, "root"))
    armed = Family("gpurent_watchdog_armed", "gauge",
                   "1 while the box's on-box watchdog is armed", box_l)
    truncated = Family("gpurent_truncated", "gauge",
                       f"runs of the box given no series (over {MAX_RUNS_PER_BOX} per box)",
                       box_l)
    gpu_l = (*box_l, "gpu", "model")
    gpu_util = Family("gpurent_gpu_utilization_ratio", "gauge",
                      "the GPU's utilisation at the box's last reading, 0 to 1 (gpu: its "
                      "index; model: its name)", gpu_l)
    gpu_mem = Family("gpurent_gpu_memory_used_ratio", "gauge",
                     "the GPU's memory in use at the box's last reading, 0 to 1", gpu_l)
    gpu_temp = Family("gpurent_gpu_temperature_celsius", "gauge",
                      "the GPU's temperature at the box's last reading", gpu_l)
    gpu_power = Family("gpurent_gpu_power_watts", "gauge",
                       "the GPU's power draw at the box's last reading", gpu_l)
    gpus_cut = Family("gpurent_gpus_truncated", "gauge",
                      f"GPU rows of the box given no series (over {MAX_GPUS_PER_BOX} per box, "
                      "or an index repeated)", box_l)
    epoch = Family("gpurent_run_epoch", "gauge", "the run's current epoch", run_l)
    epochs = Family("gpurent_run_epochs_total", "gauge", "the epochs the run will train",
                    run_l)
    eta = Family("gpurent_run_eta_seconds", "gauge", "seconds until the run ends", run_l)
    loss = Family("gpurent_run_train_loss", "gauge", "the run's last training loss", run_l)
    best = Family("gpurent_run_best_metric", "gauge",
                  "the run's best validation metric so far", (*run_l, "metric"))
    health = Family("gpurent_run_health", "gauge",
                    "1 for the run's current health, 0 for the others", (*run_l, "health"))
    unpushed = Family("gpurent_run_unpushed_usd", "gauge",
                      "GPU dollars since the run's last verified push: what a crash loses",
                      run_l)
    finish = Family("gpurent_run_usd_to_finish", "gauge",
                    "dollars the run's remaining epochs will cost", run_l)
    at_rest = Family("gpurent_box_at_rest", "gauge",
                     "1 while the box is stopped or destroyed on purpose (kind, by whom), "
                     "so its silence is expected; else 0", (*box_l, "kind", "by"))
    fired = Family("gpurent_watchdog_fired", "gauge",
                   "1 when the box's watchdog fired (trigger; how: seen, likely, dry_run)",
                   (*box_l, "trigger", "how"))
    box_budget = Family("gpurent_box_budget_usd", "gauge",
                        "the box's budget (status --json cost.budget_usd)", box_l)
    fleet_budget = Family("gpurent_fleet_budget_usd", "gauge",
                          "the fleet's budget (status --json fleet.budget_usd)", ())
    fleet_spent = Family("gpurent_fleet_spent_usd_total", "counter",
                         "dollars the fleet has accrued (status --json fleet.accrued_usd)", ())
    past_timeout = Family("gpurent_run_eta_past_timeout", "gauge",
                          "1 when a serverless run's ETA is past its app's timeout (the "
                          "provider kills it before it ends), else 0", run_l)
    app_l = ("box", "provider", "app")
    svl_up = Family("gpurent_serverless_up", "gauge",
                    "1 while the serverless app runs (state: its provider CLI's word; box: "
                    "the [[serverless]] entry's name)", (*app_l, "state"))
    svl_tasks = Family("gpurent_serverless_tasks", "gauge",
                       "the serverless app's running containers, as its CLI says", app_l)
    svl_left = Family("gpurent_serverless_timeout_seconds_left", "gauge",
                      "seconds until the app's timeout kills its current run", app_l)
    svl_timeout = Family("gpurent_serverless_timeout_seconds", "gauge",
                         "the app's timeout (the config's, or the script's timeout=)", app_l)
    svl_usd = Family("gpurent_serverless_estimated_usd", "gauge",
                     "an ESTIMATE of the app's runs' cost: GPU-seconds x the per-second "
                     "price; the provider's bill also has CPU, memory and start-up", app_l)
    svl_gpu_s = Family("gpurent_serverless_gpu_seconds", "gauge",
                       "GPU-seconds of the app's runs read (an estimate, from their times)",
                       app_l)
    svl_problem = Family("gpurent_serverless_no_timeout", "gauge",
                         "1 when the app's script sets no timeout= (a hung run bills "
                         "forever), else 0", app_l)
    done = Family("gpurent_action_total", "counter",
                  "actions ended since watch started, by kind and outcome",
                  ("box", "kind", "outcome"))

    def run_series(where: tuple[str, str], runs: list[Mapping[str, Any]]) -> None:
        for run, label in zip(runs, _run_labels(runs), strict=True):
            at = (*where, label)
            epoch.add(at, run["current_epoch"])
            epochs.add(at, run["total_epochs"])
            eta.add(at, run["eta_seconds"])
            loss.add(at, run["train_loss"])
            best.add((*at, label_value(run["best_metric_name"] or "best")), run["best_metric"])
            for h in Health:
                health.add((*at, str(h)), run["health"] == h)
            unpushed.add(at, run["unpushed_usd"])
            finish.add(at, run["cost_to_finish_usd"])
            past_timeout.add(at, _eta_past_timeout(run))

    for box in boxes:
        doc = box_document(box, cost.boxes.get(box.name) if cost else None,
                           pushes.get(box.name), now)
        name = label_value(box.name)
        where = (name, label_value(providers.get(box.name, "manual")))
        up.add(where, box.connection is Connection.OK)
        rest = doc["rest"]
        at_rest.add((*where, label_value(rest["kind"]), label_value(rest["by"])) if rest
                    else (*where, "", ""), rest is not None)  # "": Prometheus drops the label
        why = _watchdog_fired(doc)
        fired.add((*where, label_value(why[0]), why[1]) if why else (*where, "", ""),
                  why is not None)
        money = doc["cost"] or {}
        rate.add(where, money.get("usd_per_hr"))
        spent.add(where, money.get("accrued_usd"))
        box_budget.add(where, money.get("budget_usd"))
        billed_busy = money.get("gpu_busy_pct")  # over the billed time; else the probes'
        busy.add(where, _ratio(billed_busy if billed_busy is not None else doc["gpu_busy_pct"]))
        idle_gpu.add(where, money.get("gpu_idle_usd"))
        covered.add(where, money.get("gpu_busy_covered_s") if billed_busy is not None else None)
        for d in doc["disks"]:
            disk.add((*where, label_value(d["root"])), _ratio(d["used_pct"]))
        armed.add(where, bool(doc["guard"] and doc["guard"]["armed"]))
        gpus, gpus_left_out = _kept_gpus(doc)
        gpus_cut.add(where, gpus_left_out)
        for g in gpus:
            gpu_at = (*where, label_value(g["index"]), label_value(g["name"]))
            gpu_util.add(gpu_at, _ratio(g["util_pct"]))
            gpu_mem.add(gpu_at, _share(g["mem_used_mib"], g["mem_total_mib"]))
            gpu_temp.add(gpu_at, g["temp_c"])
            gpu_power.add(gpu_at, g["power_w"])
        runs, left_out = _kept_runs(doc)
        truncated.add(where, left_out)
        run_series(where, runs)
    for entry, state in serverless:
        doc = serverless_document(entry, state, now, run_document)
        where = (label_value(entry.name), label_value(entry.provider))
        app_at = (*where, label_value(entry.app))
        svl_up.add((*app_at, label_value(doc["state"] or "")), doc["state"] == "running")
        svl_tasks.add(app_at, doc["tasks"])
        svl_left.add(app_at, _timeout_left(doc))
        svl_timeout.add(app_at, doc["timeout_seconds"])
        svl_usd.add(app_at, doc["estimated_cost_usd"])
        svl_gpu_s.add(app_at, doc["gpu_seconds"])
        svl_problem.add(app_at, doc["no_timeout"])
        run_series(where, _kept_runs(doc)[0])  # a poll reads 16 runs: none are cut here
    fleet = fleet_document(cost) or {}
    fleet_budget.add((), fleet.get("budget_usd"))
    fleet_spent.add((), fleet.get("accrued_usd"))
    for (box_name, kind, outcome), count in sorted(actions.items()):
        done.add((label_value(box_name), label_value(kind), label_value(outcome)), count)
    families = [up, at_rest, rate, spent, box_budget, busy, idle_gpu, covered, disk, armed,
                fired, truncated, gpu_util, gpu_mem, gpu_temp, gpu_power, gpus_cut,
                epoch, epochs, eta, loss, best, health, unpushed, finish, past_timeout,
                svl_up, svl_tasks, svl_left, svl_timeout, svl_usd, svl_gpu_s, svl_problem,
                done, fleet_budget, fleet_spent]
    for family in families:  # a box's nonsense number is no sample, not a NaN in a graph
        family.series[:] = [(v, x) for v, x in family.series if math.isfinite(x)]
    return families
