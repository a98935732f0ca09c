"""What the dashboards and the alert rules agree on, defined once.

The dashboards' uids (alerts link to them), where Grafana and Jaeger are by default (the
compose stack's addresses), the overflow shares at which a task type turns orange and red
(the alert fires at the red one), the tool-result cap a dashboard starts from and the outcome
colours every panel uses.
"""

from __future__ import annotations

from otel_ctx import names

OVERVIEW_UID = "otel-ctx-overview"
TASK_TYPE_UID = "otel-ctx-task-type"
COST_UID = "otel-ctx-cost"

DEFAULT_GRAFANA_URL = "http://127.0.0.1:3000"
DEFAULT_JAEGER_URL = "http://127.0.0.1:16686"

#: Overflow share of fits above which a task type turns red: the overflow alert's default
#: threshold (it turns orange at a fifth of the alert's threshold, :attr:`AlertSettings.overflow_warn`).
OVERFLOW_BAD = 0.05

#: The task-type dashboard's tool-result cap until a viewer types their policy's: the dashboards
#: know no policy, so they start from a common cap (the demo desk's) that a reader changes in place.
TOOL_RESULT_CAP = 1_200

OUTCOME_COLORS = {
    names.OUTCOME_FIT: "green",
    names.OUTCOME_COMPACTED: "orange",
    names.OUTCOME_OVERFLOW: "red",
}
