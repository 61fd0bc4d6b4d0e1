"""Alerts: the events worth telling a person who is not looking, once each. Pure.

An event is born when something enters a bad state (a run turns failed, dead
or stalled; a box goes idle, over budget, unreachable for longer than
`unreachable_minutes`, stopped by its provider; a push fails; the box's
watchdog acted), never at every look while it stays there. `gate` then lets
each event through once per cool-down: the same kind on the same box and run
is not sent again within `cooldown_minutes`, however often it flaps.

An event's document holds only names, words and times: never a URL, a token
or anything from the config beyond the box's name. It is what a webhook gets
(in the chosen format's body) and what an alert command reads on stdin.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal, get_args

from tui.model.box import BoxState, Connection
from tui.model.config import LOOPBACK_HOSTS
from tui.model.redact import redact
from tui.model.runs import Health, format_age
from tui.model.sizing import project_disk
from tui.model.text import clean

AlertKind = Literal["run_failed", "run_died", "run_stalled", "box_idle", "over_budget",
                    "push_failed", "watchdog_acted", "unreachable", "preempted", "box_stopped",
                    "disk_fill", "gpu_underused"]
RUN_FAILED: Final = "run_failed"
RUN_DIED: Final = "run_died"
RUN_STALLED: Final = "run_stalled"
BOX_IDLE: Final = "box_idle"
OVER_BUDGET: Final = "over_budget"
PUSH_FAILED: Final = "push_failed"
WATCHDOG_ACTED: Final = "watchdog_acted"
UNREACHABLE: Final = "unreachable"
PREEMPTED: Final = "preempted"
BOX_STOPPED: Final = "box_stopped"  # stopped while a watchdog was armed: whose stop?
DISK_FILL: Final = "disk_fill"  # a runs root will fill before its running runs finish
GPU_UNDERUSED: Final = "gpu_underused"  # a run progresses on GPUs that stay mostly idle
KINDS: tuple[AlertKind, ...] = get_args(AlertKind)
TITLES: dict[AlertKind, str] = {
    RUN_FAILED: "run failed", RUN_DIED: "run died", RUN_STALLED: "run stalled",
    BOX_IDLE: "box idle", OVER_BUDGET: "box over budget", PUSH_FAILED: "push failed",
    WATCHDOG_ACTED: "watchdog acted", UNREACHABLE: "box unreachable",
    PREEMPTED: "box stopped by the provider",
    BOX_STOPPED: "box stopped (by its watchdog or the provider?)",
    DISK_FILL: "disk will fill", GPU_UNDERUSED: "GPU under-used"}
_RUN_KINDS: dict[Health, AlertKind] = {Health.FAILED: RUN_FAILED, Health.DEAD: RUN_DIED,
                                       Health.STALLED: RUN_STALLED}
TEXT_LIMIT = 1000
DISCORD_LIMIT = 2000


@dataclass(frozen=True)
class AlertEvent:
    kind: AlertKind
    box: str
    text: str
    at: float
    run: str | None = None

    @property
    def key(self) -> tuple[str, str, str | None]:
        """What "the same event" means for the cool-down."""
        return (self.kind, self.box, self.run)

    @property
    def title(self) -> str:
        return f"gpurent-tui: {TITLES.get(self.kind, self.kind)} on {self.box}"

    def document(self) -> dict[str, Any]:
        """The secret-free event, as the `json` format and alert commands get it."""
        return {"schema": "gpurent.alert/1", "kind": self.kind, "box": self.box,
                "run": self.run, "text": self.text, "title": self.title,
                "at": datetime.fromtimestamp(self.at, UTC).isoformat(timespec="seconds")}

    def log_line(self) -> str:
        run = f" run={clean(self.run)!r}" if self.run is not None else ""
        return f"alert {self.kind} box={clean(self.box)!r}{run}: {clean(self.text)}"


def event(kind: AlertKind, box: str, text: str, at: float, run: str | None = None) -> AlertEvent:
    """An event of a known kind, its words (a box's, in part) redacted, cleaned of control
    sequences and bounded."""
    if kind not in KINDS:
        raise ValueError(f"unknown alert kind {kind!r}")
    words = clean(redact(text))
    if len(words) > TEXT_LIMIT:
        words = words[:TEXT_LIMIT - 1] + "…"
    return AlertEvent(kind, box, words, at, clean(run) if run is not None else None)


def watchdog_acted(box: str, what: str, at: float) -> AlertEvent:
    """The box's watchdog did something while nobody looked (pushed, stopped, destroyed):
    for the code that reads the watchdog's state off the box."""
    return event(WATCHDOG_ACTED, box, f"{box}: the watchdog on the box acted: {what}", at)


def run_events(before: BoxState | None, after: BoxState, now: float) -> list[AlertEvent]:
    """Runs that just turned failed, dead or stalled (not those already so at the last
    look, nor any at the first look of a box: those are history, not news)."""
    if before is None or before.last_ok_at is None:
        return []
    was = {r.path: r.health for r in before.runs}
    found = []
    for run in after.runs:
        kind = _RUN_KINDS.get(run.health)
        if kind is not None and was.get(run.path, Health.RUNNING) is not run.health \
                and run.path in was:
            found.append(event(kind, after.name, f"{after.name}/{clean(run.name)}: "
                               f"{run.health}: {run.reason}", now, run.name))
    return found


def unreachable_event(state: BoxState, minutes: float, now: float) -> AlertEvent | None:
    """A box failing to answer for longer than `minutes` (its state says since when)."""
    if state.connection in (Connection.OK, Connection.CONNECTING) or state.failed_since is None:
        return None
    if now - state.failed_since < minutes * 60:
        return None
    return event(UNREACHABLE, state.name, f"{state.name} has not answered for "
                 f"{format_age(now - state.failed_since)} ({state.connection}: "
                 f"{state.error or 'no answer'})", now)


def disk_fill_event(state: BoxState, now: float) -> AlertEvent | None:
    """A runs root that will fill before the running runs on it finish (sizing's
    projection: checkpoints still to come and logs against what is free)."""
    if state.connection is not Connection.OK:
        return None
    fills = [w.message for w in project_disk(state).warnings if w.severity == "warning"]
    if not fills:
        return None
    return event(DISK_FILL, state.name, f"{state.name}: " + "; ".join(fills), now)


def gpu_underused_events(state: BoxState, usd_per_hr: float | None, below_pct: float,
                         minutes: float) -> list[AlertEvent]:
    """Runs that progress (Health.RUNNING: not `idle`, which is no progress at all) while
    the box's GPUs stayed under `below_pct` busy over the last `minutes` (the driver's own
    averages, on the clock the box's answers were folded on). The caller sends each once
    per run."""
    now = state.last_ok_at
    if state.connection is not Connection.OK or now is None:
        return []
    gpu = state.gpus[0].name.removeprefix("NVIDIA ") if state.gpus else "GPU"
    of = f"{len(state.gpus)} x {gpu}" if len(state.gpus) > 1 else f"an {gpu}" \
        if gpu[:1].upper() in "AEFHILMNORSX" else f"a {gpu}"
    paying = f"paying ${usd_per_hr:.2f}/hr" if usd_per_hr is not None else "paying"
    found = []
    for run in state.runs:
        busy = run.busy.trailing(now, minutes) if run.health is Health.RUNNING else None
        if busy is None or busy >= below_pct:
            continue
        found.append(event(GPU_UNDERUSED, state.name, (
            f"{state.name}/{clean(run.name)}: {paying} for {busy:.0f}% of {of} over the last "
            f"{minutes:g} min: dataloader-bound? `gpurent-tui profile {state.name}`"),
            now, run.name))
    return found


@dataclass(frozen=True)
class Gate:
    """When each event key was last sent."""

    sent: Mapping[tuple[str, str, str | None], float] = field(default_factory=dict)


def gate(memory: Gate, events: Iterable[AlertEvent], now: float, cooldown_minutes: float
         ) -> tuple[list[AlertEvent], Gate]:
    """The events to send now: each key once per cool-down (duplicates in one batch too)."""
    sent = dict(memory.sent)
    out = []
    for item in events:
        last = sent.get(item.key)
        if last is not None and now - last < cooldown_minutes * 60:
            continue
        sent[item.key] = now
        out.append(item)
    return out, replace(memory, sent=sent)


# --- webhook bodies -----------------------------------------------------------------

NTFY_TAGS = {RUN_FAILED: "x", RUN_DIED: "skull", RUN_STALLED: "hourglass", BOX_IDLE: "zzz",
             OVER_BUDGET: "money_with_wings", PUSH_FAILED: "warning",
             WATCHDOG_ACTED: "robot", UNREACHABLE: "electric_plug", PREEMPTED: "stop_sign",
             BOX_STOPPED: "stop_sign", DISK_FILL: "floppy_disk",
             GPU_UNDERUSED: "snail"}


def webhook_request(url: str, fmt: str, item: AlertEvent) -> tuple[str, bytes]:
    """Where to POST and the JSON body, in the format the receiver wants.

    ntfy takes JSON at its root URL with the topic in the body (the configured
    URL is the topic's, https://ntfy.sh/<topic>); Slack-compatible hooks take
    `text`, Discord-compatible ones `content` (at most 2000 characters)."""
    line = f"{item.title}: {item.text}"
    body: dict[str, Any]
    if fmt == "ntfy":
        scheme, authority, path = _split(url)
        base, _, topic = path.rstrip("/").rpartition("/")
        url = f"{scheme}://{authority}{base or '/'}"
        body = {"topic": topic, "title": item.title, "message": item.text,
                "tags": [NTFY_TAGS.get(item.kind, "bell")],
                "priority": 4 if item.kind in (RUN_DIED, RUN_FAILED, PREEMPTED) else 3}
    elif fmt == "slack":
        body = {"text": line}
    elif fmt == "discord":
        body = {"content": line if len(line) <= DISCORD_LIMIT else
                line[:DISCORD_LIMIT - 1] + "…"}
    else:
        body = item.document()
    return url, json.dumps(body).encode()


def _split(url: str) -> tuple[str, str, str]:
    """scheme, authority (user@host:port), path (no query or fragment) of an http(s) URL."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    path = (slash + path).split("?", 1)[0].split("#", 1)[0]
    return scheme, authority.split("?", 1)[0].split("#", 1)[0], path


# Webhook services whose host name is the same for everyone (the secret is in the path):
# naming the host tells which service, and nothing an attacker could use.
PUBLIC_WEBHOOK_HOSTS = frozenset({"ntfy.sh", "hooks.slack.com", "discord.com",
                                  "discordapp.com", "canary.discord.com"})


def webhook_label(url: str, name: str | None = None) -> str:
    """How logs name the webhook: the config's `webhook_name`, else "webhook" with the
    host only where it is a known public service's or this machine's. Never the path,
    query or user, nor any other host: `https://SECRET.m.pipedream.net/` keeps its
    secret in the host name."""
    if name:
        return f"webhook {clean(name)!r}"
    _, authority, _ = _split(url)
    host = authority.rpartition("@")[2]
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    host = host.lower().rstrip(".")
    if host in PUBLIC_WEBHOOK_HOSTS or host in LOOPBACK_HOSTS or \
            re.fullmatch(r"127(\.\d{1,3}){3}", host):
        return f"webhook ({host})"
    return "webhook"
