"""Draw the docs' pictures from the real thing: ``python docs/make_pictures.py``.

* ``docs/pictures/inspect.svg``: what ``otel-ctx demo --inspect`` prints on a terminal, recorded
  by Rich from the command itself (the same code path, the same colours).
* the SRE guide's Mermaid diagram: the compose stack's services, the ports they publish and
  what each depends on, read from ``docker-compose.yml``.

``tests/docs/test_pictures.py`` runs this script and fails when a committed picture is stale, so the
pictures cannot drift from the command or the compose file.
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
PICTURES = ROOT / "docs" / "pictures"
INSPECT_SVG = PICTURES / "inspect.svg"
STACK_PAGE = ROOT / "docs" / "sre-guide.md"
#: A compacting dispute: a handful of rounds, one of them capped and compacted.
INSPECT_ARGS = ["demo", "--inspect"]
WIDTH = 100
BEGIN = "```mermaid\n"
END = "```\n"


def inspect_svg() -> str:
    """The terminal output of ``otel-ctx demo --inspect`` as an SVG."""
    from otel_ctx.cli import _demo_command as demo_command
    from otel_ctx.cli import main as otel_ctx_main
    from otel_ctx.cli._console import make_console

    console = Console(
        file=io.StringIO(),
        record=True,
        force_terminal=True,
        width=WIDTH,
        highlight=False,
        color_system="truecolor",
    )

    def recording(*, stderr: bool = False) -> Console:
        return make_console(stderr=True) if stderr else console

    # The command's own code path, with its standard output recorded instead of printed. The
    # entry point sets up process-wide logging for a CLI run; the importer's is put back after.
    logger = logging.getLogger("otel_ctx")
    with (
        mock.patch.object(demo_command, "make_console", recording),
        mock.patch.object(logger, "filters", list(logger.filters)),
    ):
        try:
            otel_ctx_main(INSPECT_ARGS)  # the console script's entry point; it always exits
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise SystemExit(f"otel-ctx {' '.join(INSPECT_ARGS)} exited {exit_.code}") from None
    title = "otel-ctx " + " ".join(INSPECT_ARGS)
    # A fixed unique id keeps the SVG byte-identical between runs (Rich hashes the content otherwise).
    return console.export_svg(title=title, unique_id="otel-ctx-inspect")


def _published(port: Any) -> str:
    """The host port of a compose port entry: ``"127.0.0.1:3000:3000"``, ``"3000:3000"`` or long form."""
    if isinstance(port, dict):
        return str(port.get("published", port.get("target", "")))
    parts = str(port).split(":")
    return parts[-2] if len(parts) > 1 else parts[0]


def stack_mermaid(compose: dict[str, Any]) -> str:
    """A Mermaid flowchart: one node per service (with its published ports), an edge per depends_on."""
    lines = ["flowchart LR"]
    services: dict[str, Any] = compose.get("services", {})
    for name, service in services.items():
        ports = [_published(port) for port in service.get("ports", [])]
        label = name + (f"<br/>:{', :'.join(ports)}" if ports else "")
        lines.append(f'    {name.replace("-", "_")}["{label}"]')
    for name, service in services.items():
        depends = service.get("depends_on", [])
        for dependency in depends if isinstance(depends, list) else list(depends):
            lines.append(f"    {name.replace('-', '_')} --> {dependency.replace('-', '_')}")
    return "\n".join(lines) + "\n"


def render_stack_page(text: str, compose: dict[str, Any]) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}{stack_mermaid(compose)}{END}{tail}"


def main() -> int:
    PICTURES.mkdir(exist_ok=True)
    INSPECT_SVG.write_text(inspect_svg())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    STACK_PAGE.write_text(render_stack_page(STACK_PAGE.read_text(), compose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
