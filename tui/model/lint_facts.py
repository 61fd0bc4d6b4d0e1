"""What `lint` reads from a Modal or Beam training script's syntax tree, never running it.

The serverless functions (their decorator, GPU, timeout and mounted volume paths), the
LibreYOLO `train(...)` calls, and the strings the script builds from literals. Everything
is read statically: a value the script computes at run time is "unknown" (None), never
guessed. The checks that judge these facts are in tui/model/lint.py.
"""

from __future__ import annotations

import ast
import difflib
import math
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field

# How deep a chain of names and joins is followed to a literal (a = b; b = a ends here).
MAX_RESOLVE = 24
# Beam's decorators that run a function in a container (beam-cloud/beta9's abstractions).
BEAM_DECORATORS = ("function", "endpoint", "task_queue", "schedule", "realtime", "asgi")
BEAM_MODULES = ("beam", "beta9")
# Keywords only LibreYOLO's `train` takes (torch's Module.train takes one bool).
TRAIN_KEYWORDS = frozenset({"data", "epochs", "project", "name", "imgsz", "batch",
                            "device", "exist_ok", "callbacks"})
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Mount:
    """A volume mounted on a function: its path in the container and, for Modal, the
    name the script binds the Volume to (what `.commit()` is called on)."""

    path: str
    volume: str | None = None
    also: str | None = None  # Beam also mounts a volume at /volumes/<name>


@dataclass(frozen=True)
class NearMiss:
    """A decorator call with gpu= whose name is one edit or two from a serverless
    decorator's (`@app.functon(gpu=...)`): the script fails when imported."""

    call: ast.Call
    written: str
    meant: str


@dataclass
class Serverless:
    """One decorated function (or Modal class) that runs in a provider's container."""

    provider: str  # "modal" | "beam"
    decorator: str  # as written, e.g. "app.function"
    name: str
    node: FunctionNode | ast.ClassDef
    call: ast.Call
    gpu: bool
    has_timeout: bool
    timeout: ast.expr | None
    mounts: list[Mount] = field(default_factory=list)


@dataclass
class Script:
    """Everything the checks need, gathered in one pass over the tree."""

    tree: ast.Module
    nodes: list[ast.AST] = field(default_factory=list)  # every node, parents first
    modal: set[str] = field(default_factory=set)  # local names of the modal module
    beam: set[str] = field(default_factory=set)  # local names of the beam module
    beam_decorators: dict[str, str] = field(default_factory=dict)  # local -> beam name
    from_modal: dict[str, str] = field(default_factory=dict)  # local -> modal name
    module_env: dict[str, ast.expr] = field(default_factory=dict)
    rebound: set[str] = field(default_factory=set)  # module names bound more than once
    near_misses: list[NearMiss] = field(default_factory=list)
    parents: dict[int, ast.AST] = field(default_factory=dict)
    functions: list[Serverless] = field(default_factory=list)
    trains: list[ast.Call] = field(default_factory=list)
    # Computed once: a hostile script may hold thousands of train() calls.
    _scopes: dict[int, dict[str, ast.expr]] = field(default_factory=dict)
    _by_node: dict[int, Serverless] | None = None
    _all_mounts: list[Mount] | None = None

    @property
    def providers(self) -> set[str]:
        found = {f.provider for f in self.functions}
        if self.modal or self.from_modal:
            found.add("modal")
        if self.beam or self.beam_decorators:
            found.add("beam")
        return found

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        at = self.parent(node)
        while at is not None:
            yield at
            at = self.parent(at)

    def enclosing_function(self, node: ast.AST) -> FunctionNode | ast.Lambda | None:
        for up in self.ancestors(node):
            if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return up
        return None

    def serverless_around(self, node: ast.AST) -> Serverless | None:
        """The serverless function (or Modal class) whose body holds `node`."""
        if self._by_node is None:
            self._by_node = {id(f.node): f for f in self.functions}
        for up in self.ancestors(node):
            if id(up) in self._by_node:
                return self._by_node[id(up)]
        return None

    def scopes(self, node: ast.AST) -> list[dict[str, ast.expr]]:
        """Names to resolve at `node`: its function's own assignments, then the module's."""
        scopes: list[dict[str, ast.expr]] = []
        for up in self.ancestors(node):
            if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
                if id(up) not in self._scopes:
                    self._scopes[id(up)] = assignments(up.body)
                scopes.append(self._scopes[id(up)])
        scopes.append(self.module_env)
        return scopes

    def gpu_functions(self) -> list[Serverless]:
        return [f for f in self.functions if f.gpu]

    def all_mounts(self) -> list[Mount]:
        if self._all_mounts is None:
            self._all_mounts = [m for f in self.gpu_functions() for m in f.mounts]
        return self._all_mounts


def assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """`NAME = value` (and annotated) anywhere in these statements, nested blocks too but
    not nested functions or classes: the last one wins, as it would at run time."""
    env: dict[str, ast.expr] = {}
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.value is not None:
            env[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.With | ast.AsyncWith | ast.If | ast.For | ast.AsyncFor
                        | ast.While | ast.Try):
            for block in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(stmt, block, [])))
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    stack.extend(reversed(handler.body))
    return env


def rebound_names(body: list[ast.stmt]) -> set[str]:
    """Module-level names bound more than once (assigned twice, augmented, a loop
    target, imported over): their value at a decorator is not one literal."""
    counts: dict[str, int] = {}
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            targets = [stmt.target]
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                counts[stmt.target.id] = counts.get(stmt.target.id, 0) + 1
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            targets = [stmt.target]
            counts.update({n.id: counts.get(n.id, 0) + 1 for n in ast.walk(stmt.target)
                           if isinstance(n, ast.Name)})
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                name = (alias.asname or alias.name).split(".")[0]
                counts[name] = counts.get(name, 0) + 1
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(stmt, ast.With | ast.AsyncWith | ast.If | ast.For | ast.AsyncFor
                      | ast.While | ast.Try):
            for block in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(stmt, block, [])))
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    stack.extend(reversed(handler.body))
    return {name for name, n in counts.items() if n > 1}


# How deep `const_num` follows names and operators (each counts): a chain of names bound
# to sums of names, twenty deep, still folds; Python's own stack is never at risk.
FOLD_DEPTH = 64
# Arithmetic `const_num` folds; ** and the rest are left unknown.
_FOLD = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div)
# Past this an int is carried as a float: a hostile product of big literals stays cheap.
_EXACT = 2 ** 53


def const_num(node: ast.expr | None, scopes: list[dict[str, ast.expr]],
              rebound: set[str] | frozenset[str] = frozenset()) -> int | float | None:
    """The number an expression computes from int/float literals with + - * // / and
    unary minus, through names bound once, or None when any part is only known at run
    time (a call, an argument, a name bound twice, a string, a bool, ** ...)."""
    memo: dict[int, int | float | None] = {}

    def fold(at: ast.expr | None, depth: int) -> int | float | None:
        if at is None or depth > FOLD_DEPTH:
            return None
        if id(at) in memo:  # a name used many times is folded once
            return memo[id(at)]
        value: int | float | None = None
        if isinstance(at, ast.Constant):
            raw = at.value
            value = raw if isinstance(raw, int | float) and not isinstance(raw, bool) \
                else None
        elif isinstance(at, ast.Name):
            value = None if at.id in rebound else fold(lookup(at.id, scopes), depth + 1)
        elif isinstance(at, ast.UnaryOp) and isinstance(at.op, ast.USub | ast.UAdd):
            inner = fold(at.operand, depth + 1)
            value = None if inner is None else (-inner if isinstance(at.op, ast.USub)
                                                else inner)
        elif isinstance(at, ast.BinOp) and isinstance(at.op, _FOLD):
            left, right = fold(at.left, depth + 1), fold(at.right, depth + 1)
            value = None if left is None or right is None else _apply(at.op, left, right)
        memo[id(at)] = value
        return value

    return fold(node, 0)


def _apply(op: ast.operator, left: int | float, right: int | float) -> int | float | None:
    try:
        if isinstance(op, ast.Add):
            out = left + right
        elif isinstance(op, ast.Sub):
            out = left - right
        elif isinstance(op, ast.Mult):
            out = left * right
        elif isinstance(op, ast.FloorDiv):
            out = left // right
        else:
            out = left / right
    except (ZeroDivisionError, OverflowError):
        return None
    if isinstance(out, float) and math.isnan(out):
        return None
    return float(out) if isinstance(out, int) and abs(out) > _EXACT else out


def lookup(name: str, scopes: list[dict[str, ast.expr]]) -> ast.expr | None:
    for scope in scopes:
        if name in scope:
            return scope[name]
    return None


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as text, or None for anything that is not names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def has_spread(call: ast.Call) -> bool:
    """`f(**options)`: some keywords cannot be seen."""
    return any(k.arg is None for k in call.keywords)


def resolve(node: ast.expr | None, scopes: list[dict[str, ast.expr]],
            depth: int = 0) -> ast.expr | None:
    """Follow a bare name to the expression bound to it."""
    while isinstance(node, ast.Name) and depth < MAX_RESOLVE:
        node = lookup(node.id, scopes)
        depth += 1
    return None if isinstance(node, ast.Name) else node


def const_str(node: ast.expr | None, scopes: list[dict[str, ast.expr]],
              depth: int = 0) -> str | None:
    """The string an expression builds from literals (names, f-strings, `+`, Path `/`,
    os.path.join, Path(), str()), or None when any part is only known at run time."""
    if node is None or depth > MAX_RESOLVE:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return const_str(lookup(node.id, scopes), scopes, depth + 1)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                if part.format_spec is not None or part.conversion not in (-1, ord("s")):
                    return None
                text = const_str(part.value, scopes, depth + 1)
            else:
                text = const_str(part, scopes, depth + 1)
            if text is None:
                return None
            out.append(text)
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Div):
        left = const_str(node.left, scopes, depth + 1)
        right = const_str(node.right, scopes, depth + 1)
        if left is None or right is None:
            return None
        return left + right if isinstance(node.op, ast.Add) else posixpath.join(left, right)
    if isinstance(node, ast.Call) and not node.keywords:
        func = dotted(node.func) or ""
        parts = [const_str(a, scopes, depth + 1) for a in node.args]
        if any(p is None for p in parts) or not parts:
            return None
        texts = [p for p in parts if p is not None]
        if func.split(".")[-1] in ("Path", "PurePosixPath", "PosixPath") \
                or func in ("os.path.join", "posixpath.join", "path.join"):
            return posixpath.join(*texts)
        if func == "str" and len(texts) == 1:
            return texts[0]
    return None


def under(path: str, mount: Mount) -> bool:
    """Whether `path` lies on the volume: at or below its mount path (or Beam's
    /volumes/<name>). Relative paths match relative mounts only: the container's
    working directory is not known from the script."""
    for root in (mount.path, mount.also):
        if not root:
            continue
        p, r = posixpath.normpath(path), posixpath.normpath(root)
        if p.startswith("/") != r.startswith("/"):
            continue
        if r in ("/", ".") or p == r or p.startswith(r.rstrip("/") + "/"):
            return True
    return False


def is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either side)."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


def index(tree: ast.Module, max_depth: int) -> tuple[list[ast.AST], dict[int, ast.AST]] | None:
    """Every node and its parent in one pass without recursion, or None when the tree
    nests deeper than `max_depth` (a hostile script may; real ones stay under 40)."""
    nodes: list[ast.AST] = []
    parents: dict[int, ast.AST] = {}
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        if level > max_depth:
            return None
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append((child, level + 1))
    return nodes, parents


def read_script(tree: ast.Module, nodes: list[ast.AST], parents: dict[int, ast.AST]) -> Script:
    """Gather the facts from the tree and its index (`index`)."""
    script = Script(tree=tree, nodes=nodes, parents=parents,
                    module_env=assignments(tree.body), rebound=rebound_names(tree.body))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                local = alias.asname or top
                if alias.name == "modal":
                    script.modal.add(local)
                elif alias.name in BEAM_MODULES:
                    script.beam.add(local)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module.split(".")[0]
            for alias in node.names:
                local = alias.asname or alias.name
                if base == "modal":
                    script.from_modal[local] = alias.name
                elif base in BEAM_MODULES and alias.name in BEAM_DECORATORS:
                    script.beam_decorators[local] = alias.name
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                found = _serverless(script, node, decorator)
                if found is not None:
                    script.functions.append(found)
                    break
                miss = _near_miss(script, decorator)
                if miss is not None:
                    script.near_misses.append(miss)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "train" \
                and any(k.arg in TRAIN_KEYWORDS for k in node.keywords):
            script.trains.append(node)
    return script


def _provider_of(script: Script, call: ast.Call) -> tuple[str, str] | None:
    """(provider, decorator as written) when `call` is a serverless decorator."""
    name = dotted(call.func)
    if name is None:
        return None
    head, _, last = name.rpartition(".")
    if not head and name in script.beam_decorators:
        return "beam", name
    if head in script.beam and last in BEAM_DECORATORS:
        return "beam", name
    # Modal: `<app>.function(...)` / `<app>.cls(...)` on an App (or the old Stub).
    if head and last in ("function", "cls") and (script.modal or script.from_modal):
        return "modal", name
    return None


MODAL_DECORATORS = ("function", "cls")
NEAR = 0.75  # difflib ratio: "functon", "fucntion", "fuction" match; "method" does not


def _near_miss(script: Script, decorator: ast.expr) -> NearMiss | None:
    """A decorator with gpu= that is no serverless decorator but nearly spells one."""
    if not isinstance(decorator, ast.Call) or keyword(decorator, "gpu") is None:
        return None
    name = dotted(decorator.func)
    if name is None:
        return None
    head, _, last = name.rpartition(".")
    known: list[tuple[str, str]] = []  # (last part, whole name to suggest)
    if head and (script.modal or script.from_modal):
        known += [(d, f"{head}.{d}") for d in MODAL_DECORATORS]
    if head and head in script.beam:
        known += [(d, f"{head}.{d}") for d in BEAM_DECORATORS]
    if not head and (script.beam or script.beam_decorators):
        local = {b: loc for loc, b in script.beam_decorators.items()}
        known += [(local.get(d, d), local.get(d, d)) for d in BEAM_DECORATORS]
    names = [k for k, _ in known if k != last]
    close = difflib.get_close_matches(last, names, n=1, cutoff=NEAR)
    if not close:
        return None
    return NearMiss(decorator, name, dict(known)[close[0]])


def _serverless(script: Script, node: FunctionNode | ast.ClassDef,
                decorator: ast.expr) -> Serverless | None:
    if not isinstance(decorator, ast.Call):
        return None
    found = _provider_of(script, decorator)
    if found is None:
        return None
    provider, written = found
    scopes = script.scopes(decorator)
    gpu = keyword(decorator, "gpu")
    gpu_on = gpu is not None and not (isinstance(gpu.value, ast.Constant)
                                      and gpu.value.value in (None, "", 0))
    timeout = keyword(decorator, "timeout")
    return Serverless(provider=provider, decorator=written, name=node.name, node=node,
                      call=decorator, gpu=gpu_on,
                      has_timeout=timeout is not None or has_spread(decorator),
                      timeout=timeout.value if timeout is not None else None,
                      mounts=_mounts(provider, keyword(decorator, "volumes"), scopes))


def _mounts(provider: str, volumes: ast.keyword | None,
            scopes: list[dict[str, ast.expr]]) -> list[Mount]:
    if volumes is None:
        return []
    value = resolve(volumes.value, scopes)
    mounts: list[Mount] = []
    if provider == "modal" and isinstance(value, ast.Dict):
        for key, vol in zip(value.keys, value.values, strict=True):
            path = const_str(key, scopes)
            if path is not None:
                mounts.append(Mount(path, vol.id if isinstance(vol, ast.Name) else None))
    elif provider == "beam" and isinstance(value, ast.List | ast.Tuple):
        for item in value.elts:
            call = resolve(item, scopes)
            if not isinstance(call, ast.Call):
                continue
            path_node = keyword(call, "mount_path")
            name_node = keyword(call, "name")
            path = const_str(path_node.value if path_node else
                             (call.args[1] if len(call.args) > 1 else None), scopes)
            name = const_str(name_node.value if name_node else
                             (call.args[0] if call.args else None), scopes)
            if path is not None:
                mounts.append(Mount(path, None, f"/volumes/{name}" if name else None))
    return mounts
