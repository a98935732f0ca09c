"""The dashboard pictures in docs/ are current: one per dashboard, with the dashboard's panels.

The pictures come from a real Prometheus run (``python docs/make_dashboard_pictures.py``, minutes
long), which these tests do not repeat: they check that every dashboard has its picture, that a
picture's panel titles are exactly its dashboard's (a renamed, added or removed panel makes it
stale) and that every picture says how it was drawn. The drawing itself is checked on made-up
series of every panel kind.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from otel_ctx import names

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
PICTURES = ROOT / "docs" / "pictures"
SVG = "{http://www.w3.org/2000/svg}"
CAPTION = (
    "Drawn by docs/make_dashboard_pictures.py from the panels' own PromQL against a real Prometheus "
    "fed by `otel-ctx demo`; not a Grafana screenshot."
)
REDRAW = "run: python docs/make_dashboard_pictures.py (needs prometheus on PATH)"


def make_dashboard_pictures() -> ModuleType:
    path = ROOT / "docs" / "make_dashboard_pictures.py"
    spec = importlib.util.spec_from_file_location("make_dashboard_pictures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through its module
    spec.loader.exec_module(module)
    return module


def dashboard_titles(model: dict[str, Any]) -> list[str]:
    """Every panel's title, rows and panels folded into rows included, in the dashboard's order."""
    titles: list[str] = []
    stack = list(model.get("panels") or [])
    while stack:
        panel = stack.pop(0)
        stack[:0] = panel.get("panels") or []
        titles.append(str(panel.get("title", "")))
    return titles


def picture_titles(svg: ET.Element) -> list[str]:
    return [g.attrib["data-panel-title"] for g in svg.iter(f"{SVG}g") if "data-panel-title" in g.attrib]


def captions(svg: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(f"{SVG}text") if t.attrib.get("class") == "caption"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_dashboard_has_a_current_picture_that_says_how_it_was_drawn(path: Path) -> None:
    model = json.loads(path.read_text(encoding="utf-8"))
    picture = PICTURES / f"dashboard-{model['uid']}.svg"
    assert picture.is_file(), f"{picture.name} missing; {REDRAW}"
    svg = ET.parse(picture).getroot()
    assert picture_titles(svg) == dashboard_titles(model), f"{picture.name} is stale; {REDRAW}"
    assert svg.findtext(f"{SVG}title") == model["title"]
    assert captions(svg) == [CAPTION]


def test_no_picture_of_a_dashboard_that_is_gone() -> None:
    uids = {json.loads(p.read_text(encoding="utf-8"))["uid"] for p in DASHBOARDS}
    drawn = {p.name.removeprefix("dashboard-").removesuffix(".svg") for p in PICTURES.glob("dashboard-*.svg")}
    assert drawn == uids


def test_the_pictures_are_in_the_docs_with_their_caption() -> None:
    walkthrough = (ROOT / "docs" / "walkthrough.md").read_text(encoding="utf-8")
    for path in DASHBOARDS:
        uid = json.loads(path.read_text(encoding="utf-8"))["uid"]
        assert f"(pictures/dashboard-{uid}.svg)" in walkthrough
    assert "python docs/make_dashboard_pictures.py" in walkthrough
    assert "not a Grafana screenshot" in walkthrough


def test_the_drawing_shows_every_panel_kind_and_says_which_panels_have_no_data() -> None:
    pictures = make_dashboard_pictures()
    assert pictures.CAPTION == CAPTION
    series = pictures.Series
    start, end = 1000.0, 1150.0
    points = [(start + 5 * i, float(i)) for i in range(31)]
    by_kind = {
        "timeseries": [series("dispute", points, "A", {"context_budget_task_type": "dispute"})],
        "stat": [series("value", [(end, 0.25)], "A", {})],
        "bargauge": [series("headroom", [(end, 0.5)], "A", {"context_budget_component": "headroom"})],
        "table": [series("dispute", [(end, 13.0)], "A", {"context_budget_task_type": "dispute"})],
        "heatmap": [series(le, points, "A", {"le": le}) for le in ("0.5", "1", "+Inf")],
    }
    model: dict[str, Any] = {"uid": "u", "title": "A dashboard & its <panels>", "panels": []}
    drawn: list[tuple[dict[str, Any], list[Any]]] = []
    for n, (kind, found) in enumerate(by_kind.items()):
        panel = {"type": kind, "title": f"{kind} <{n}>", "gridPos": {"x": 0, "y": 8 * n, "w": 12, "h": 8}}
        panel["targets"] = [{"refId": "A", "expr": "sum(context_budget_fits_total)"}]
        if kind == "stat":
            panel["fieldConfig"] = {"defaults": {"unit": "percentunit"}}
        drawn.append((panel, found))
    native = {"type": "timeseries", "title": "native", "gridPos": {"x": 12, "y": 0, "w": 12, "h": 8}}
    distribution = names.DISTRIBUTIONS[0].prometheus
    native["targets"] = [{"refId": "A", "expr": f"histogram_quantile(0.95, sum(rate({distribution}[1m])))"}]
    drawn.append((native, []))
    model["panels"] = [panel for panel, _ in drawn]
    svg = ET.fromstring(pictures.draw(model, drawn, start, end))
    assert picture_titles(svg) == dashboard_titles(model)
    assert svg.findtext(f"{SVG}title") == model["title"]
    assert captions(svg) == [CAPTION]
    text = " ".join("".join(t.itertext()) for t in svg.iter(f"{SVG}text"))
    assert "25%" in text  # the stat, in its unit
    assert "needs native histograms" in text
    assert len(list(svg.iter(f"{SVG}polyline"))) == 1  # the time series, drawn as a line
    assert "≤ 0.5" in text and "≤ +Inf" in text  # the heatmap's buckets
    assert "13" in text and "dispute" in text  # the table's row
