"""The ``otel-ctx`` command line (skeleton; the CLI issue fills it in)."""

from __future__ import annotations

import typer

from otel_ctx.cli import dashboards

app = typer.Typer(no_args_is_help=True, help="Make an LLM agent's context budget observable.")
app.add_typer(dashboards.app, name="dashboards")


def main() -> None:
    app()
