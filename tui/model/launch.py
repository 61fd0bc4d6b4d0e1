"""What a launch is, before anything touches a box: names, arguments, the form, the rules.

Pure. The user's `libreyolo train` arguments are read here (where the run
goes, which data set to doctor), checked against the launch's own `--name`
and `--project`, and turned into a plan the on-box launcher carries out; the
journal's last words about a box decide whether a launch is refused (a failed
`check`) and what the panel's launch form starts from.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.redact import redact_args

# "cli": `libreyolo train` with the form's options; "script": the user's own file.
LaunchKind = Literal["cli", "script"]
# "unknown": sent, but whether the run started was not seen (interrupted, box quiet).
LaunchResult = Literal["started", "failed", "refused", "unknown"]

# Options whose values are secrets by their name (`--wandb-key`, `--hub-token`, `api_key=`).
# Options the launch sets itself: the run's place and "write into exactly that directory".
PLACE_OPTIONS = ("name", "project", "exist-ok")
CHECK_FAILED = ("problems", "failed")


class LaunchError(ValueError):
    """A launch that cannot be planned, in words naming what to change."""


def option_name(arg: str) -> str | None:
    """The option an argument names (`--data X`, `--data=X`, `data=X`), dashes normalised."""
    if arg.startswith("--") and len(arg) > 2:
        key = arg[2:].split("=", 1)[0]
    elif "=" in arg and not arg.startswith("-") and re.fullmatch(r"[A-Za-z_][\w-]*",
                                                                 arg.split("=", 1)[0]):
        key = arg.split("=", 1)[0]
    else:
        return None
    key = key.replace("_", "-").lower()
    return key[3:] if key.startswith("no-") and key[3:] in ("exist-ok",) else key


def take_option(args: Sequence[str], key: str, *, flag: bool = False
                ) -> tuple[str | None, list[str], bool]:
    """Pull every `key` option out of `args`: (its last value, the rest, whether it was there).

    `--key V`, `--key=V`, `key=V` carry a value; a `flag` (`--exist-ok`) takes
    no next argument and reads "true" (`--no-exist-ok`: "false").
    """
    value: str | None = None
    rest: list[str] = []
    found = False
    i = 0
    while i < len(args):
        arg = args[i]
        if option_name(arg) == key:
            found = True
            if "=" in arg:
                value = arg.split("=", 1)[1]
            elif arg.startswith("--no-"):
                value = "false"
            elif not flag and i + 1 < len(args):
                value = args[i + 1]
                i += 1
            else:
                value = "true"
        else:
            rest.append(arg)
        i += 1
    return value, rest, found


def has_option(args: Sequence[str], key: str) -> bool:
    return any(option_name(a) == key for a in args)


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot name a run directory, or None. Spaces, quotes, `$()` are fine."""
    if not name or name in (".", "..") or "/" in name:
        return f"run name {name!r} must be one non-empty path component (no '/')"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"run name {name!r} must not hold control characters"
    if len(name.encode()) > 200:
        return "run name is longer than 200 bytes"
    return None


def default_run_name(now: float, stem: str = "run") -> str:
    """`<stem>-YYYYmmdd-HHMMSS` (UTC): new for every launch, sorts by time."""
    stem = re.sub(r"[^\w.-]+", "-", stem).strip("-.") or "run"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}"


@dataclass(frozen=True)
class LaunchPlan:
    """One launch, decided: what runs, where its run directory will be."""

    box: str
    name: str
    project: str
    kind: LaunchKind
    args: tuple[str, ...]  # libreyolo train's arguments, or the script's
    data: str | None = None  # the data set `doctor` looks at first
    script_name: str | None = None
    resume: bool = False
    has_resume: bool = False  # the args already say how to resume
    has_model: bool = False

    @property
    def run_dir(self) -> str:
        return f"{self.project.rstrip('/') or '/'}/{self.name}".replace("//", "/")

    def command(self) -> list[str]:
        """The command as a person would type it (for the journal and messages)."""
        if self.kind == "script":
            return ["python", self.script_name or "script.py", *self.args]
        extra = ["--project", self.project, "--name", self.name, "--exist-ok"]
        if self.resume and not self.has_resume:
            extra += ["--resume", "true"]
        if self.resume and not self.has_model:
            extra += ["--model", f"{self.run_dir}/weights/last.pt"]
        return ["libreyolo", "train", *self.args, *extra]


def plan_launch(box: str, runs_roots: Sequence[str], *, train_args: Sequence[str] = (),
                script_name: str | None = None, name: str | None = None,
                project: str | None = None, data: str | None = None, resume: bool = False,
                now: float = 0.0) -> LaunchPlan:
    """Read the user's arguments into a plan; LaunchError says what to change.

    For `libreyolo train`, `--name`/`--project` may come from the train
    arguments or from the launch (not different values from both); the launch
    adds `--project P --name N --exist-ok` itself so LibreYOLO writes into
    exactly that directory instead of numbering a new one.
    """
    args = list(train_args)
    kind: LaunchKind = "script" if script_name is not None else "cli"
    if kind == "cli":
        if not args:
            raise LaunchError("give libreyolo train's arguments after `--` (e.g. -- --data "
                              "data.yaml --model yolox-s --epochs 100), or --script FILE")
        for key, given in (("name", name), ("project", project)):
            value, args, found = take_option(args, key)
            if found and (value is None or value == "true"):
                raise LaunchError(f"--{key} in the train arguments has no value")
            if found and given is not None and value != given:
                raise LaunchError(f"--{key} given twice with different values: {given!r} to "
                                  f"launch, {value!r} in the train arguments")
            if key == "name":
                name = name if name is not None else value
            else:
                project = project if project is not None else value
        _, args, _ = take_option(args, "exist-ok", flag=True)
        found_data, _, _ = take_option(args, "data")
        data = data if data is not None else found_data
    if not runs_roots and project is None:
        raise LaunchError(f"box {box} has no runs_roots: pass --project DIR")
    project = project if project is not None else runs_roots[0]
    if not project.strip():
        raise LaunchError("--project must not be empty")
    if name is None:
        stem = (script_name or "run").rsplit("/", 1)[-1].removesuffix(".py") \
            if kind == "script" else "run"
        name = default_run_name(now, stem)
    if problem := run_name_problem(name):
        raise LaunchError(problem)
    return LaunchPlan(box=box, name=name, project=project, kind=kind, args=tuple(args),
                      data=data, script_name=script_name, resume=resume,
                      has_resume=has_option(args, "resume"), has_model=has_option(args, "model"))


def outside_roots(project: str, runs_roots: Iterable[str]) -> bool:
    """True when a project directory lies under none of the box's runs roots (the panel,
    which looks only there, would not see the run)."""
    def norm(p: str) -> str:
        return p.rstrip("/") + "/"
    return not any(norm(project).startswith(norm(root)) for root in runs_roots)


def redact(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """The arguments fit for a journal (the one redaction, tui/model/redact.py)."""
    return redact_args(args, secrets)


# -- the journal's last words about a box ---------------------------------------------

def last_entry(entries: Sequence[Mapping[str, Any]], box: str,
               action: str) -> Mapping[str, Any] | None:
    for entry in reversed(entries):
        if entry.get("box") == box and entry.get("action") == action \
                and entry.get("outcome") != "cancelled":  # a cancel says nothing of the box
            return entry
    return None


def check_refusal(entries: Sequence[Mapping[str, Any]], box: str) -> str | None:
    """Why a launch on `box` is refused because its last `check` failed, or None."""
    entry = last_entry(entries, box, "check")
    if entry is None or entry.get("outcome") not in CHECK_FAILED:
        return None
    when = entry.get("time")
    at = (time.strftime(" on %Y-%m-%d %H:%M UTC", time.gmtime(when))
          if isinstance(when, int | float) and not isinstance(when, bool) else "")
    why = entry.get("error") or entry.get("message") or "problems found"
    return (f"the last check of box {box}{at} failed: {why}. Fix it and run "
            f"`gpurent-tui check {box}` again, or pass --force to launch anyway")


# -- the panel's launch form ----------------------------------------------------------

@dataclass(frozen=True)
class LaunchForm:
    """The fields of the panel's launch form, as text (what the user typed)."""

    script: str = ""
    model: str = "yolox-s"
    data: str = ""
    epochs: str = "100"
    batch: str = "-1"
    imgsz: str = "640"
    device: str = "0"
    save_period: str = "10"
    extra: str = ""  # more libreyolo train arguments, split like a shell would
    name: str = ""
    project: str = ""

    def with_values(self, values: Mapping[str, str]) -> LaunchForm:
        known = {f.name for f in fields(self)}
        return replace(self, **{k: str(v) for k, v in values.items() if k in known})


@dataclass(frozen=True)
class LaunchRequest:
    """What the panel's launch form asks for: the box, the fields, the three overrides."""

    box: str
    form: LaunchForm
    resume: bool = False
    force: bool = False
    doctor: bool = True


FORM_OPTIONS = ("model", "data", "epochs", "batch", "imgsz", "device", "save-period")
_INT_FIELDS = {"epochs": 1, "batch": -1, "save_period": 1}


def form_problems(form: LaunchForm) -> list[str]:
    """What stops the form from launching, one line per field."""
    problems = []
    if not form.script:
        if not form.data.strip():
            problems.append("data: the data set's YAML on the box is needed")
        if not form.model.strip():
            problems.append("model: e.g. yolox-s, or a checkpoint path on the box")
        for key, low in _INT_FIELDS.items():
            text = getattr(form, key).strip()
            if text and not re.fullmatch(r"-?\d+", text):
                problems.append(f"{key}: a whole number, got {text!r}")
            elif text and int(text) < low:
                problems.append(f"{key}: at least {low}")
    try:
        shlex.split(form.extra)
    except ValueError as exc:
        problems.append(f"more arguments: {exc}")
    if form.name and (problem := run_name_problem(form.name)):
        problems.append(problem)
    return problems


def form_args(form: LaunchForm) -> list[str]:
    """libreyolo train's arguments from the form (empty fields are left to LibreYOLO)."""
    args: list[str] = []
    for option in FORM_OPTIONS:
        value = getattr(form, option.replace("-", "_")).strip()
        if value:
            args += [f"--{option}", value]
    return args + shlex.split(form.extra)


def form_from_entry(entry: Mapping[str, Any] | None, base: LaunchForm = LaunchForm()
                    ) -> LaunchForm:
    """The form as the box's last launch left it (its journal line), else `base`."""
    if entry is None:
        return base
    files = entry.get("files") or []
    script = next((f.get("path") for f in files if isinstance(f, Mapping)
                   and isinstance(f.get("path"), str)), None)
    try:
        command = shlex.split(str(entry.get("message") or ""))
    except ValueError:
        command = []
    values: dict[str, str] = {}
    if script:
        values["script"] = script
        if command[:1] == ["python"]:
            values["extra"] = shlex.join(command[2:])
    elif command[:2] == ["libreyolo", "train"]:
        args = command[2:]
        for key in ("name", "project", "resume"):
            _, args, _ = take_option(args, key)
        _, args, _ = take_option(args, "exist-ok", flag=True)
        for option in FORM_OPTIONS:
            value, args, found = take_option(args, option)
            if found and value is not None:
                values[option.replace("-", "_")] = value
        values["extra"] = shlex.join(args)
    run_path = entry.get("run_path")
    if isinstance(run_path, str) and "/" in run_path.rstrip("/"):
        values["project"] = run_path.rstrip("/").rsplit("/", 1)[0] or "/"
    return base.with_values(values)


@dataclass(frozen=True)
class LaunchOutcome:
    """How a launch ended, for the CLI's lines and the panel's notice."""

    box: str
    name: str
    run_dir: str
    outcome: LaunchResult
    message: str
    pid: int | None = None
    tail: str = ""

    @property
    def code(self) -> int:
        return EXIT_OK if self.outcome == "started" else EXIT_FAILED


def ssh_forward_hint(port: int, ssh_connection: str | None, user: str) -> str | None:
    """The one `ssh -L` line that brings a local port of this machine to the user's laptop,
    when this runs on a machine reached over SSH (a jump host; `SSH_CONNECTION` is set)."""
    if not ssh_connection:
        return None
    parts = ssh_connection.split()
    host = parts[2] if len(parts) >= 4 else "this-host"
    port_arg = f" -p {parts[3]}" if len(parts) >= 4 and parts[3] != "22" else ""
    return f"ssh -N -L {port}:127.0.0.1:{port}{port_arg} {user}@{host}"
