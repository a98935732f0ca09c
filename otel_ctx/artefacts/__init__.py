"""The deployable files, shipped inside the package: dashboards, alert rules, Collector config.

A ``pip install otel-ctx`` user has no checkout: ``otel-ctx dashboards export DIR`` writes
these out without the ``dashboards`` extra. In the repository the entries here are links to
the committed files (``dashboards/``, ``stack/otelcol.yaml``), so the package ships exactly
what the repository holds; building the distribution copies their contents in.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["COLLECTOR_CONFIG", "DASHBOARDS_DIR", "files"]

#: Where each shipped file lands under the export directory, and where it is in the package.
DASHBOARDS_DIR = "dashboards"
COLLECTOR_CONFIG = "otelcol.yaml"


def files() -> dict[str, Traversable]:
    """Export-relative path -> the packaged file: every dashboard JSON, the alert rules (and their
    promtool tests), and the Collector config."""
    root = resources.files(__name__)
    found: dict[str, Traversable] = {}
    for entry in sorted(root.joinpath(DASHBOARDS_DIR).iterdir(), key=lambda t: t.name):
        if entry.is_file() and entry.name.endswith((".json", ".yml")):
            found[f"{DASHBOARDS_DIR}/{entry.name}"] = entry
    found[COLLECTOR_CONFIG] = root.joinpath(COLLECTOR_CONFIG)
    return found
