"""`lint`: a Modal or Beam training script checked against the guide, statically.

The script is parsed (never imported, never run) and judged by the guide's serverless
rules: every GPU function has an explicit timeout, runs go to a mounted volume and are
committed every epoch, HF_HOME is on the volume, the image has OpenCV's system libraries,
and a multi-GPU `device=` sits behind a `__main__` guard. Each finding names the line and
column and says the fix. A script that cannot be read (too large, not UTF-8, binary, not
Python, too deeply nested) is a LintError, never a crash.
"""

from __future__ import annotations

import ast
import bisect
import math
import posixpath
import re
import warnings
from dataclasses import dataclass, field

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.lint_facts import (
    Mount,
    Script,
    Serverless,
    const_num,
    const_str,
    dotted,
    has_spread,
    index,
    is_main_guard,
    keyword,
    lookup,
    read_script,
    resolve,
    under,
)

MAX_BYTES = 1024 * 1024  # a training script is a few KB; Python parses 1 MiB of tiny lines in ~4 s
MAX_DEPTH = 200  # syntax-tree nesting; real scripts stay under 40
LIBREYOLO_DEFAULT_PROJECT = "runs/train"  # libreyolo 1.6.0 training/config.py `project`
MODAL_MAX_TIMEOUT = 86_400  # Modal: 1 s to 24 h (modal.com/docs/guide/timeouts)
OPENCV_LIBS = ("libgl1", "libglib2.0-0")

ERROR, WARNING = "error", "warning"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# code -> what it checks; docs/lint.md lists the same.
CODES = {
    "GR100": "no Modal or Beam GPU function found",
    "GR101": "GPU function without an explicit, finite timeout=",
    "GR102": "train() writes its run to the container's own disk",
    "GR103": "train()'s project= cannot be read statically",
    "GR104": "the volume is not committed every epoch",
    "GR105": "HF_HOME is not on the volume",
    "GR106": "the image lacks OpenCV's system libraries",
    "GR107": "multi-GPU device= without an `if __name__ == \"__main__\":` guard",
    "GR108": "a decorator with gpu= that nearly spells a Modal or Beam one",
}


class LintError(Exception):
    """The script cannot be read as Python: the message says why, in one line."""


@dataclass(frozen=True)
class Finding:
    line: int
    col: int  # 1-based, in characters
    severity: str  # "error" | "warning"
    code: str
    message: str
    fix: str


@dataclass(frozen=True)
class LintResult:
    findings: tuple[Finding, ...]
    providers: tuple[str, ...]

    @property
    def errors(self) -> int:
        return sum(f.severity == ERROR for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == WARNING for f in self.findings)

    @property
    def exit_code(self) -> int:
        """Errors fail; warnings alone do not."""
        return EXIT_FAILED if self.errors else EXIT_OK


def parse(data: bytes) -> tuple[ast.Module, list[str]]:
    """The tree and the lines of a script's bytes, or LintError saying why not."""
    if len(data) > MAX_BYTES:
        raise LintError(f"too large: {len(data)} bytes (a script is at most "
                        f"{MAX_BYTES // (1024 * 1024)} MiB)")
    if b"\x00" in data:
        raise LintError("binary: it holds NUL bytes, not Python source")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LintError(f"not UTF-8: byte {exc.start} is 0x{data[exc.start]:02x}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(text, type_comments=False)
    except SyntaxError as exc:  # IndentationError too
        where = f"line {exc.lineno}: " if exc.lineno else ""
        raise LintError(f"not Python: {where}{exc.msg}") from None
    except (RecursionError, MemoryError):
        raise LintError("too deeply nested for Python's parser") from None
    except ValueError as exc:
        raise LintError(f"not Python: {exc}") from None
    # Lines as the parser counts them: str.splitlines would also split at \f and \x1c.
    return tree, _LINE_BREAK.split(text)


def lint(data: bytes) -> LintResult:
    """Every finding in the script, sorted by position; LintError when it is unreadable."""
    tree, lines = parse(data)
    indexed = index(tree, MAX_DEPTH)
    if indexed is None:
        raise LintError(f"too deeply nested: more than {MAX_DEPTH} levels")
    try:
        script = read_script(tree, *indexed)
        found = [*_timeouts(script), *_projects(script), *_commits(script),
                 *_hf_home(script), *_opencv(script), *_main_guard(script),
                 *_near_misses(script)]
        if not script.gpu_functions() and not script.near_misses:
            found.append(_at(script.tree.body[0] if script.tree.body else None,
                             WARNING, "GR100",
                             "no Modal or Beam GPU function found (`@app.function(gpu=...)`, "
                             "`@app.cls(gpu=...)`, Beam's `@function(gpu=...)`, "
                             "`@endpoint`, `@task_queue`): nothing serverless to check",
                             "lint the script that declares the GPU function"))
    except RecursionError:
        raise LintError(f"too deeply nested: more than {MAX_DEPTH} levels") from None
    fixed = [_in_chars(f, lines) for f in found]
    fixed.sort(key=lambda f: (f.line, f.col, f.code))
    return LintResult(tuple(fixed), tuple(sorted(script.providers)))


def _at(node: ast.AST | None, severity: str, code: str, message: str, fix: str) -> Finding:
    """A finding at a node (its column still the parser's 0-based UTF-8 byte offset)."""
    line = getattr(node, "lineno", 1) if node is not None else 1
    col = getattr(node, "col_offset", 0) if node is not None else 0
    return Finding(line, col, severity, code, message, fix)


def _in_chars(finding: Finding, lines: list[str]) -> Finding:
    """The column as an editor counts it: 1-based, in characters, not UTF-8 bytes."""
    text = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    chars = len(text.encode("utf-8")[:finding.col].decode("utf-8", "replace"))
    return Finding(finding.line, chars + 1, finding.severity, finding.code,
                   finding.message, finding.fix)


def _where(fn: Serverless) -> str:
    return f"`@{fn.decorator}(gpu=...)` on `{fn.name}`"


# Beam's default timeout per decorator (docs/serverless-beam.md "Timeout", from the SDK's
# beam-cloud/beta9 abstractions): functions and task queues 3600 s, endpoints 180 s.
# The others' defaults are not documented there: their words name no number.
BEAM_DEFAULTS = {"function": 3600, "task_queue": 3600, "endpoint": 180}


def _default_words(script: Script, fn: Serverless) -> str:
    """What applies when the function sets no timeout, in the provider's own terms."""
    if fn.provider == "modal":
        return "Modal's 300 s default applies: a longer run is cut at 5 minutes"
    last = fn.decorator.rsplit(".", 1)[-1]
    kind = script.beam_decorators.get(last, last)
    seconds = BEAM_DEFAULTS.get(kind)
    if seconds is None:
        return f"Beam's default for @{kind} applies, not one sized to the run"
    span = "1 hour" if seconds == 3600 else f"{seconds // 60} minutes"
    return (f"Beam's {seconds} s default for @{kind} applies: a longer run is cut at "
            f"{span}")


def _shown(node: ast.expr, number: int | float | None) -> str:
    """The timeout as written (cut at 60 characters), and what it folds to when that
    differs: `25 * 3600 = 90000`."""
    text = ast.unparse(node)
    text = text if len(text) <= 60 else text[:57] + "..."
    if number is not None and text not in (f"{number:g}", str(number)):
        return f"{text} = {number:g}"
    return text


def _why_unknown(script: Script, fn: Serverless) -> str:
    """Why a timeout was not folded, in a few words."""
    node = fn.timeout
    if isinstance(node, ast.Name) and node.id in script.rebound:
        return "is bound more than once"
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node else set()
    twice = sorted(names & script.rebound)
    if twice:
        return f"uses {twice[0]}, bound more than once"
    scopes = script.scopes(fn.node)
    if any(isinstance(n, ast.Call | ast.Attribute | ast.Subscript) for n in
           ast.walk(node or ast.Constant(0))) or any(lookup(n, scopes) is None
                                                    for n in names):
        return "is known only at run time"
    if names:
        return "is more names deep than the linter follows"
    return "does not fold to a number (only + - * // / are folded)"


def _timeouts(script: Script) -> list[Finding]:
    out = []
    for fn in script.gpu_functions():
        modal = fn.provider == "modal"
        default = _default_words(script, fn)
        sized = ("epochs x seconds per epoch plus a margin"
                 + (f" (Modal allows 1 to {MODAL_MAX_TIMEOUT})" if modal else ""))
        if not fn.has_timeout:
            out.append(_at(fn.call, ERROR, "GR101",
                           f"{_where(fn)} sets no timeout=: the guide's rule is to set it "
                           f"explicitly, sized to the run ({default})",
                           f"add timeout=SECONDS: {sized}"))
            continue
        if fn.timeout is None:
            continue  # only **options: taken as set (docs/lint.md)
        scopes = script.scopes(fn.node)
        value = resolve(fn.timeout, scopes) or fn.timeout
        number = const_num(fn.timeout, scopes, script.rebound)
        shown = _shown(fn.timeout, number)
        positive = f"set it to a positive number of seconds sized to the run: {sized}"
        if isinstance(value, ast.Constant) and value.value is None:
            words = ("which is Modal's 300 s default, not a timeout sized to the run: a "
                     "longer run is cut at 5 minutes (modal.com/docs/guide/timeouts); the "
                     "guide's rule is to set it explicitly" if modal else
                     "which is no number of seconds: Beam's SDK takes an int (-1 turns the "
                     "timeout off); set it explicitly, sized to the run")
            out.append(_at(value, ERROR, "GR101",
                           f"{_where(fn)} has timeout=None, {words}",
                           f"replace None with a number of seconds: {sized}"))
        elif isinstance(value, ast.Constant) and (isinstance(value.value, str | bytes | bool)
                                                  or value.value is Ellipsis):
            out.append(_at(fn.timeout, ERROR, "GR101",
                           f"{_where(fn)} has timeout={value.value!r}, a "
                           f"{type(value.value).__name__}, not a number of seconds: "
                           f"{'Modal' if modal else 'Beam'} wants an int",
                           "write it as a number, e.g. timeout=3600"))
        elif number is None:
            out.append(_at(fn.timeout, WARNING, "GR101",
                           f"{_where(fn)}: timeout= is set but not checked (not a constant: "
                           f"{shown} {_why_unknown(script, fn)})",
                           "make sure it is a positive number of seconds"
                           + (f" at most {MODAL_MAX_TIMEOUT}" if modal else "")
                           + ", or write it as a literal the linter can check"))
        elif modal and number < 1:
            out.append(_at(fn.timeout, ERROR, "GR101",
                           f"{_where(fn)} has timeout={shown}, outside the 1 to "
                           f"{MODAL_MAX_TIMEOUT} s Modal documents (modal.com/docs/guide/"
                           "timeouts)", positive))
        elif modal and number > MODAL_MAX_TIMEOUT:
            out.append(_at(fn.timeout, ERROR, "GR101",
                           f"{_where(fn)} has timeout={shown}, above Modal's maximum of "
                           f"{MODAL_MAX_TIMEOUT} s (24 h): Modal refuses it",
                           f"lower it to at most {MODAL_MAX_TIMEOUT} (Modal's maximum), "
                           "sized to the run"))
        elif modal and isinstance(number, float):
            out.append(_at(fn.timeout, WARNING, "GR101",
                           f"{_where(fn)} has timeout={shown}, a float: Modal's SDK takes "
                           "an int and puts it in an integer protobuf field "
                           "(timeout_secs), which refuses a float with a TypeError when "
                           "the app is deployed",
                           f"write it as a whole number, e.g. timeout={max(1, int(number))}"))
        elif not modal and number < 0:
            out.append(_at(fn.timeout, ERROR, "GR101",
                           f"{_where(fn)} has timeout={shown}, which turns the timeout "
                           "off (Beam: -1 disables it): a hung job bills forever", positive))
        elif not modal and number < 1:
            out.append(_at(fn.timeout, ERROR, "GR101",
                           f"{_where(fn)} has timeout={shown}, not a positive number of "
                           "seconds: Beam documents a number of seconds, or -1 for none",
                           positive))
    return out


ABSURD_TIMEOUT = 1e12  # seconds: past this a folded timeout= is not taken as a countdown


def timeout_value(script: Script,
                  fn: Serverless) -> tuple[ast.expr | None, int | float | None]:
    """The function's `timeout=` expression (a name followed to its value) and the number
    it holds (a literal, or literals' arithmetic: `6 * 60 * 60`), else None: computed at
    run time, or `timeout=None` (the expression says which)."""
    scopes = script.scopes(fn.node)
    value = resolve(fn.timeout, scopes) or fn.timeout
    number = const_num(fn.timeout, scopes, script.rebound)
    if number is not None and not abs(number) <= ABSURD_TIMEOUT:
        number = None  # an absurd product (or NaN) is no countdown anyone meant
    return value, number


@dataclass(frozen=True)
class GpuTimeout:
    """One GPU function's timeout as `lint` reads it: `seconds` its literal (None when
    computed at run time or absent); `unbounded` when lint says it sets none (no
    timeout=, timeout=None, or one <= 0: a hung run bills forever)."""

    function: str
    seconds: float | None
    unbounded: bool


def gpu_timeouts(data: bytes) -> list[GpuTimeout]:
    """Each GPU function's timeout, read by lint's own facts; LintError when the script
    cannot be read."""
    tree, _ = parse(data)
    indexed = index(tree, MAX_DEPTH)
    if indexed is None:
        raise LintError(f"too deeply nested: more than {MAX_DEPTH} levels")
    try:
        script = read_script(tree, *indexed)
        out = []
        for fn in sorted(script.gpu_functions(), key=lambda f: f.node.lineno):
            if not fn.has_timeout:
                out.append(GpuTimeout(fn.name, None, True))
                continue
            value, number = timeout_value(script, fn)
            if isinstance(value, ast.Constant) and value.value is None:
                out.append(GpuTimeout(fn.name, None, True))
            elif number is not None:
                bounded = 0 < number < math.inf  # a NaN or an infinite literal bounds nothing
                out.append(GpuTimeout(fn.name, float(number) if bounded else None,
                                      not bounded))
            else:
                out.append(GpuTimeout(fn.name, None, False))
        return out
    except RecursionError:
        raise LintError(f"too deeply nested: more than {MAX_DEPTH} levels") from None


def _near_misses(script: Script) -> list[Finding]:
    return [_at(m.call, ERROR, "GR108",
                f"`@{m.written}(gpu=...)` is no Modal or Beam decorator: did you mean "
                f"{m.meant}? Importing the script fails, and nothing here is checked",
                f"write @{m.meant}(...)")
            for m in script.near_misses]


def _mounts_for(script: Script, node: ast.AST) -> tuple[Serverless | None, list[Mount]]:
    """The function a train call runs in and the volumes mounted there: its own, or,
    in a helper, those of every GPU function (it may be called from any of them)."""
    fn = script.serverless_around(node)
    if fn is not None:
        return fn, fn.mounts
    return None, script.all_mounts()


def _mount_hint(mounts: list[Mount], leaf: str) -> str:
    if mounts:
        return f'"{mounts[0].path.rstrip("/")}/{leaf}"'
    return f'"/vol/{leaf}" with a volume mounted at /vol'


def _projects(script: Script) -> list[Finding]:
    if not script.gpu_functions():
        return []  # an SSH box's script: its own disk is where runs belong
    out = []
    for call in script.trains:
        _, mounts = _mounts_for(script, call)
        project = keyword(call, "project")
        paths = ", ".join(m.path for m in mounts) or "none"
        fix = f"pass project={_mount_hint(mounts, 'runs')} (a path on a mounted volume)"
        if project is None:
            if has_spread(call):
                out.append(_at(call, WARNING, "GR103",
                               "train() takes its project from **options, which the linter "
                               "cannot read: make sure it is on a mounted volume", fix))
                continue
            out.append(_at(call, ERROR, "GR102",
                           "train() has no project=: LibreYOLO writes the run to "
                           f"{LIBREYOLO_DEFAULT_PROJECT}/ in the container's working "
                           "directory, its ephemeral disk, lost when the function returns "
                           f"(volumes mounted: {paths})", fix))
            continue
        path = const_str(project.value, script.scopes(call))
        if path is None:
            out.append(_at(project.value, WARNING, "GR103",
                           "project= is computed at run time: the linter cannot tell "
                           "whether it is on a mounted volume",
                           f"build it from the mount path, e.g. project="
                           f"{_mount_hint(mounts, 'runs')}"))
        elif not any(under(path, m) for m in mounts):
            out.append(_at(project.value, ERROR, "GR102",
                           f"project={path!r} is on the container's own disk, not under a "
                           f"mounted volume ({paths}): every epoch is lost when the "
                           "function returns", fix))
    return out


@dataclass
class _Commits:
    """The `.commit()` calls on one volume (or on any, "*"), indexed once so that a script
    with thousands of train() calls is still read in linear time."""

    keys: dict[str, ast.Call] = field(default_factory=dict)  # callback name -> commit
    unwired: ast.Call | None = None  # the first in an on_train_epoch_end
    by_function: dict[int, list[ast.Call]] = field(default_factory=dict)  # in line order
    positions: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # for bisect

    def first_after(self, function: int, at: tuple[int, int]) -> ast.Call | None:
        """The first commit in `function` after position `at` (line, column)."""
        calls = self.by_function.get(function, [])
        i = bisect.bisect_right(self.positions.get(function, []), at)
        return calls[i] if i < len(calls) else None


def _index_commits(script: Script) -> dict[str, _Commits]:
    table: dict[str, _Commits] = {}
    for node in script.nodes:
        if not isinstance(node, ast.Call):
            continue
        target = _commit_target(node)
        if target is None:
            continue
        fn = script.enclosing_function(node)
        keys: list[str] = []
        if isinstance(fn, ast.Lambda):
            keys.append(f"<lambda:{id(fn)}>")
        elif fn is not None:
            keys.append(fn.name)
            owner = script.parent(fn)
            if fn.name == "on_train_epoch_end" and isinstance(owner, ast.ClassDef):
                keys.append(owner.name)
        for name in (target, "*"):
            entry = table.setdefault(name, _Commits())
            for key in keys:
                entry.keys.setdefault(key, node)
            if entry.unwired is None and isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) \
                    and fn.name == "on_train_epoch_end":
                entry.unwired = node
            entry.by_function.setdefault(id(fn), []).append(node)
    for entry in table.values():
        for function, calls in entry.by_function.items():
            calls.sort(key=lambda c: (c.lineno, c.col_offset))
            entry.positions[function] = [(c.lineno, c.col_offset) for c in calls]
    return table


def _commits(script: Script) -> list[Finding]:
    """Modal only: Beam's Volume has no commit (a mounted filesystem, docs/lint.md)."""
    out = []
    table = _index_commits(script)
    for call in script.trains:
        fn, mounts = _mounts_for(script, call)
        if fn is not None and fn.provider != "modal":
            continue
        if fn is None and not any(f.provider == "modal" for f in script.gpu_functions()):
            continue
        if not mounts:
            continue  # GR102 already says: no volume at all
        volumes = sorted({m.volume for m in mounts if m.volume}) or ["*"]
        entries = [table[v] for v in volumes if v in table]
        wired = _callback_names(script, call)
        if any(name in entry.keys for entry in entries for name in wired):
            continue
        vol = volumes[0] if volumes != ["*"] else "vol"
        fix = (f"pass train(callbacks=[...]) an object whose on_train_epoch_end(event) "
               f"calls {vol}.commit()")
        unwired = next((e.unwired for e in entries if e.unwired is not None), None)
        home = id(script.enclosing_function(call))
        after = next((c for e in entries
                      if (c := e.first_after(home, (call.lineno, call.col_offset)))), None)
        if unwired is not None:
            out.append(_at(unwired, WARNING, "GR104",
                           f"{dotted(unwired.func)}() is in an on_train_epoch_end that is not "
                           "passed to this train(callbacks=...): it never runs", fix))
        elif after is not None:
            out.append(_at(after, WARNING, "GR104",
                           f"{dotted(after.func)}() runs only after train() returns: a crash "
                           "or the timeout loses every epoch", fix))
        else:
            out.append(_at(call, WARNING, "GR104",
                           f"nothing calls {vol}.commit() during training: a crash or the "
                           "timeout can lose epochs Modal has not committed yet", fix))
    return out


def _commit_target(node: ast.Call) -> str | None:
    """`vol` in `vol.commit()` (Modal's Volume.commit takes no argument), else None."""
    func = node.func
    if node.args or node.keywords or not isinstance(func, ast.Attribute) \
            or func.attr != "commit":
        return None
    return dotted(func.value)


def _callback_names(script: Script, call: ast.Call) -> set[str]:
    """Names reachable from train(callbacks=...): the callables and classes it passes."""
    callbacks = keyword(call, "callbacks")
    if callbacks is None:
        return set()
    scopes = script.scopes(call)
    names: set[str] = set()
    stack: list[ast.AST] = [callbacks.value]
    seen = 0
    while stack and seen < 200:
        seen += 1
        node = stack.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id not in names:
                names.add(sub.id)
                bound = lookup(sub.id, scopes)
                if bound is not None:
                    stack.append(bound)
            elif isinstance(sub, ast.Lambda):
                names.add(f"<lambda:{id(sub)}>")
    return names


def _env_settings(script: Script) -> list[tuple[ast.AST, str | None]]:
    """Every place the script sets HF_HOME: (where, the path, None when only known at run
    time). A dict key, os.environ[...] =, setdefault/putenv, a keyword, "HF_HOME=..."."""
    found: list[tuple[ast.AST, str | None]] = []

    def value(node: ast.expr, at: ast.AST) -> None:
        found.append((at, const_str(node, script.scopes(at))))

    for node in script.nodes:
        if isinstance(node, ast.Dict):
            for key, val in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "HF_HOME":
                    value(val, key)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and dotted(target.value) in (
                        "os.environ", "environ") and isinstance(target.slice, ast.Constant) \
                        and target.slice.value == "HF_HOME":
                    value(node.value, target)
        elif isinstance(node, ast.Call):
            func = dotted(node.func) or ""
            if func.endswith(("environ.setdefault", "putenv")) and len(node.args) == 2 \
                    and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "HF_HOME":
                value(node.args[1], node)
            for kw in node.keywords:
                if kw.arg == "HF_HOME":
                    value(kw.value, kw.value)
        elif isinstance(node, ast.Constant | ast.JoinedStr) \
                and not isinstance(script.parent(node), ast.JoinedStr):
            first = node.values[0] if isinstance(node, ast.JoinedStr) and node.values \
                else node
            if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                    and first.value.startswith("HF_HOME="):
                text = const_str(node, script.scopes(node))
                found.append((node, text.split("=", 1)[1] if text is not None else None))
    return found


def _named_secrets(script: Script) -> bool:
    """A secret the linter cannot see inside: Modal `Secret.from_name`, Beam `secrets=`."""
    beam = "beam" in script.providers
    for node in script.nodes:
        if not isinstance(node, ast.Call):
            continue
        func = dotted(node.func) or ""
        if func.endswith("from_name") and "Secret" in func:
            return True
        if beam and any(k.arg == "secrets" for k in node.keywords):
            return True
    return False


class _Paths:
    """HF_HOME settings whose "on a volume?" question is answered per mount in time
    independent of how many there are: every path's directories are indexed once (a
    script with thousands of Beam functions asks once per function)."""

    def __init__(self, settings: list[tuple[ast.AST, str | None]]) -> None:
        self.first = settings[0] if settings else None
        self.first_known = next(((w, p) for w, p in settings if p is not None), None)
        self.dirs: set[str] = set()
        self.kinds: set[bool] = set()  # absolute? of the known paths
        for _, path in settings:
            if path is None:
                continue
            at = posixpath.normpath(path)
            self.kinds.add(at.startswith("/"))
            while at not in self.dirs:
                self.dirs.add(at)
                parent = posixpath.dirname(at)
                if parent in ("", at):
                    break
                at = parent

    def any_under(self, mounts: list[Mount]) -> bool:
        """Whether some known path is at or below one of the mounts (as `under`)."""
        for mount in mounts:
            for root in (mount.path, mount.also):
                if not root:
                    continue
                r = posixpath.normpath(root)
                if r in ("/", "."):
                    if r.startswith("/") in self.kinds:
                        return True
                elif r in self.dirs:
                    return True
        return False


def _hf_home(script: Script) -> list[Finding]:
    """Modal: one image setting for the script. Beam: each function's own image."""
    gpu = [f for f in script.gpu_functions() if f.provider == "modal"]
    settings = _env_settings(script)
    secret = _named_secrets(script)
    out = []
    beam = [fn for fn in script.gpu_functions() if fn.provider == "beam"]
    if beam:
        images = _Images(script)
        code = _Paths([(w, p) for w, p in settings if not _in_some_image(script, w)])
        by_node = {id(w): (w, p) for w, p in settings}
        for fn in beam:
            out.extend(_beam_hf_home(images, fn, by_node, code, secret))
    if not gpu:
        return out
    mounts = script.all_mounts()
    fix = f".env({{\"HF_HOME\": {_mount_hint(mounts, 'hf')}}}) on the image"
    return [*out, *_hf_verdict(_modal_image_site(script, gpu), [_Paths(settings)], mounts,
                               fix, "", secret)]


def _hf_verdict(site: ast.AST, groups: list[_Paths], mounts: list[Mount], fix: str,
                whose: str, secret: bool) -> list[Finding]:
    """GR105 for these groups of settings, in order, against these mounts (`whose` names
    a Beam function; `site` is where "not set" is said): constant work per group, however
    many settings each holds."""
    firsts = [g.first for g in groups if g.first is not None]
    if not firsts:
        maybe = " (unless a named secret sets it: the linter cannot see inside one)" \
            if secret else ""
        return [_at(site, WARNING, "GR105",
                    f"HF_HOME is not set{whose}: Hugging Face downloads land in "
                    "~/.cache/huggingface on the container's disk and are fetched again on "
                    f"every cold start{maybe}", fix)]
    if any(g.any_under(mounts) for g in groups):
        return []
    for known in (g.first_known for g in groups):
        if known is not None:
            where, path = known
            return [_at(where, WARNING, "GR105",
                        f"HF_HOME={path!r}{whose} is not on a mounted volume "
                        f"({', '.join(m.path for m in mounts) or 'none'}): downloads and "
                        "the Hub cache are lost with the container", fix)]
    return [_at(firsts[0][0], WARNING, "GR105",
                f"HF_HOME{whose} is computed at run time: the linter cannot tell whether "
                "it is on a mounted volume", fix)]


def _modal_image_site(script: Script, gpu: list[Serverless]) -> ast.AST:
    """Where a Modal script's image warnings belong: the image expression the first GPU
    function (by position) passes as image= (a name followed to what it is bound to),
    else the script's first `modal.Image...` expression, else that first GPU function."""
    first = min(gpu, key=lambda f: (f.call.lineno, f.call.col_offset))
    image = keyword(first.call, "image")
    if image is not None:
        root = resolve(image.value, script.scopes(first.node))
        if root is not None and any(_is_image_call(n) for n in ast.walk(root)):
            return root
    images = [n for n in script.nodes if _is_image_call(n) and hasattr(n, "lineno")]
    if images:
        return min(images, key=lambda n: (getattr(n, "lineno", 0),
                                          getattr(n, "col_offset", 0)))
    return first.call


def _is_image_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = dotted(node.func) or ""
    return func.rsplit(".", 1)[-1] == "Image" or ".Image." in f".{func}."


class _Images:
    """Beam functions' `image=` expressions, each read once however many functions
    share it: its nodes (names followed to what they are bound to), the words its
    commands install, and the HF_HOME settings inside it."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._nodes: dict[int, list[ast.AST]] = {}
        self._words: dict[int, set[str]] = {}
        self._settings: dict[int, _Paths] = {}

    def key(self, fn: Serverless) -> int | None:
        """The image's identity: the expression its names lead to; None for no image=."""
        image = keyword(fn.call, "image")
        if image is None:
            return None
        root = resolve(image.value, self.script.scopes(fn.node)) or image.value
        if id(root) not in self._nodes:
            self._nodes[id(root)] = self._walk(root, fn)
        return id(root)

    def _walk(self, root: ast.AST, fn: Serverless) -> list[ast.AST]:
        scopes = self.script.scopes(fn.node)
        seen: set[int] = set()
        nodes: list[ast.AST] = []
        stack: list[ast.AST] = [root]
        while stack and len(seen) < 1_000_000:
            for sub in ast.walk(stack.pop()):
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                nodes.append(sub)
                if isinstance(sub, ast.Name):
                    bound = lookup(sub.id, scopes)
                    if bound is not None and id(bound) not in seen:
                        stack.append(bound)
        return nodes

    def words(self, key: int) -> set[str]:
        if key not in self._words:
            self._words[key] = {w for n in self._nodes[key] if isinstance(n, ast.Call)
                                for w in _image_words(self.script, n)}
        return self._words[key]

    def settings(self, key: int, by_node: dict[int, tuple[ast.AST, str | None]]) -> _Paths:
        if key not in self._settings:
            self._settings[key] = _Paths([by_node[id(n)] for n in self._nodes[key]
                                          if id(n) in by_node])
        return self._settings[key]


def _in_some_image(script: Script, node: ast.AST) -> bool:
    return any(_is_image_call(up) for up in script.ancestors(node))


def _beam_hf_home(images: _Images, fn: Serverless,
                  by_node: dict[int, tuple[ast.AST, str | None]], code: _Paths,
                  secret: bool) -> list[Finding]:
    """HF_HOME for one Beam function: set by its own image's env_vars or by the code
    (os.environ, a keyword), judged against its own volumes."""
    key = images.key(fn)
    own = images.settings(key, by_node) if key is not None else _Paths([])
    hint = _mount_hint(fn.mounts, "hf").strip(chr(34))
    fix = f'Image(env_vars=["HF_HOME={hint}"]) as the image of `{fn.name}`'
    return _hf_verdict(fn.call, [own, code], fn.mounts, fix, f" for `{fn.name}`", secret)


IMAGE_STEPS = ("apt_install", "run_commands", "add_commands", "dockerfile_commands",
               "with_commands")


def _image_words(script: Script, node: ast.Call) -> set[str]:
    """The words of the shell commands one image call or build step runs."""
    if isinstance(node.func, ast.Attribute) and node.func.attr in IMAGE_STEPS:
        parts: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
    elif _is_image_call(node):
        cmds = keyword(node, "commands")
        parts = [cmds.value] if cmds else []
    else:
        return set()
    words: set[str] = set()
    scopes = script.scopes(node)
    for part in parts:
        bound = resolve(part, scopes) if isinstance(part, ast.expr) else None
        for sub in ast.walk(bound or part):
            text = const_str(sub, scopes) if isinstance(
                sub, ast.Constant | ast.Name | ast.JoinedStr) else None
            if text:
                words.update(text.replace(";", " ").replace("&&", " ").split())
    return words


def _missing_libs(words: set[str]) -> list[str]:
    return [lib for lib in OPENCV_LIBS
            if not any(w == lib or w.startswith(lib + "-") or w.startswith(lib + "t64")
                       for w in words)]


_OPENCV_WHY = ("OpenCV, which LibreYOLO imports, fails on a bare image with libGL.so.1 or "
               "libgthread missing")
_BEAM_OPENCV_FIX = ('Image(commands=["apt-get update && apt-get install -y libgl1 '
                    'libglib2.0-0"])')


def _opencv(script: Script) -> list[Finding]:
    """Modal: every image step in the script. Beam: each function's own image=."""
    out = []
    images = _Images(script)
    for fn in script.gpu_functions():
        if fn.provider != "beam":
            continue
        key = images.key(fn)
        missing = _missing_libs(images.words(key) if key is not None else set())
        if missing:
            what = (f"the image of `{fn.name}` does not install" if key is not None else
                    f"`{fn.name}` passes no image=: Beam's default image does not install")
            out.append(_at(fn.call, WARNING, "GR106",
                           f"{what} {' and '.join(missing)}: {_OPENCV_WHY}",
                           f"{_BEAM_OPENCV_FIX} as the image of `{fn.name}`"))
    gpu = [f for f in script.gpu_functions() if f.provider == "modal"]
    if not gpu:
        return out
    words = set()
    for node in script.nodes:
        if isinstance(node, ast.Call):
            words |= _image_words(script, node)
    missing = _missing_libs(words)
    if not missing:
        return out
    return [*out, _at(_modal_image_site(script, gpu), WARNING, "GR106",
                      f"the image does not install {' and '.join(missing)}: {_OPENCV_WHY}",
                      '.apt_install("libgl1", "libglib2.0-0") on the image')]


def _main_guard(script: Script) -> list[Finding]:
    if any(is_main_guard(stmt) for stmt in script.tree.body):
        return []
    out = []
    for call in script.trains:
        device = keyword(call, "device")
        if device is None:
            continue
        value = resolve(device.value, script.scopes(call)) or device.value
        text = const_str(value, script.scopes(call))
        many = (text is not None and len([p for p in text.split(",") if p.strip()]) > 1) \
            or (isinstance(value, ast.List | ast.Tuple) and len(value.elts) > 1)
        if many:
            out.append(_at(device.value, WARNING, "GR107",
                           "device= names several GPUs: LibreYOLO starts one worker per GPU "
                           "that re-imports this script, and without an "
                           "`if __name__ == \"__main__\":` guard each re-runs its top level",
                           "put the script's entry point under "
                           "`if __name__ == \"__main__\":`"))
    return out
