"""Draw each dashboard from a real Prometheus run of the demo: ``python docs/make_dashboard_pictures.py``.

Needs the Prometheus ``make servers`` builds (``stack/build-servers.sh``: the release
docker-compose.yml pins). The script starts a real Prometheus on a free 127.0.0.1 port with
the shipped recording rules and alerts (``dashboards/alerts.yml``), feeds it ``otel-ctx demo
--forever`` for a couple of minutes, then evaluates every panel's own PromQL over the run
(``query_range``; the dashboard variables set to "All") and draws one SVG per dashboard, laid out
on the dashboard's own grid: ``docs/pictures/dashboard-<uid>.svg``. The whole run takes about
three minutes. ``--save FILE`` keeps the query results; ``--redraw FILE`` draws from them again
without Prometheus (for work on the drawing alone).

The pictures are drawn here, by hand, from the query results: they are not Grafana screenshots,
and every picture says so. ``tests/docs/test_dashboard_pictures.py`` checks that every dashboard has
its picture and that the picture's panel titles are the dashboard's, so a renamed panel shows up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import free_port, needs_distributions, stop, substitute, wait  # noqa: E402

PICTURES = ROOT / "docs" / "pictures"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
RULES = ROOT / "dashboards" / "alerts.yml"
CAPTION = (
    "Drawn by docs/make_dashboard_pictures.py from the panels' own PromQL against a real Prometheus "
    "fed by `otel-ctx demo`; not a Grafana screenshot."
)
SERVICE = "otel-ctx-demo"
SEED = 23
RATE = 10
#: Seconds between scrapes and between rule evaluations.
INTERVAL = 5
#: One grid unit of the dashboard's 24-column layout, in pixels.
UNIT_W = 50
UNIT_H = 30
MARGIN = 12
HEADER = 48
FOOTER = 40
WIDTH = 24 * UNIT_W + 2 * MARGIN
PALETTE = (
    "#7eb26d",
    "#eab839",
    "#6ed0e0",
    "#ef843c",
    "#e24d42",
    "#1f78c1",
    "#ba43a9",
    "#705da0",
    "#508642",
    "#cca300",
)
BACKGROUND = "#111217"
PANEL = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
DIM = "#8e8e9e"


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    ref: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def last(self) -> float:
        return self.points[-1][1]


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{path}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self.get(
            "/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:g}"
        )
        result: list[dict[str, Any]] = data["result"]
        return result


# --- the run -----------------------------------------------------------------------------------


def built_prometheus() -> str:
    """The Prometheus ``make servers`` built, the one docker-compose.yml pins."""
    found = subprocess.run(
        ["bash", str(ROOT / "stack" / "build-servers.sh"), "--paths"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    paths = dict(line.partition("=")[::2] for line in found.stdout.splitlines())
    path = paths.get("prometheus", "")
    if not path or not os.access(path, os.X_OK):
        raise SystemExit(f"Prometheus is not built ({path or 'no path'}): run `make servers`")
    return path


@contextmanager
def run_demo(seconds: float) -> Iterator[tuple[Prometheus, float, float]]:
    """A real Prometheus with the shipped rules, scraping ``otel-ctx demo`` for ``seconds``."""
    prometheus = built_prometheus()
    with tempfile.TemporaryDirectory(prefix="otel-ctx-pictures-") as tmp_name:
        tmp = Path(tmp_name)
        prom_port, demo_port = free_port(), free_port()
        config = {
            "global": {
                "scrape_interval": f"{INTERVAL}s",
                "scrape_timeout": f"{INTERVAL}s",
                "evaluation_interval": f"{INTERVAL}s",
            },
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {"job_name": SERVICE, "static_configs": [{"targets": [f"127.0.0.1:{demo_port}"]}]}
            ],
        }
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        procs: list[subprocess.Popen[bytes]] = []
        with (tmp / "prometheus.log").open("wb") as prom_log, (tmp / "demo.log").open("wb") as demo_log:
            try:
                procs.append(
                    subprocess.Popen(
                        [
                            prometheus,
                            f"--config.file={tmp / 'prometheus.yml'}",
                            f"--storage.tsdb.path={tmp / 'data'}",
                            f"--web.listen-address=127.0.0.1:{prom_port}",
                        ],
                        stdout=prom_log,
                        stderr=subprocess.STDOUT,
                    )
                )
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-c",
                            "from otel_ctx.cli import main; main()",
                            "demo",
                            "--forever",
                            f"--rate={RATE}",
                            f"--seed={SEED}",
                            f"--prometheus-port={demo_port}",
                            f"--service-name={SERVICE}",
                        ],
                        stdout=demo_log,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
                prom = Prometheus(f"http://127.0.0.1:{prom_port}")

                def scraped() -> bool:
                    for proc in procs:
                        if proc.poll() is not None:
                            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}; logs in {tmp}")
                    return bool(prom.query(f'up{{job="{SERVICE}"}} == 1'))

                wait("Prometheus's first scrape of the demo", 60, scraped)
                start = time.time()
                print(f"demo scraped; collecting {seconds:.0f} s of data", file=sys.stderr)
                time.sleep(seconds)
                end = time.time()
                yield prom, start, end
            finally:
                for proc in reversed(procs):
                    stop(proc)


# --- the queries -------------------------------------------------------------------------------


def panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows and panels folded into rows included, in the dashboard's order."""
    found: list[dict[str, Any]] = []
    stack = list(model.get("panels") or [])
    while stack:
        panel = stack.pop(0)
        stack[:0] = panel.get("panels") or []
        found.append(panel)
    return found


def _legend(fmt: str | None, metric: dict[str, str], constant: set[str]) -> str:
    """Grafana's legend: the format with its labels filled in, or the label values that differ."""
    if fmt and fmt != "__auto":
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()
    shown = [v for k, v in sorted(metric.items()) if k != "__name__" and k not in constant]
    return " · ".join(shown) or metric.get("__name__", "") or "value"


def _number(value: Any) -> float:
    if isinstance(value, dict):  # a native histogram: its count, as Grafana's heatmap reads it
        return float(value.get("count", "nan"))
    return float(value)


def panel_series(
    prom: Prometheus, panel: dict[str, Any], start: float, end: float, step: float
) -> list[Series]:
    targets = [t for t in panel.get("targets") or [] if isinstance(t.get("expr"), str) and t["expr"].strip()]
    found: list[tuple[dict[str, Any], dict[str, str], list[tuple[float, float]]]] = []
    range_seconds = f"{max(60, int(end - start))}s"
    for target in targets:
        expr = substitute(target["expr"].replace("$__range", range_seconds))
        for sample in prom.query_range(expr, start, end, step):
            raw = sample.get("values") or sample.get("histograms") or []
            points = [(float(t), _number(v)) for t, v in raw]
            points = [(t, v) for t, v in points if math.isfinite(v)]
            if points:
                found.append((target, sample["metric"], points))
    # Labels with one value across the panel (the job, the model) say nothing in a legend.
    keys = {k for _, metric, _ in found for k in metric}
    constant = {k for k in keys if len({metric.get(k) for _, metric, _ in found}) == 1 and len(found) > 1}
    series = []
    for target, metric, points in found:
        label = _legend(target.get("legendFormat"), metric, constant)
        if len(targets) > 1 and target.get("legendFormat") in (None, "", "__auto"):
            label = f"{target.get('refId', '')}: {label}"
        series.append(Series(label, points, str(target.get("refId", "")), dict(metric)))
    return series


# --- the drawing -------------------------------------------------------------------------------


def fmt_value(value: float, unit: str | None) -> str:
    if unit == "percentunit":
        return f"{value * 100:.3g}%"
    if unit == "currencyUSD":
        return f"${value:.3g}" if abs(value) < 1000 else f"${value:,.0f}"
    suffix = "/s" if unit == "ops" else ""
    for scale, name in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{name}{suffix}"
    if value == 0:
        return f"0{suffix}"
    return f"{value:.3g}{suffix}"


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _text(
    x: float,
    y: float,
    body: str,
    *,
    size: int = 11,
    fill: str = TEXT,
    anchor: str = "start",
    bold: bool = False,
) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" text-anchor="{anchor}"{weight}>'
        f"{escape(body)}</text>"
    )


def _clip(text: str, width: float, size: int, bold: bool = False) -> str:
    most = max(4, int(width / (size * (0.64 if bold else 0.58))))
    return text if len(text) <= most else text[: most - 1] + "…"


def draw_lines(
    series: list[Series], unit: str | None, x: float, y: float, w: float, h: float, start: float, end: float
) -> list[str]:
    out: list[str] = []
    legend_rows = min(len(series), max(1, int(h * 0.3 / 13)))
    legend_cols = 2 if w > 400 else 1
    legend_h = math.ceil(min(len(series), legend_rows * legend_cols) / legend_cols) * 13 + 4
    left, bottom = 52, 16
    px, py, pw, ph = x + left, y, w - left - 6, h - legend_h - bottom
    values = [v for s in series for _, v in s.points]
    low, high = min(0.0, min(values)), max(values)
    if high <= low:
        high = low + 1
    for i in range(5):
        gy = py + ph - ph * i / 4
        out.append(f'<line x1="{px:.1f}" y1="{gy:.1f}" x2="{px + pw:.1f}" y2="{gy:.1f}" stroke="{BORDER}"/>')
        out.append(
            _text(px - 4, gy + 4, fmt_value(low + (high - low) * i / 4, unit), size=9, fill=DIM, anchor="end")
        )
    minutes = (end - start) / 60
    for i in range(4):
        gx = px + pw * i / 3
        ago = minutes * (1 - i / 3)
        out.append(
            _text(gx, py + ph + 12, "now" if i == 3 else f"−{ago:.1f} min", size=9, fill=DIM, anchor="middle")
        )
    span = max(end - start, 1.0)
    for n, s in enumerate(series):
        colour = PALETTE[n % len(PALETTE)]
        coords = [
            (px + pw * min(max((t - start) / span, 0), 1), py + ph - ph * (v - low) / (high - low))
            for t, v in s.points
        ]
        if len(coords) == 1:
            cx, cy = coords[0]
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="{colour}"/>')
        else:
            path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    shown = series[: legend_rows * legend_cols]
    col_w = (w - 12) / legend_cols
    for n, s in enumerate(shown):
        lx = x + 6 + (n % legend_cols) * col_w
        ly = py + ph + bottom + 10 + (n // legend_cols) * 13
        colour = PALETTE[n % len(PALETTE)]
        out.append(f'<rect x="{lx:.1f}" y="{ly - 8:.1f}" width="10" height="3" fill="{colour}"/>')
        label = f"{s.label}  (last {fmt_value(s.last, unit)})"
        out.append(_text(lx + 14, ly, _clip(label, col_w - 20, 10), size=10))
    if len(series) > len(shown):
        out.append(
            _text(
                x + w - 6,
                y + h - 2,
                f"+{len(series) - len(shown)} more series",
                size=9,
                fill=DIM,
                anchor="end",
            )
        )
    return out


def draw_bars(series: list[Series], unit: str | None, x: float, y: float, w: float, h: float) -> list[str]:
    out: list[str] = []
    rows = sorted(series, key=lambda s: _natural(s.label))
    fit = max(1, int(h / 15))
    shown = rows[:fit] if len(rows) <= fit else rows[: fit - 1]
    high = max((abs(s.last) for s in rows), default=1.0) or 1.0
    label_w = min(w * 0.5, 300)
    for n, s in enumerate(shown):
        ry = y + n * 15
        bar = (w - label_w - 70) * abs(s.last) / high
        out.append(_text(x + label_w - 4, ry + 10, _clip(s.label, label_w - 8, 10), size=10, anchor="end"))
        colour = PALETTE[n % len(PALETTE)]
        out.append(
            f'<rect x="{x + label_w:.1f}" y="{ry + 2:.1f}" width="{bar:.1f}" height="10" fill="{colour}"/>'
        )
        out.append(_text(x + label_w + bar + 4, ry + 10, fmt_value(s.last, unit), size=10))
    if len(rows) > len(shown):
        out.append(
            _text(
                x + w - 6, y + h - 2, f"+{len(rows) - len(shown)} more rows", size=9, fill=DIM, anchor="end"
            )
        )
    return out


def draw_stat(series: list[Series], unit: str | None, x: float, y: float, w: float, h: float) -> list[str]:
    if len(series) == 1:
        return [
            _text(
                x + w / 2,
                y + h / 2 + 12,
                fmt_value(series[0].last, unit),
                size=30,
                fill=PALETTE[0],
                anchor="middle",
                bold=True,
            )
        ]
    return draw_bars(series, unit, x, y, w, h)


def _transform(panel: dict[str, Any], kind: str) -> dict[str, Any]:
    for step in panel.get("transformations") or []:
        if step.get("id") == kind:
            options: dict[str, Any] = step.get("options") or {}
            return options
    return {}


def _matrix(
    panel: dict[str, Any], series: list[Series]
) -> tuple[list[str], list[str], dict[tuple[str, str], float]]:
    """Rows, columns and cells of a table as the panel's transformations lay it out."""
    grouping = _transform(panel, "groupingToMatrix")
    organize = _transform(panel, "organize")
    rename: dict[str, str] = organize.get("renameByName") or {}
    exclude = {k for k, v in (organize.get("excludeByName") or {}).items() if v}
    cells: dict[tuple[str, str], float] = {}
    if grouping:
        row_field, column_field = grouping["rowField"], grouping["columnField"]
        for s in series:
            cells[(s.labels.get(row_field, ""), s.labels.get(column_field, ""))] = s.last
        order: dict[str, int] = organize.get("indexByName") or {}
        columns = sorted({c for _, c in cells}, key=lambda c: (order.get(c, 99), _natural(c)))
        rows = sorted({r for r, _ in cells}, key=_natural)
        header = rename.get(row_field, row_field)
        return [header, *rows], columns, cells
    keys = sorted({k for s in series for k in s.labels if k != "__name__" and k not in exclude})
    several = len({s.ref for s in series}) > 1
    columns = [rename.get(k, k) for k in keys]
    refs = sorted({s.ref for s in series})
    values = [
        rename.get(f"Value #{r}" if several else "Value", f"Value #{r}" if several else "Value") for r in refs
    ]
    rows: list[str] = []
    for s in series:
        row = " · ".join(s.labels.get(k, "") for k in keys)
        if row not in rows:
            rows.append(row)
        cells[(row, values[refs.index(s.ref)])] = s.last
    return [" · ".join(columns) or "series", *sorted(rows, key=_natural)], values, cells


def draw_table(
    panel: dict[str, Any], series: list[Series], unit: str | None, x: float, y: float, w: float, h: float
) -> list[str]:
    rows, columns, cells = _matrix(panel, series)
    header, body = rows[0], rows[1:]
    first = min(w * 0.3, 200.0)
    fits = max(1, int((w - first) / 74))
    shown_columns = columns[:fits]
    col_w = (w - first) / max(1, len(shown_columns))
    out = [_text(x, y + 11, _clip(header, first - 6, 10), size=10, fill=DIM, bold=True)]
    for n, column in enumerate(shown_columns):
        out.append(
            _text(
                x + first + (n + 1) * col_w - 6,
                y + 11,
                _clip(column, col_w - 6, 10),
                size=10,
                fill=DIM,
                anchor="end",
                bold=True,
            )
        )
    room = max(1, int((h - 18) / 15))
    for i, row in enumerate(body[:room]):
        ry = y + 18 + (i + 1) * 15 - 3
        out.append(
            f'<line x1="{x:.1f}" y1="{ry - 12:.1f}" x2="{x + w:.1f}" y2="{ry - 12:.1f}" stroke="{BORDER}"/>'
        )
        out.append(_text(x, ry, _clip(row, first - 6, 10), size=10))
        for n, column in enumerate(shown_columns):
            value = cells.get((row, column))
            text = (
                ""
                if value is None
                else fmt_value(
                    value, unit if len(columns) == 1 or _transform(panel, "groupingToMatrix") else None
                )
            )
            out.append(_text(x + first + (n + 1) * col_w - 6, ry, text, size=10, anchor="end"))
    dropped = []
    if len(body) > room:
        dropped.append(f"+{len(body) - room} more rows")
    if len(columns) > len(shown_columns):
        dropped.append(f"+{len(columns) - len(shown_columns)} more columns")
    if dropped:
        out.append(_text(x + w, y + h + 2, ", ".join(dropped), size=9, fill=DIM, anchor="end"))
    return out


def draw_stacked(
    panel: dict[str, Any], series: list[Series], unit: str | None, x: float, y: float, w: float, h: float
) -> list[str]:
    """A bar chart grouped to a matrix: one horizontal bar per row, stacked by column."""
    rows, columns, cells = _matrix(panel, series)
    body = rows[1:]
    legend_cols = max(1, int(w / 130))
    legend_h = math.ceil(len(columns) / legend_cols) * 12 + 4
    bar_h = max(4.0, min(14.0, (h - legend_h) / max(1, len(body)) - 2))
    label_w = 70.0
    totals = [sum(cells.get((r, c), 0.0) for c in columns) for r in body]
    high = max(totals, default=1.0) or 1.0
    out: list[str] = []
    for i, (row, total) in enumerate(zip(body, totals)):
        ry = y + i * (bar_h + 2)
        out.append(_text(x + label_w - 4, ry + bar_h - 2, _clip(row, label_w - 6, 9), size=9, anchor="end"))
        cx = x + label_w
        for n, column in enumerate(columns):
            width = (w - label_w - 60) * max(0.0, cells.get((row, column), 0.0)) / high
            colour = PALETTE[n % len(PALETTE)]
            out.append(
                f'<rect x="{cx:.1f}" y="{ry:.1f}" width="{width:.1f}" height="{bar_h:.1f}" fill="{colour}"/>'
            )
            cx += width
        out.append(_text(cx + 4, ry + bar_h - 2, fmt_value(total, unit), size=9))
    col_w = w / legend_cols
    for n, column in enumerate(columns):
        lx = x + (n % legend_cols) * col_w
        ly = y + h - legend_h + 10 + (n // legend_cols) * 12
        out.append(
            f'<rect x="{lx:.1f}" y="{ly - 8:.1f}" width="8" height="8" fill="{PALETTE[n % len(PALETTE)]}"/>'
        )
        out.append(_text(lx + 11, ly, _clip(column, col_w - 14, 9), size=9))
    return out


def draw_heatmap(
    series: list[Series], x: float, y: float, w: float, h: float, start: float, end: float
) -> list[str]:
    """Cumulative ``le`` buckets over time as Grafana's heatmap reads them: counts per bucket."""

    def bound(s: Series) -> float:
        return float(s.labels["le"])

    buckets = sorted(series, key=bound)
    times = sorted({t for s in buckets for t, _ in s.points})
    values = [dict(s.points) for s in buckets]
    left, bottom = 52, 16
    px, pw, ph = x + left, w - left - 6, h - bottom
    cell_w, cell_h = pw / max(1, len(times)), ph / max(1, len(buckets))
    counts: list[list[float]] = []
    for i in range(len(buckets)):
        below = values[i - 1] if i else {}
        counts.append([max(0.0, values[i].get(t, 0.0) - below.get(t, 0.0)) for t in times])
    high = max((c for row in counts for c in row), default=1.0) or 1.0
    out: list[str] = []
    for i, row in enumerate(counts):
        cy = y + ph - (i + 1) * cell_h
        for j, c in enumerate(row):
            if c <= 0:
                continue
            shade = 0.15 + 0.85 * c / high
            out.append(
                f'<rect x="{px + j * cell_w:.1f}" y="{cy:.1f}" width="{cell_w + 0.5:.1f}" '
                f'height="{cell_h + 0.5:.1f}" fill="#eab839" fill-opacity="{shade:.2f}"/>'
            )
        if i % max(1, len(buckets) // 6) == 0 or i == len(buckets) - 1:
            out.append(
                _text(
                    px - 4,
                    cy + cell_h / 2 + 3,
                    "≤ " + buckets[i].labels["le"],
                    size=9,
                    fill=DIM,
                    anchor="end",
                )
            )
    minutes = (end - start) / 60
    for i in range(4):
        gx = px + pw * i / 3
        ago = minutes * (1 - i / 3)
        out.append(
            _text(gx, y + ph + 12, "now" if i == 3 else f"−{ago:.1f} min", size=9, fill=DIM, anchor="middle")
        )
    return out


def draw_panel(panel: dict[str, Any], series: list[Series], start: float, end: float) -> str:
    grid = panel.get("gridPos") or {}
    x = MARGIN + UNIT_W * int(grid.get("x", 0))
    y = HEADER + UNIT_H * int(grid.get("y", 0))
    w = UNIT_W * int(grid.get("w", 24)) - 4
    h = UNIT_H * int(grid.get("h", 8)) - 4
    title = str(panel.get("title", ""))
    kind = panel.get("type", "")
    out = [f'<g class="panel" data-panel-title={quoteattr(title)} data-panel-type={quoteattr(kind)}>']
    if kind == "row":
        out.append(_text(x + 2, y + 20, title, size=14, bold=True))
        out.append("</g>")
        return "\n".join(out)
    out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="3" fill="{PANEL}" stroke="{BORDER}"/>')
    out.append(_text(x + 8, y + 16, _clip(title, w - 16, 12, bold=True), size=12, bold=True))
    unit = (panel.get("fieldConfig") or {}).get("defaults", {}).get("unit")
    ix, iy, iw, ih = x + 8, y + 26, w - 16, h - 32
    exprs = [t.get("expr", "") for t in panel.get("targets") or []]
    if kind == "text":
        out.append(
            _text(
                x + w / 2,
                y + h / 2,
                "A text panel: links into Jaeger (no query to draw)",
                fill=DIM,
                anchor="middle",
            )
        )
    elif not series:
        native = bool(exprs) and all(needs_distributions(e) for e in exprs if e)
        why = (
            ("No data: needs native histograms,", "which a scrape of the demo does not carry")
            if native
            else ("No data in this run",)
        )
        for n, line in enumerate(why):
            out.append(
                _text(x + w / 2, y + h / 2 + 14 * n, _clip(line, w - 16, 11), fill=DIM, anchor="middle")
            )
    elif kind == "stat":
        out.extend(draw_stat(series, unit, ix, iy, iw, ih))
    elif kind == "table":
        out.extend(draw_table(panel, series, unit, ix, iy, iw, ih))
    elif kind == "barchart" and _transform(panel, "groupingToMatrix"):
        out.extend(draw_stacked(panel, series, unit, ix, iy, iw, ih))
    elif kind in ("bargauge", "barchart"):
        out.extend(draw_bars(series, unit, ix, iy, iw, ih))
    elif kind == "heatmap" and all("le" in s.labels for s in series):
        out.extend(draw_heatmap(series, ix, iy, iw, ih, start, end))
    else:
        out.extend(draw_lines(series, unit, ix, iy, iw, ih, start, end))
    out.append("</g>")
    return "\n".join(out)


def draw(
    model: dict[str, Any], drawn: list[tuple[dict[str, Any], list[Series]]], start: float, end: float
) -> str:
    bottom = max(
        (
            int((p.get("gridPos") or {}).get("y", 0)) + int((p.get("gridPos") or {}).get("h", 8))
            for p, _ in drawn
        ),
        default=0,
    )
    height = HEADER + UNIT_H * bottom + FOOTER
    minutes = (end - start) / 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        f"<title>{escape(str(model.get('title', '')))}</title>",
        f'<rect width="{WIDTH}" height="{height}" fill="{BACKGROUND}"/>',
        _text(MARGIN, 22, str(model.get("title", "")), size=16, bold=True),
        _text(
            MARGIN,
            39,
            f"{minutes:.1f} minutes of `otel-ctx demo --forever --rate {RATE} --seed {SEED}`; "
            "variables set to All; panels laid out on the dashboard's grid",
            size=10,
            fill=DIM,
        ),
    ]
    parts.extend(draw_panel(panel, series, start, end) for panel, series in drawn)
    parts.append(
        f'<text class="caption" x="{MARGIN}" y="{height - 14}" font-size="12" fill="{TEXT}">'
        f"{escape(CAPTION)}</text>"
    )
    parts.append("</svg>\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=150.0, help="seconds of demo data to draw (default 150)"
    )
    parser.add_argument("--save", type=Path, help="also write the query results to this JSON file")
    parser.add_argument("--redraw", type=Path, help="draw from results --save wrote, without Prometheus")
    args = parser.parse_args(argv)
    PICTURES.mkdir(parents=True, exist_ok=True)
    if args.redraw:
        saved = json.loads(args.redraw.read_text(encoding="utf-8"))
        results = {k: [Series(**s) for s in v] for k, v in saved["series"].items()}
        start, end = saved["start"], saved["end"]
    else:
        with run_demo(args.seconds) as (prom, start, end):
            results = {
                f"{path.name}#{n}": panel_series(prom, p, start, end, INTERVAL)
                for path in DASHBOARDS
                for n, p in enumerate(panels(json.loads(path.read_text(encoding="utf-8"))))
            }
        if args.save:
            series = {k: [asdict(s) for s in v] for k, v in results.items()}
            args.save.write_text(json.dumps({"start": start, "end": end, "series": series}), encoding="utf-8")
    for path in DASHBOARDS:
        model = json.loads(path.read_text(encoding="utf-8"))
        drawn = [(p, results.get(f"{path.name}#{n}", [])) for n, p in enumerate(panels(model))]
        out = PICTURES / f"dashboard-{model['uid']}.svg"
        out.write_text(draw(model, drawn, start, end), encoding="utf-8")
        empty = sum(1 for p, s in drawn if p.get("targets") and not s)
        print(f"wrote {out.relative_to(ROOT)}: {len(drawn)} panels, {empty} without data", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
