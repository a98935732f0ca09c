"""``otel-ctx dashboards build|push`` (skeleton; the dashboards issue fills it in)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Build or push the shipped Grafana dashboards.")
