"""The docs' pictures are drawn from the real command and the real compose file, and are current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]


def make_pictures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_breakdown_picture_is_what_the_command_prints_today() -> None:
    pictures = make_pictures()
    svg = pictures.inspect_svg()
    assert "OVERFLOW" in svg or "COMPACTED" in svg  # the inspected run is one that had to give
    assert svg == pictures.INSPECT_SVG.read_text(), "run: python docs/make_pictures.py"


def test_the_stack_diagram_is_the_compose_file() -> None:
    pictures = make_pictures()
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    page = pictures.STACK_PAGE.read_text()
    assert pictures.render_stack_page(page, compose) == page, "run: python docs/make_pictures.py"
    diagram = pictures.stack_mermaid(compose)
    for name, service in compose["services"].items():
        assert f'["{name}' in diagram
        for dependency in service.get("depends_on", []):
            assert f"{name.replace('-', '_')} --> {dependency.replace('-', '_')}" in diagram


def test_a_port_entry_gives_its_host_port() -> None:
    published = make_pictures()._published
    assert published("127.0.0.1:3000:3001") == "3000"
    assert published("8080:80") == "8080"
    assert published(9090) == "9090"
    assert published({"target": 80, "published": "8081"}) == "8081"
