"""One direction of dependency: the fit engine imports nothing from OpenTelemetry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = ["budget", "breakdown", "errors", "fit", "names", "presets", "result", "sources", "tokens"]
ENGINE += ["ledger", "pricing"]
PACKAGE = Path(__file__).resolve().parent.parent / "otel_ctx"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", ENGINE)
def test_engine_module_does_not_import_telemetry(module: str) -> None:
    imported = _imports(PACKAGE / f"{module}.py")
    offending = {
        m
        for m in imported
        if m.startswith(("opentelemetry", "otel_ctx.telemetry", "otel_ctx.cli", "otel_ctx.grafana"))
    }
    assert not offending, f"otel_ctx/{module}.py imports {sorted(offending)}"
