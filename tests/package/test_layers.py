"""One direction of dependency: the engine imports no OpenTelemetry and knows no provider.

engine <- adapters <- dialects (which adapter reads a request) <- fitting (the
request-level entry points) <- telemetry <- instrumentation, CLI, dashboards. The
engine imports no adapter (it defines the dialect contract the adapters implement),
and no dialect adapter imports another (what they share lives in helper modules).

Checked twice: statically (every import statement of the engine and adapter modules)
and at run time, in a fresh interpreter, by what ``sys.modules`` holds after
importing the engine and after a plain dict fit through the top-level package.

And one direction everywhere: no module of ``otel_ctx`` is in an import circle, counting
the imports inside functions (a circle through one is a circle all the same, only found
later) and leaving out the ``TYPE_CHECKING`` blocks (they never run).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "otel_ctx"
ENGINE = sorted(p.stem for p in (PACKAGE / "engine").glob("*.py"))
ADAPTERS = sorted(p.stem for p in (PACKAGE / "adapters").glob("*.py"))
OUTSIDE = ("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli", "otel_ctx.grafana", "otel_ctx.demo")
#: The layer above engine and adapters: which adapter reads a request, and the entry points.
ABOVE_ADAPTERS = ("otel_ctx._dialects", "otel_ctx._fitting")


def _is_dialect(path: Path) -> bool:
    """A module that provides a dialect: it binds ``ADAPTER`` or builds one (``BUILT_ON``)."""
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id in ("ADAPTER", "BUILT_ON") for t in targets):
            return True
    return False


#: Dialect modules; the others in the package (base, shared helpers) are code they share.
DIALECT_MODULES = sorted(m for m in ADAPTERS if _is_dialect(PACKAGE / "adapters" / f"{m}.py"))
DIALECTS = tuple(f"otel_ctx.adapters.{m}" for m in DIALECT_MODULES)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_layout_is_the_agreed_one() -> None:
    for concept in ("model", "tokens", "budget", "capping", "compaction", "calibration", "breakdown"):
        assert f"_{concept}" in ENGINE
    for concept in ("result", "errors", "fitter", "sources"):
        assert f"_{concept}" in ENGINE
    assert {"__init__", "_base", "_openai_chat", "_openai_responses"} <= set(ADAPTERS)
    assert {"_anthropic", "_langchain", "_openai_chat", "_openai_responses"} <= set(DIALECT_MODULES)
    assert not {"__init__", "_base"} & set(DIALECT_MODULES)
    assert "_dialect" in ENGINE  # the contract the adapters implement is the engine's
    for above in ABOVE_ADAPTERS:
        assert (PACKAGE / f"{above.removeprefix('otel_ctx.')}.py").exists()
    for moved in ("fit", "tokens", "breakdown", "budget", "result", "errors", "sources"):
        assert not (PACKAGE / f"{moved}.py").exists(), f"otel_ctx/{moved}.py should live in otel_ctx/engine/"


@pytest.mark.parametrize("module", ENGINE)
def test_engine_module_imports_no_telemetry_and_no_adapter(module: str) -> None:
    imported = _imports(PACKAGE / "engine" / f"{module}.py")
    above = ("otel_ctx.adapters", *ABOVE_ADAPTERS)
    offending = {m for m in imported if m.startswith(OUTSIDE) or m.startswith(above)}
    assert not offending, f"otel_ctx/engine/{module}.py imports {sorted(offending)}"


@pytest.mark.parametrize("module", DIALECT_MODULES)
def test_dialect_adapters_do_not_import_each_other(module: str) -> None:
    mine = f"otel_ctx.adapters.{module}"
    imported = _imports(PACKAGE / "adapters" / f"{module}.py")
    offending = {m for m in imported if m in DIALECTS and m != mine}
    # ``from otel_ctx.adapters import langchain`` names the package, the dialect is the alias.
    offending |= {
        f"otel_ctx.adapters.{a.name}"
        for node in ast.walk(ast.parse((PACKAGE / "adapters" / f"{module}.py").read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "otel_ctx.adapters"
        for a in node.names
        if a.name in DIALECT_MODULES
    }
    assert not offending, f"otel_ctx/adapters/{module}.py imports the dialects {sorted(offending)}"
    above = {m for m in imported if m.startswith(ABOVE_ADAPTERS)}
    assert not above, f"otel_ctx/adapters/{module}.py imports the layer above it: {sorted(above)}"


@pytest.mark.parametrize("module", ["_encodings", "_ledger", "_models", "names", "_pricing", "_tables"])
def test_engine_side_top_level_module_imports_no_telemetry(module: str) -> None:
    imported = _imports(PACKAGE / f"{module}.py")
    offending = {m for m in imported if m.startswith(OUTSIDE)}
    assert not offending, f"otel_ctx/{module}.py imports {sorted(offending)}"


@pytest.mark.parametrize("module", ADAPTERS)
def test_adapter_module_imports_no_telemetry(module: str) -> None:
    imported = _imports(PACKAGE / "adapters" / f"{module}.py")
    offending = {m for m in imported if m.startswith(OUTSIDE)}
    assert not offending, f"otel_ctx/adapters/{module}.py imports {sorted(offending)}"


def _package_modules(package: Path) -> dict[str, Path]:
    """Every module under ``package`` by its dotted name; a package's ``__init__`` by the package's."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: at the top and inside functions, not under ``TYPE_CHECKING``.

    An import inside a function is a dependency all the same (it only runs later), so a
    circle through one is a circle; a ``TYPE_CHECKING`` block never runs (its ``else`` does).
    """
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each of its modules imports, relative imports resolved.

    ``from pkg import x`` depends on ``pkg`` (its ``__init__``, whatever it re-exports) and,
    when ``x`` is a module, on ``pkg.x`` too: a submodule that imports a sibling through the
    package is in a circle with the ``__init__`` that imports it. A name that is no module
    counts as the innermost module that holds it (``pkg.mod.Name`` is ``pkg.mod``).
    """
    modules = _package_modules(package)

    def holder(name: str) -> str | None:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in modules else None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        wanted: list[str] = []
        for node in _run_time_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wanted += [a.name for a in node.names]
                continue
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            wanted += [base, *(f"{base}.{a.name}" for a in node.names)]
        graph[module] = {h for h in map(holder, wanted) if h is not None and h != module}
    return graph


def _groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: set[str] = set()
            while node not in group:
                group.add(stack.pop())
            on_stack.difference_update(group)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def _shortest_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest circle through the group's first module, closed on it: a path to break."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while start not in came_from:  # a strongly connected group leads back to its start
        reached = []
        for node in frontier:
            for nxt in sorted(graph[node] & group):
                if nxt not in came_from:
                    came_from[nxt] = node
                    reached.append(nxt)
        frontier = reached
    circle = [start]
    while len(circle) == 1 or circle[-1] != start:
        circle.append(came_from[circle[-1]])
    return circle[::-1]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle for each group of modules that import each other, round and round."""
    return sorted(_shortest_circle(graph, group) for group in _groups(graph))


def _described(graph: dict[str, set[str]]) -> str:
    """Each group's shortest circle and, when there is more to it, every module in the group."""
    lines = []
    for group in sorted(_groups(graph), key=min):
        circle = _shortest_circle(graph, group)
        line = " -> ".join(circle)
        if len(group) > len(circle) - 1:
            line += f" (one circle of {len(group)} modules that reach each other: {', '.join(sorted(group))})"
        lines.append(line)
    return "\n".join(lines)


def test_the_import_graph_sees_function_level_and_relative_imports_not_type_checking_ones(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.b import B\nelse:\n    from pkg import sub\n"
        "A = 1\n"
    )
    (package / "b.py").write_text("def later():\n    from .sub.c import C\n")
    (package / "d.py").write_text("import json\nimport pkg.sub.c\n")
    (package / "sub" / "__init__.py").write_text("from . import c\n")
    (package / "sub" / "c.py").write_text("from ..b import later\nC = 1\n")
    graph = _import_graph(package)
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg", "pkg.sub"},  # through the package; not pkg.b, type-only
        "pkg.b": {"pkg.sub.c"},
        "pkg.d": {"pkg.sub.c"},
        "pkg.sub": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg.b"},
    }
    # Two circles: the package and its module a; b and c through b's function-level import.
    assert _circles(graph) == [["pkg", "pkg.a", "pkg"], ["pkg.b", "pkg.sub.c", "pkg.b"]]
    assert _described(graph).splitlines() == ["pkg -> pkg.a -> pkg", "pkg.b -> pkg.sub.c -> pkg.b"]


def test_no_module_of_the_package_is_in_an_import_circle() -> None:
    """One direction of dependency everywhere in ``otel_ctx``, function-level imports included.

    A circle makes the import order matter (a module run half-initialised) and leaves no
    layer below the other; inside a package, a submodule imports its siblings by their own
    names, never through the package whose ``__init__`` imports it.
    """
    graph = _import_graph(PACKAGE)
    assert "otel_ctx._fitting" in graph["otel_ctx.instrumentation._core"]  # imported inside a method
    assert "otel_ctx.telemetry._run" not in graph["otel_ctx.instrumentation._core"]  # type-only
    circles = _circles(graph)
    assert not circles, f"modules in an import circle:\n{_described(graph)}"


def _modules_after(code: str) -> list[str]:
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import json, sys
        print(json.dumps(sorted(sys.modules)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _telemetry(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli"))]


def test_importing_the_engine_loads_no_opentelemetry() -> None:
    modules = _modules_after("import otel_ctx.engine")
    assert "otel_ctx.engine._fitter" in modules
    assert _telemetry(modules) == []


def test_a_plain_dict_fit_through_the_top_level_loads_no_opentelemetry() -> None:
    modules = _modules_after(
        """
        from otel_ctx import BudgetPolicy, ContextFitter
        fitter = ContextFitter(BudgetPolicy(context_length=8000, reserved_output=500))
        result = fitter.fit([{"role": "user", "content": "Where is my parcel?"}])
        assert result.outcome == "fit", result.outcome
        """
    )
    assert "otel_ctx.engine._fitter" in modules
    assert _telemetry(modules) == []
    # Dialects load when their requests arrive, not before.
    assert "otel_ctx.adapters._openai_responses" not in modules
    assert "langchain_core" not in modules


def test_the_top_level_still_offers_telemetry_on_first_use() -> None:
    modules = _modules_after(
        """
        import otel_ctx
        assert callable(otel_ctx.observe)
        """
    )
    assert "otel_ctx.telemetry" in modules


#: What each layer must not load when one of its modules is imported on its own. Outer layers
#: (the CLI, the instrumentor, the dashboards' generator, the alert rules) may read inner ones,
#: never the other way round.
_NEVER_BELOW_TELEMETRY = ("otel_ctx.cli", "otel_ctx.demo", "otel_ctx.instrumentation", "otel_ctx.grafana")
_FORBIDDEN: dict[str, tuple[str, ...]] = {
    "otel_ctx.engine": (
        "opentelemetry",
        "otel_ctx.telemetry",
        "otel_ctx.adapters",
        *ABOVE_ADAPTERS,
        *_NEVER_BELOW_TELEMETRY,
    ),
    "otel_ctx.adapters": ("opentelemetry", "otel_ctx.telemetry", *ABOVE_ADAPTERS, *_NEVER_BELOW_TELEMETRY),
    **dict.fromkeys(ABOVE_ADAPTERS, ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY)),
    "otel_ctx.names": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx._ledger": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx._pricing": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx._encodings": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx._models": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx._tables": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.telemetry": _NEVER_BELOW_TELEMETRY,
    # The dashboards and rules are generated from the registry alone: no SDK, no telemetry layer.
    "otel_ctx.grafana": ("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli", "otel_ctx.demo"),
    "otel_ctx.demo": ("otel_ctx.cli", "otel_ctx.grafana", "otel_ctx.instrumentation"),
    # The demo's policies are read by examples and tests that fit without telemetry.
    "otel_ctx.demo._presets": (
        "opentelemetry",
        "otel_ctx.telemetry",
        "otel_ctx.cli",
        "otel_ctx.grafana",
        "otel_ctx.instrumentation",
    ),
}


def _module_names() -> list[str]:
    return [
        name
        for name in _package_modules(PACKAGE)
        if any(name == layer or name.startswith(layer + ".") for layer in _FORBIDDEN)
    ]


def _forbidden_for(module: str) -> tuple[str, ...]:
    layer = max((k for k in _FORBIDDEN if module == k or module.startswith(k + ".")), key=len)
    return _FORBIDDEN[layer]


_FRESH_IMPORTS = """
import json, os, sys
# One child per module, forked from an interpreter that has loaded nothing of otel_ctx:
# each import starts as fresh as a new interpreter, without paying for one per module.
for name in json.loads(sys.argv[1]):
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        try:
            __import__(name)
            out = sorted(sys.modules)
        except BaseException as exc:
            out = {"error": repr(exc)}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.wait()
    print(json.dumps({name: json.loads(b"".join(chunks))}))
"""


def test_each_module_imported_alone_loads_no_outer_layer() -> None:
    modules = _module_names()
    assert "otel_ctx.engine._fitter" in modules and "otel_ctx.telemetry._setup" in modules
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_IMPORTS, json.dumps(modules)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, object] = {}
    for line in out.stdout.splitlines():
        loaded.update(json.loads(line))
    assert sorted(loaded) == sorted(modules)
    problems = {}
    for name, after in loaded.items():
        assert isinstance(after, list), f"importing {name} failed: {after}"
        forbidden = _forbidden_for(name)
        offending = sorted(m for m in after if m.startswith(forbidden) and not name.startswith(forbidden))
        if name in DIALECTS:  # a dialect loads no other dialect
            offending += sorted(m for m in after if m in DIALECTS and m != name)
        if offending:
            problems[name] = offending
    assert not problems, f"modules that load an outer layer when imported: {problems}"


#: The modules a user imports by their own name: the names registry (dashboards, alert rules and
#: the reference page read it), the reference page's generator (``python -m otel_ctx.reference``)
#: and the CLI's ``python -m`` entry.
PUBLIC_MODULES = {"otel_ctx/names.py", "otel_ctx/reference.py", "otel_ctx/cli/__main__.py"}


def _all_of(init: Path) -> list[list[str]]:
    """Every ``__all__ = [...]`` a package's ``__init__`` assigns at its top level."""
    return [
        ast.literal_eval(n.value)
        for n in ast.parse(init.read_text()).body
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
    ]


def test_every_implementation_module_is_private_and_its_package_says_what_it_exports() -> None:
    """Outside a few modules named for users, the API is what each package's ``__init__``
    re-exports: every other module is ``_x.py``, and every package lists its names in ``__all__``
    (so a refactor inside a package breaks no import a user wrote)."""
    repo = PACKAGE.parent
    public = sorted(
        p.relative_to(repo).as_posix()
        for p in PACKAGE.rglob("*.py")
        if not p.name.startswith("_") and p.relative_to(repo).as_posix() not in PUBLIC_MODULES
    )
    assert public == [], f"public-named implementation modules: {public}"
    for init in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        listed = [
            n
            for n in tree.body
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        ]
        assert len(listed) == 1, f"{init.relative_to(repo)} has no single explicit __all__"
        exported = ast.literal_eval(listed[0].value)
        assert exported, f"{init.relative_to(repo)}: __all__ is empty"


def test_no_package_attribute_is_both_a_module_and_a_function() -> None:
    """``import otel_ctx.telemetry.x`` binds the module; ``from otel_ctx.telemetry import x`` the
    function: one name meaning two things is how a patch or an import goes to the wrong one."""
    for init in PACKAGE.rglob("__init__.py"):
        package = ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        modules = {p.stem for p in init.parent.glob("*.py")} | {
            p.name for p in init.parent.iterdir() if p.is_dir()
        }
        tree = ast.parse(init.read_text())
        exported: set[str] = set()
        for n in tree.body:
            if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets
            ):
                exported = set(ast.literal_eval(n.value))
        assert not exported & modules, f"{package} exports {sorted(exported & modules)}, also its modules"
