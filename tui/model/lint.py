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
import re
import warnings
from dataclasses import dataclass, field

from tui.model.exit_codes import EXIT_FAILED, EXIT_OK
from tui.model.lint_facts import (
    Mount,
    Script,
    Serverless,
    const_number,
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
                 *_hf_home(script), *_opencv(script), *_main_guard(script)]
        if not script.gpu_functions():
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


def _timeouts(script: Script) -> list[Finding]:
    out = []
    for fn in script.gpu_functions():
        default = ("Modal's 300 s default applies: a longer run is cut at 5 minutes"
                   if fn.provider == "modal" else
                   "Beam's 3600 s default applies: a longer run is cut at 1 hour")
        fix = ("add timeout=SECONDS: epochs x seconds per epoch plus a margin"
               + (" (Modal allows 1 to 86400)" if fn.provider == "modal" else ""))
        if not fn.has_timeout:
            out.append(_at(fn.call, ERROR, "GR101",
                           f"{_where(fn)} sets no timeout=: the guide's rule is to set it "
                           f"explicitly, sized to the run ({default})",
                           fix))
            continue
        value, number = timeout_value(script, fn)
        if value is not None and isinstance(value, ast.Constant) and value.value is None:
            out.append(_at(value, ERROR, "GR101",
                           f"{_where(fn)} has timeout=None: no bound on the bill", fix))
        elif isinstance(number, int | float) and not isinstance(number, bool) \
                and number <= 0:
            out.append(_at(value, ERROR, "GR101",
                           f"{_where(fn)} has timeout={number:g}, which turns the timeout "
                           "off: a hung job bills forever", fix))
        elif fn.provider == "modal" and isinstance(number, int | float) \
                and number > MODAL_MAX_TIMEOUT:
            out.append(_at(value, ERROR, "GR101",
                           f"{_where(fn)} has timeout={number:g}, above Modal's maximum of "
                           f"{MODAL_MAX_TIMEOUT} s (24 h): Modal refuses it", fix))
    return out


def timeout_value(script: Script,
                  fn: Serverless) -> tuple[ast.expr | None, int | float | None]:
    """The function's `timeout=` expression (a name followed to its value) and the number
    it holds (a literal, or literals' arithmetic: `6 * 60 * 60`), else None: computed at
    run time, or `timeout=None` (the expression says which)."""
    scopes = script.scopes(fn.call)
    value = resolve(fn.timeout, scopes) or fn.timeout
    return value, const_number(value, scopes)


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


def _hf_home(script: Script) -> list[Finding]:
    gpu = script.gpu_functions()
    if not gpu:
        return []
    mounts = script.all_mounts()
    hint = _mount_hint(mounts, "hf")
    fix = (f".env({{\"HF_HOME\": {hint}}}) on the image" if gpu[0].provider == "modal"
           else f"Image(env_vars=[\"HF_HOME={hint.strip(chr(34))}\"])")
    settings = _env_settings(script)
    if not settings:
        secret = " (unless a named secret sets it: the linter cannot see inside one)" \
            if _named_secrets(script) else ""
        return [_at(gpu[0].call, WARNING, "GR105",
                    "HF_HOME is not set: Hugging Face downloads land in "
                    "~/.cache/huggingface on the container's disk and are fetched again on "
                    f"every cold start{secret}", fix)]
    if any(path is not None and any(under(path, m) for m in mounts)
           for _, path in settings):
        return []
    for where, path in settings:
        if path is not None:
            return [_at(where, WARNING, "GR105",
                        f"HF_HOME={path!r} is not on a mounted volume "
                        f"({', '.join(m.path for m in mounts) or 'none'}): downloads and "
                        "the Hub cache are lost with the container", fix)]
    return [_at(settings[0][0], WARNING, "GR105",
                "HF_HOME is computed at run time: the linter cannot tell whether it is on "
                "a mounted volume", fix)]


IMAGE_STEPS = ("apt_install", "run_commands", "add_commands", "dockerfile_commands",
               "with_commands")


def _opencv(script: Script) -> list[Finding]:
    gpu = script.gpu_functions()
    if not gpu:
        return []
    words: set[str] = set()
    first_image: ast.AST | None = None
    for node in script.nodes:
        if not isinstance(node, ast.Call):
            continue
        func = dotted(node.func) or ""
        name = func.rsplit(".", 1)[-1]
        if isinstance(node.func, ast.Attribute) and node.func.attr in IMAGE_STEPS:
            parts: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
        elif name == "Image" or ".Image." in f".{func}.":
            first_image = first_image or node
            cmds = keyword(node, "commands")
            parts = [cmds.value] if cmds else []
        else:
            continue
        scopes = script.scopes(node)
        for part in parts:
            bound = resolve(part, scopes) if isinstance(part, ast.expr) else None
            for sub in ast.walk(bound or part):
                text = const_str(sub, scopes) if isinstance(
                    sub, ast.Constant | ast.Name | ast.JoinedStr) else None
                if text:
                    words.update(text.replace(";", " ").replace("&&", " ").split())
    missing = [lib for lib in OPENCV_LIBS
               if not any(w == lib or w.startswith(lib + "-") or w.startswith(lib + "t64")
                          for w in words)]
    if not missing:
        return []
    fix = ('.apt_install("libgl1", "libglib2.0-0") on the image' if gpu[0].provider == "modal"
           else 'Image(commands=["apt-get update && apt-get install -y libgl1 '
                'libglib2.0-0"])')
    return [_at(first_image or gpu[0].call, WARNING, "GR106",
                f"the image does not install {' and '.join(missing)}: OpenCV, which "
                "LibreYOLO imports, fails on a bare image with libGL.so.1 or libgthread "
                "missing", fix)]


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
