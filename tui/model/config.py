"""The fleet config: TOML text in, immutable settings out, or every problem at once.

Pure: the caller reads the file; this module only parses and validates, so a
bad config is reported with the file, the box and the key without touching
the network or the disk.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tui.model.fanout import ConnectLimits
from tui.model.keys import key_clashes

PROVIDERS = ("manual", "vast", "runpod", "lambda")
SERVERLESS_PROVIDERS = ("modal", "beam")
HOST_KEY_POLICIES = ("strict", "accept-new")
DEFAULT_RUNS_ROOTS = ("/root/runs",)
DEFAULT_REFRESH_SECONDS = 5.0
DEFAULT_TIMEOUT_SECONDS = 15.0
DEFAULT_IDLE_MINUTES = 10.0
DEFAULT_PYTHON = "python3"
BUDGET_ACTIONS = ("warn", "push-and-stop")
UPLOAD_FROM = ("box", "panel")
ALERT_FORMATS = ("json", "ntfy", "slack", "discord")
DEFAULT_ALERT_COOLDOWN_MINUTES = 30.0
DEFAULT_UNREACHABLE_MINUTES = 10.0
DEFAULT_GPU_UNDERUSED_PCT = 30.0
DEFAULT_GPU_UNDERUSED_MINUTES = 15.0
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
# The panel's binding ids that `[keys]` may remap (the app checks it defines each).
KEY_ACTIONS = ("quit", "refresh", "open", "filter", "cost", "push", "push_box", "stop", "start",
               "destroy", "journal", "next", "previous", "help", "back", "series",
               "confirm_yes", "confirm_no", "destroy_cancel", "destroy_push_first",
               "destroy_override", "destroy_without_snapshots", "launch", "monitor",
               "launch_go", "launch_cancel", "check", "doctor", "focus_next", "focus_previous",
               "cancel", "profile", "palette")


@dataclass(frozen=True)
class Pricing:
    """What a box costs, from the config (fills in or overrides a provider's API)."""

    running_usd_per_hr: float | None = None
    disk_gb: float | None = None
    storage_usd_per_gb_month: float | None = None
    rebuild_usd: float | None = None
    hours_per_month: float | None = None


@dataclass(frozen=True)
class PushTarget:
    """Where a run's checkpoints go: a Hugging Face repo and/or a local folder.

    `upload_from = "box"` (the default) sends the Hub token to the box, which
    uploads itself; `"panel"` pulls the files to the panel's machine and uploads
    from there, so a box the user does not trust never sees a token.
    `token_env` names the variable holding this box's token (a fine-grained
    token scoped to one repo), instead of HF_TOKEN.
    """

    hf_repo: str | None = None
    local_dir: str | None = None
    token_env: str | None = None
    upload_from: str = "box"
    # Milestone pushes, made while a box is watched (the panel or `watch`), unasked:
    # every N-th epoch's epoch_<N>.pt, best.pt when it improved, a run that completed.
    every_epochs: int | None = None
    on_best: bool = False
    on_complete: bool = False

    @property
    def milestones(self) -> bool:
        return bool(self.every_epochs or self.on_best or self.on_complete)


@dataclass(frozen=True)
class AlertConfig:
    """Where alerts go besides the terminal bell: a webhook (its URL may hold a secret:
    it is never logged) and/or a local command fed the event as JSON on stdin."""

    webhook: str | None = field(default=None, repr=False)  # may hold a secret
    webhook_name: str | None = None  # how logs name the webhook (its URL never)
    format: str = "json"
    command: str | None = None
    cooldown_minutes: float = DEFAULT_ALERT_COOLDOWN_MINUTES
    unreachable_minutes: float = DEFAULT_UNREACHABLE_MINUTES
    # `gpu_underused`: a progressing run whose GPUs stayed under this busy % this long
    gpu_underused_pct: float = DEFAULT_GPU_UNDERUSED_PCT
    gpu_underused_minutes: float = DEFAULT_GPU_UNDERUSED_MINUTES


@dataclass(frozen=True)
class BoxConfig:
    """One rented box as the user described it."""

    name: str
    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    jump: str | None = None
    runs_roots: tuple[str, ...] = DEFAULT_RUNS_ROOTS
    provider: str = "manual"
    instance_id: str | None = None
    timeout_seconds: float | None = None
    budget_usd: float | None = None
    # manual boxes: commands run over SSH on the box to stop or destroy it
    stop_command: str | None = None
    destroy_command: str | None = None
    # run on the panel's machine after a manual box's stop/destroy: exit 0 = effect seen
    observe_command: str | None = None
    pricing: Pricing | None = None
    push: PushTarget | None = None
    # The interpreter training runs with (rented images keep torch in a conda or
    # venv python): `check` and `doctor` run there. The probe keeps python3.
    python: str = DEFAULT_PYTHON
    # The box's persistent volume (RunPod: /workspace): what survives a stop.
    persistent: str | None = None
    # false: a box with no GPU, trained on with --device cpu; `check` expects no CUDA there.
    gpu: bool = True
    # Set by the demo for its replaying boxes (never read from a config): why there is no
    # torch or LibreYOLO to check, doctor, monitor or profile there, said instead of trying.
    stand_in: str | None = None


@dataclass(frozen=True)
class ServerlessConfig:
    """One serverless app (Modal, Beam) as the user described it: where its runs are."""

    name: str
    provider: str  # one of SERVERLESS_PROVIDERS
    app: str
    volume: str
    runs_path: str  # the runs root on the volume
    gpu: str  # as the script asks for it: "H100", "A100-80GB:4"
    timeout: float | None = None  # seconds, as the script's timeout= sets it
    usd_per_gpu_second: float | None = None  # overrides the provider's published price
    cli: str | None = None  # the provider's CLI, when not on PATH
    local_dir: str | None = None  # where `p` copies a run's weights (as [box.push] local_dir)
    # The Modal/Beam script, relative to the config file; its GPU function's literal
    # timeout= stands in for `timeout` when not given (tui.model.serverless_script).
    script: str | None = None
    timeout_from: str | None = None  # "config" | "script"; None: no timeout known
    script_timeout: float | None = None  # the script's literal timeout=, as lint reads it
    script_unbounded: bool = False  # lint: the script sets no timeout (bills forever)
    script_note: str | None = None  # why the script's timeout is not known (unreadable ...)


@dataclass(frozen=True)
class FleetConfig:
    """The whole fleet config, validated."""

    source: str
    boxes: tuple[BoxConfig, ...]
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    host_keys: str = "strict"
    known_hosts: str | None = None
    # None: ~/.ssh/config when it exists; "": read no ssh config at all.
    ssh_config: str | None = None
    keys: Mapping[str, str] = field(default_factory=dict)
    # provider name -> API base URL override ([providers.vast] base_url = ...)
    providers: Mapping[str, str] = field(default_factory=dict)
    budget_usd: float | None = None
    idle_minutes: float = DEFAULT_IDLE_MINUTES
    on_budget: str = "warn"
    alerts: AlertConfig = field(default_factory=AlertConfig)
    # [connect]: handshakes per SSH endpoint and per jump host, provider requests at once
    connect: ConnectLimits = field(default_factory=ConnectLimits)
    serverless: tuple[ServerlessConfig, ...] = ()

    def box(self, name: str) -> BoxConfig:
        """The box called `name`; KeyError names the boxes that exist."""
        for box in self.boxes:
            if box.name == name:
                return box
        known = ", ".join(b.name for b in self.boxes) or "none"
        raise KeyError(f"no box named {name!r} (boxes: {known})")

    def timeout_for(self, box: BoxConfig) -> float:
        """The per-box timeout, falling back to the fleet's."""
        return box.timeout_seconds if box.timeout_seconds is not None else self.timeout_seconds


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a config, located as precisely as the text allows."""

    source: str
    message: str
    box: str | None = None
    key: str | None = None
    line: int | None = None
    serverless: str | None = None  # the [[serverless]] entry, by name (or #N)

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        parts = [where]
        if self.box is not None:
            parts.append(f"box {self.box!r}")
        if self.serverless is not None:
            parts.append(f"serverless {self.serverless!r}")
        if self.key is not None:
            parts.append(f"key {self.key!r}")
        return ": ".join(parts) + f": {self.message}"


class ConfigError(Exception):
    """Every problem found in a config; str() lists them one per line."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


# --- value checkers: return the converted value or raise _Bad with the reason ---


class _Bad(Exception):
    pass


def _type_name(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _toml(value: object) -> str:
    """A value as the config file spells it (true, not Python's True)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {_type_name(value)} ({_toml(value)})")
    if not value.strip():
        raise _Bad("must not be empty")
    return value


def _label(value: object) -> str:
    """A short name to print: one line, no control character."""
    text = _string(value)
    if len(text) > 60 or not text.isprintable():
        raise _Bad("must be one printable line of at most 60 characters")
    return text


def _percent(value: object) -> float:
    number = _number(0.0, exclusive=True)(value)
    if number > 100:
        raise _Bad(f"must be a percent (at most 100), got {value!r}")
    return number


def _number(minimum: float = 0.0, *, exclusive: bool = False) -> Callable[[object], float]:
    def check(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Bad(f"expected a number, got {_type_name(value)} ({_toml(value)})")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise _Bad("must be a finite number")
        if number < minimum or (exclusive and number == minimum):
            op = ">" if exclusive else ">="
            raise _Bad(f"must be {op} {minimum:g}, got {value!r}")
        return number

    return check


def _port(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"expected an integer, got {_type_name(value)} ({_toml(value)})")
    if not 1 <= value <= 65535:
        raise _Bad(f"must be a TCP port (1-65535), got {value}")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        text = _string(value)
        if text not in options:
            raise _Bad(f"must be one of {', '.join(options)}; got {text!r}")
        return text

    return check


def _box_name(value: object) -> str:
    name = _string(value)
    if "/" in name or any(ord(c) < 32 for c in name) or name in (".", ".."):
        raise _Bad(f"{name!r} cannot be used as a box name (no '/', no control characters)")
    return name


def _interpreter(value: object) -> str:
    text = _string(value)
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        raise _Bad("must not contain control characters")
    return text


def _box_path(value: object) -> str:
    text = _interpreter(value)
    if not text.startswith(("/", "~")):
        raise _Bad(f"must be an absolute path on the box (or start with ~), got {text!r}")
    return text


def _instance_id(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(value)


def _runs_roots(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Bad(f"expected an array of paths, got {_type_name(value)} ({_toml(value)})")
    if not value:
        raise _Bad("must list at least one directory")
    roots = []
    for item in value:
        try:
            roots.append(_string(item))
        except _Bad as exc:
            raise _Bad(f"every entry {exc}") from None
    return tuple(roots)


def _key_table(value: object) -> dict[str, str]:
    """The shape only; each entry is checked on its own line by parse_config."""
    if not isinstance(value, dict):
        raise _Bad(f"expected a table of action = \"key\", got {_type_name(value)}")
    return dict(value)


def _key_entry(action: str, key: object) -> str:
    if action not in KEY_ACTIONS:
        close = difflib.get_close_matches(action, KEY_ACTIONS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _Bad(f"unknown binding id{hint}; binding ids: {', '.join(KEY_ACTIONS)}")
    if not isinstance(key, str) or not key.strip():
        raise _Bad("expected a key name such as \"j\" or \"ctrl+r\"")
    return key


def _provider_urls(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _Bad(f"expected tables such as [providers.vast], got {_type_name(value)}")
    urls = {}
    for name, table in value.items():
        if name not in PROVIDERS or name == "manual":
            raise _Bad(f"unknown provider {name!r}; providers with an API: vast, runpod, lambda")
        if not isinstance(table, dict) or set(table) - {"base_url"}:
            raise _Bad(f"[providers.{name}] takes only base_url")
        url = table.get("base_url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise _Bad(f"[providers.{name}] base_url must be an http:// or https:// URL")
        if not plain_http_allowed(url):
            raise _Bad(f"[providers.{name}] base_url {url!r}: plain http:// only for a "
                       "loopback address (127.0.0.1, ::1, localhost); the API key would "
                       "cross the network unencrypted: use https://")
        urls[name] = url.rstrip("/")
    return urls


def plain_http_allowed(url: str) -> bool:
    """An API key may travel over this URL: https://, or http:// to this machine only."""
    if not url.lower().startswith("http://"):
        return True
    authority = re.split(r"[/?#]", url[len("http://"):], maxsplit=1)[0].rpartition("@")[2]
    host = authority[1:].partition("]")[0] if authority.startswith("[") else \
        authority.partition(":")[0]
    host = host.lower()
    return host in LOOPBACK_HOSTS or re.fullmatch(r"127(\.\d{1,3}){3}", host) is not None


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"expected true or false, got {_type_name(value)} ({_toml(value)})")
    return value


def _whole(minimum: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad(f"expected a whole number, got {_type_name(value)} ({_toml(value)})")
        if value < minimum:
            raise _Bad(f"must be >= {minimum}, got {value}")
        return value

    return check


def _webhook(value: object) -> str:
    """An http(s) URL; plain http only to this machine. Never echoed back in an error:
    the URL may carry a secret (a Slack or Discord webhook's token, an ntfy topic)."""
    if not isinstance(value, str) or not value.strip():
        raise _Bad(f"expected an https:// URL, got {_type_name(value)}")
    if not value.startswith(("http://", "https://")) or any(ord(c) <= 32 for c in value):
        raise _Bad("must be an http:// or https:// URL (the value is not shown: it may hold "
                   "a secret)")
    if not plain_http_allowed(value):
        raise _Bad("plain http:// only for a loopback address (127.0.0.1, ::1, localhost): "
                   "use https:// (the value is not shown: it may hold a secret)")
    return value


def _env_name(value: object) -> str:
    name = _string(value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise _Bad(f"{name!r} is not an environment variable name (letters, digits, _)")
    return name


_TOP_KEYS: dict[str, Callable[[object], Any]] = {
    "refresh_seconds": _number(0.0, exclusive=True),
    "timeout_seconds": _number(0.0, exclusive=True),
    "host_keys": _choice(HOST_KEY_POLICIES),
    "known_hosts": _string,
    "ssh_config": lambda v: v if v == "" else _string(v),
    "keys": _key_table,
    "providers": _provider_urls,
    "budget_usd": _number(),
    "idle_minutes": _number(0.0, exclusive=True),
    "on_budget": _choice(BUDGET_ACTIONS),
}

_ALERT_KEYS: dict[str, Callable[[object], Any]] = {
    "webhook": _webhook,
    "webhook_name": _label,
    "format": _choice(ALERT_FORMATS),
    "command": _string,
    "cooldown_minutes": _number(0.0),
    "unreachable_minutes": _number(0.0, exclusive=True),
    "gpu_underused_pct": _percent,
    "gpu_underused_minutes": _number(0.0, exclusive=True),
}

_CONNECT_KEYS: dict[str, Callable[[object], Any]] = {
    "per_endpoint": _whole(1),
    "per_jump_host": _whole(1),
    "per_provider": _whole(1),
}

_BOX_KEYS: dict[str, Callable[[object], Any]] = {
    "name": _box_name,
    "host": _string,
    "port": _port,
    "user": _string,
    "identity_file": _string,
    "jump": _string,
    "runs_roots": _runs_roots,
    "provider": _choice(PROVIDERS),
    "instance_id": _instance_id,
    "timeout_seconds": _number(0.0, exclusive=True),
    "budget_usd": _number(),
    "stop_command": _string,
    "destroy_command": _string,
    "python": _interpreter,
    "persistent": _box_path,
    "observe_command": _string,
    "gpu": _bool,
}

def _volume_path(value: object) -> str:
    text = _interpreter(value)
    if ".." in text.split("/"):
        raise _Bad(f"must not climb with '..', got {text!r}")
    return text


_SERVERLESS_KEYS: dict[str, Callable[[object], Any]] = {
    "name": _box_name,
    "provider": _choice(SERVERLESS_PROVIDERS),
    "app": _label,
    "volume": _label,
    "runs_path": _volume_path,
    "gpu": _label,
    "timeout": _number(0.0, exclusive=True),
    "usd_per_gpu_second": _number(0.0, exclusive=True),
    "cli": _string,
    "local_dir": _string,
    "script": _string,
}
SERVERLESS_REQUIRED = ("name", "provider", "app", "volume", "runs_path", "gpu")

_PRICING_KEYS: dict[str, Callable[[object], Any]] = {
    "running_usd_per_hr": _number(),
    "disk_gb": _number(),
    "storage_usd_per_gb_month": _number(),
    "rebuild_usd": _number(),
    "hours_per_month": _number(1.0),
}

_PUSH_KEYS: dict[str, Callable[[object], Any]] = {
    "hf_repo": _string,
    "local_dir": _string,
    "token_env": _env_name,
    "upload_from": _choice(UPLOAD_FROM),
    "every_epochs": _whole(1),
    "on_best": _bool,
    "on_complete": _bool,
}


TablePath = tuple[str | int, ...]  # () the top level, ("box", 0, "pricing"), ("keys",), ...


class _Locator:
    """Finds the line of a key or a table header in the text, since tomllib does not say.

    Each line belongs to the table of the header above it: `[[box]]` opens
    ("box", i), `[box.pricing]` opens ("box", i, "pricing"), `[keys]` opens
    ("keys",), so a key is found in its own table, not in a neighbour's.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.table: list[TablePath] = []  # the table each line belongs to
        self.headers: dict[int, TablePath] = {}  # line index -> the table it opens
        counts: dict[tuple[str, ...], int] = {}
        current: TablePath = ()
        for i, line in enumerate(self.lines):
            match = self._HEADER.match(line)
            if match:
                parts = tuple(p.strip().strip("\"'") for p in match.group(2).split("."))
                if match.group(1) == "[[":
                    counts[parts] = counts.get(parts, 0) + 1
                    current = (*parts, counts[parts] - 1)
                elif parts[:1] == ("box",) and counts.get(("box",)):
                    current = ("box", counts[("box",)] - 1, *parts[1:])
                else:
                    current = parts
                self.headers[i] = current
            self.table.append(current)

    def line_of(self, table: TablePath, key: str | None = None) -> int | None:
        """The line of `key` in `table` (an assignment, or a header of a table under it);
        without that, the line opening `table`; None when the text has neither."""
        if key is not None:
            pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
            for i, line in enumerate(self.lines):
                if self.table[i] == table and i not in self.headers and pattern.match(line):
                    return i + 1
            inner = (*table, key)
            for i, opened in self.headers.items():
                if opened[:len(inner)] == inner:
                    return i + 1
        for i, opened in self.headers.items():
            if opened == table:
                return i + 1
        return None


def _toml_line(exc: tomllib.TOMLDecodeError) -> int | None:
    match = re.search(r"line (\d+)", str(exc))
    return int(match.group(1)) if match else None


def _header(path: TablePath) -> str:
    """The TOML header that opened a table: [connect], [[box]], [box.push]."""
    names = [str(p) for p in path if not isinstance(p, int)]
    if any(isinstance(p, int) for p in path) and len(names) == 1:
        return f"[[{names[0]}]]"
    return f"[{'.'.join(names)}]"


def _unknown(key: str, known: Iterable[str]) -> str:
    names = list(known)
    close = difflib.get_close_matches(key, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key{hint}; known keys: {', '.join(names)}"


def parse_config(text: str, source: str) -> FleetConfig:
    """Validate a fleet config's TOML text; raise ConfigError listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problem = ConfigProblem(source, f"not valid TOML: {exc}", line=_toml_line(exc))
        raise ConfigError([problem]) from None

    locate = _Locator(text)
    problems: list[ConfigProblem] = []

    def check_table(
        table: Mapping[str, object],
        schema: Mapping[str, Callable[[object], Any]],
        box_label: str | None,
        path: TablePath,
        prefix: str = "",
        subtables: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, raw in table.items():
            if key in subtables:
                continue
            full = f"{prefix}{key}"
            line = locate.line_of(path, key)
            if key not in schema:
                words = _unknown(key, [*schema, *subtables])
                if path and key in _TOP_KEYS:
                    words += (f"; {key!r} is a top-level key: in TOML every key after a "
                              f"{_header(path)} header belongs to that table, so put it "
                              "above the first table")
                problems.append(ConfigProblem(source, words, box_label, full, line))
                continue
            try:
                values[key] = schema[key](raw)
            except _Bad as exc:
                problems.append(ConfigProblem(source, str(exc), box_label, full, line))
        return values

    def check_keys(table: Mapping[str, object]) -> dict[str, str]:
        keys: dict[str, str] = {}
        for action, key in table.items():
            line = locate.line_of(("keys",), action)
            try:
                keys[action] = _key_entry(action, key)
            except _Bad as exc:
                problems.append(ConfigProblem(source, str(exc), None, f"keys.{action}", line))
        for clash in key_clashes(keys):
            problems.append(ConfigProblem(source, clash.message, None, f"keys.{clash.binding}",
                                          locate.line_of(("keys",), clash.binding)))
        return keys

    top = check_table(data, _TOP_KEYS, None, (), subtables=("box", "alerts", "connect",
                                                            "serverless"))
    if "keys" in top:
        top["keys"] = check_keys(top["keys"])
    for table, schema, kind in (("alerts", _ALERT_KEYS, AlertConfig),
                                ("connect", _CONNECT_KEYS, ConnectLimits)):
        if table not in data:
            continue
        if isinstance(data[table], dict):
            top[table] = kind(**check_table(data[table], schema, None, (table,),
                                            prefix=f"{table}."))
        else:
            problems.append(ConfigProblem(
                source, f"expected a table [{table}], got {_type_name(data[table])}",
                key=table, line=locate.line_of((), table)))
    raw_boxes = data.get("box", [])
    if not isinstance(raw_boxes, list) or not all(isinstance(b, dict) for b in raw_boxes):
        problems.append(ConfigProblem(source, "'box' must be written as [[box]] tables",
                                      key="box", line=locate.line_of((), "box")))
        raw_boxes = []
    serverless = _serverless_entries(data.get("serverless", []), source, locate, problems)
    if not raw_boxes and not serverless and not problems:
        problems.append(ConfigProblem(source, "no boxes: add a [[box]] table with name and host"))

    boxes: list[BoxConfig] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_boxes):
        label = raw.get("name") if isinstance(raw.get("name"), str) else f"#{index + 1}"
        where: TablePath = ("box", index)
        values = check_table(raw, _BOX_KEYS, label, where, subtables=("pricing", "push"))
        for required in ("name", "host"):
            if required not in raw:
                problems.append(ConfigProblem(source, "missing (required)", label, required,
                                              locate.line_of(where)))
        pricing = push = None
        for sub, schema in (("pricing", _PRICING_KEYS), ("push", _PUSH_KEYS)):
            if sub not in raw:
                continue
            if not isinstance(raw[sub], dict):
                problems.append(ConfigProblem(
                    source, f"expected a table [box.{sub}], got {_type_name(raw[sub])}",
                    label, sub, locate.line_of(where, sub)))
                continue
            sub_values = check_table(raw[sub], schema, label, (*where, sub), prefix=f"{sub}.")
            if sub == "pricing":
                pricing = Pricing(**sub_values)
            else:
                push = PushTarget(**sub_values)
                if push.milestones and not (push.hf_repo or push.local_dir):
                    problems.append(ConfigProblem(
                        source, "milestone pushes (every_epochs, on_best, on_complete) need "
                        "a destination: set hf_repo or local_dir", label, "push",
                        locate.line_of(where, "push")))
        name = values.get("name")
        if name is not None:
            if name in seen:
                problems.append(ConfigProblem(
                    source, f"duplicate box name (first defined in box #{seen[name] + 1})",
                    label, "name", locate.line_of(where, "name")))
            else:
                seen[name] = index
            if any(entry.name == name for entry in serverless):
                problems.append(ConfigProblem(
                    source, "a [[serverless]] entry has this name too: names are unique",
                    label, "name", locate.line_of(where, "name")))
        if "name" in values and "host" in values:
            boxes.append(BoxConfig(**values, pricing=pricing, push=push))

    if problems:
        raise ConfigError(problems)
    return FleetConfig(source=source, boxes=tuple(boxes), serverless=tuple(serverless), **top)


def _provider_refuses(entry: ServerlessConfig) -> tuple[str, str] | None:
    """(key, words) for a value the provider itself would refuse, caught at check-config
    rather than at the first poll: Modal's timeout range, Beam's patterns in `beam ls`."""
    from tui.model.lint import MODAL_MAX_TIMEOUT

    if entry.provider == "modal" and entry.timeout is not None \
            and entry.timeout > MODAL_MAX_TIMEOUT:
        return "timeout", (f"Modal allows a timeout of 1 to {MODAL_MAX_TIMEOUT} s (24 h), got "
                           f"{entry.timeout:g}: Modal refuses the function")
    if entry.provider == "beam" and any(c in entry.runs_path for c in "*?["):
        return "runs_path", ("`beam ls` reads * ? [ as patterns: a runs path holding them "
                             "cannot be listed")
    return None


def _serverless_entries(raw_entries: object, source: str, locate: _Locator,
                        problems: list[ConfigProblem]) -> list[ServerlessConfig]:
    """The [[serverless]] tables, each checked; problems name the entry and the key."""
    from tui.model.serverless_prices import price_problem

    if not isinstance(raw_entries, list) or not all(isinstance(e, dict) for e in raw_entries):
        problems.append(ConfigProblem(source, "'serverless' must be written as [[serverless]] "
                                      "tables", key="serverless",
                                      line=locate.line_of((), "serverless")))
        return []
    entries: list[ServerlessConfig] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_entries):
        label = raw.get("name") if isinstance(raw.get("name"), str) else f"#{index + 1}"
        where: TablePath = ("serverless", index)
        values: dict[str, Any] = {}
        for key, value in raw.items():
            line = locate.line_of(where, key)
            if key not in _SERVERLESS_KEYS:
                problems.append(ConfigProblem(source, _unknown(key, _SERVERLESS_KEYS), key=key,
                                              line=line, serverless=label))
                continue
            try:
                values[key] = _SERVERLESS_KEYS[key](value)
            except _Bad as exc:
                problems.append(ConfigProblem(source, str(exc), key=key, line=line,
                                              serverless=label))
        missing = [k for k in SERVERLESS_REQUIRED if k not in raw]
        for key in missing:
            problems.append(ConfigProblem(source, "missing (required)", key=key,
                                          line=locate.line_of(where), serverless=label))
        if any(k not in values for k in SERVERLESS_REQUIRED):
            continue
        if values["name"] in seen:
            problems.append(ConfigProblem(source, "duplicate serverless name", key="name",
                                          line=locate.line_of(where, "name"),
                                          serverless=label))
            continue
        seen.add(values["name"])
        entry = ServerlessConfig(**values, timeout_from="config" if "timeout" in values
                                 else None)
        problem = price_problem(entry.provider, entry.gpu, entry.usd_per_gpu_second)
        if problem is not None:
            problems.append(ConfigProblem(source, problem, key="gpu",
                                          line=locate.line_of(where, "gpu"), serverless=label))
            continue
        refused = _provider_refuses(entry)
        if refused is not None:
            key, words = refused
            problems.append(ConfigProblem(source, words, key=key,
                                          line=locate.line_of(where, key), serverless=label))
            continue
        entries.append(entry)
    return entries
