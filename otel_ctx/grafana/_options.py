"""The grafana-foundation-sdk option values the dashboards use, built by value.

The SDK's option enums derive from ``enum.StrEnum`` (Python 3.11). Under the project's
mypy floor (``python_version = "3.10"``) that base is unknown and ``Enum.MEMBER`` reads
as a plain ``str``; calling the enum with its value reads as the enum under both, so
the generator type-checks whichever version mypy assumes.
"""

from __future__ import annotations

from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import prometheus as prom_m
from grafana_foundation_sdk.models import text as text_m

BARGAUGE_GRADIENT = common_m.BarGaugeDisplayMode("gradient")
COLOR_BACKGROUND = common_m.BigValueColorMode("background")
COLOR_VALUE = common_m.BigValueColorMode("value")
GRAPH_NONE = common_m.BigValueGraphMode("none")
TEXT_VALUE_AND_NAME = common_m.BigValueTextMode("value_and_name")
DRAW_BARS = common_m.GraphDrawStyle("bars")
THRESHOLDS_DASHED = common_m.GraphThresholdsStyleMode("dashed")
LEGEND_TABLE = common_m.LegendDisplayMode("table")
LEGEND_BOTTOM = common_m.LegendPlacement("bottom")
STACK_NORMAL = common_m.StackingMode("normal")
SHOW_AUTO = common_m.VisibilityMode("auto")
HORIZONTAL = common_m.VizOrientation("horizontal")
CROSSHAIR = dash_m.DashboardCursorSync(1)
LINK_DASHBOARDS = dash_m.DashboardLinkType("dashboards")
LINK_URL = dash_m.DashboardLinkType("link")
COLOR_BY_THRESHOLDS = dash_m.FieldColorModeId("thresholds")
THRESHOLDS_ABSOLUTE = dash_m.ThresholdsMode("absolute")
REFRESH_ON_TIME_RANGE = dash_m.VariableRefresh(2)
SORT_ALPHABETICAL = dash_m.VariableSort(1)
FORMAT_HEATMAP = prom_m.PromQueryFormat("heatmap")
FORMAT_TABLE = prom_m.PromQueryFormat("table")
MARKDOWN = text_m.TextMode("markdown")
TOOLTIP_ALL = common_m.TooltipDisplayMode("multi")
SORT_DESC = common_m.SortOrder("desc")
