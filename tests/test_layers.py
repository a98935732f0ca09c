"""One direction of dependency: the engine imports no OpenTelemetry and knows no provider.

engine <- adapters <- dialects (which adapter reads a request) <- fitting (the
request-level entry points) <- telemetry <- instrumentation, CLI, dashboards. The
engine imports no adapter (it defines the dialect contract the adapters implement),
and no dialect adapter imports another (what they share lives in helper modules).

Checked twice: statically (every import statement of the engine and adapter modules)
and at run time, in a fresh interpreter, by what ``sys.modules`` holds after
importing the engine and after a plain dict fit through the top-level package.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "otel_ctx"
ENGINE = sorted(p.stem for p in (PACKAGE / "engine").glob("*.py"))
ADAPTERS = sorted(p.stem for p in (PACKAGE / "adapters").glob("*.py"))
OUTSIDE = ("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli", "otel_ctx.grafana", "otel_ctx.demo")
#: The layer above engine and adapters: which adapter reads a request, and the entry points.
ABOVE_ADAPTERS = ("otel_ctx.dialects", "otel_ctx.fitting")


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
        assert concept in ENGINE
    for concept in ("result", "errors", "fitter", "sources"):
        assert concept in ENGINE
    assert {"__init__", "base", "openai_chat", "openai_responses"} <= set(ADAPTERS)
    assert {"anthropic", "langchain", "openai_chat", "openai_responses"} <= set(DIALECT_MODULES)
    assert not {"__init__", "base"} & set(DIALECT_MODULES)
    assert "dialect" in ENGINE  # the contract the adapters implement is the engine's
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


@pytest.mark.parametrize("module", ["encodings", "ledger", "models", "names", "presets", "pricing", "tables"])
def test_engine_side_top_level_module_imports_no_telemetry(module: str) -> None:
    imported = _imports(PACKAGE / f"{module}.py")
    offending = {m for m in imported if m.startswith(OUTSIDE)}
    assert not offending, f"otel_ctx/{module}.py imports {sorted(offending)}"


@pytest.mark.parametrize("module", ADAPTERS)
def test_adapter_module_imports_no_telemetry(module: str) -> None:
    imported = _imports(PACKAGE / "adapters" / f"{module}.py")
    offending = {m for m in imported if m.startswith(OUTSIDE)}
    assert not offending, f"otel_ctx/adapters/{module}.py imports {sorted(offending)}"


def test_engine_modules_import_each_other_without_a_cycle() -> None:
    graph = {
        m: {
            i.removeprefix("otel_ctx.engine.")
            for i in _imports(PACKAGE / "engine" / f"{m}.py")
            if i.startswith("otel_ctx.engine.")
        }
        for m in ENGINE
        if m != "__init__"
    }
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


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
    assert "otel_ctx.engine.fitter" in modules
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
    assert "otel_ctx.engine.fitter" in modules
    assert _telemetry(modules) == []
    # Dialects load when their requests arrive, not before.
    assert "otel_ctx.adapters.openai_responses" not in modules
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
    "otel_ctx.ledger": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.pricing": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.presets": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.encodings": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.models": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.tables": ("opentelemetry", "otel_ctx.telemetry", *_NEVER_BELOW_TELEMETRY),
    "otel_ctx.telemetry": _NEVER_BELOW_TELEMETRY,
    # The dashboards and rules are generated from the registry alone: no SDK, no telemetry layer.
    "otel_ctx.grafana": ("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli", "otel_ctx.demo"),
    "otel_ctx.demo": ("otel_ctx.cli", "otel_ctx.grafana", "otel_ctx.instrumentation"),
}


def _module_names() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if any(name == layer or name.startswith(layer + ".") for layer in _FORBIDDEN):
            found.append(name)
    return found


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
    assert "otel_ctx.engine.fitter" in modules and "otel_ctx.telemetry.setup" in modules
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
