"""The names registry: GenAI names equal the semantic conventions, project names are well-formed."""

from __future__ import annotations

import re

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv
from opentelemetry.semconv.attributes import error_attributes, exception_attributes

from otel_ctx import names

GEN_AI = [
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_INPUT_MESSAGES",
]


@pytest.mark.parametrize("constant", GEN_AI)
def test_gen_ai_names_are_the_semantic_conventions(constant: str) -> None:
    assert getattr(names, constant) == getattr(semconv, constant)


#: General OpenTelemetry conventions the registry uses (exceptions on spans).
GENERAL = {
    "EXCEPTION_TYPE": exception_attributes.EXCEPTION_TYPE,
    "EXCEPTION_MESSAGE": exception_attributes.EXCEPTION_MESSAGE,
    "EXCEPTION_STACKTRACE": exception_attributes.EXCEPTION_STACKTRACE,
    "ERROR_TYPE": error_attributes.ERROR_TYPE,
}


@pytest.mark.parametrize(("constant", "value"), GENERAL.items())
def test_general_names_are_the_semantic_conventions(constant: str, value: str) -> None:
    assert getattr(names, constant) == value


def test_every_gen_ai_name_is_one_the_conventions_define() -> None:
    """A name coined in the ``gen_ai.`` namespace would clash with a future convention."""
    defined = {v for k, v in vars(semconv).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    ours = {
        k: v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and v.startswith("gen_ai.")
    }
    assert ours, "no GenAI names found"
    assert {k: v for k, v in ours.items() if v not in defined | names.OTHER_GEN_AI_CONVENTIONS} == {}


def test_project_names_live_under_context_budget() -> None:
    own = [
        v
        for k, v in vars(names).items()
        if k.isupper()
        and isinstance(v, str)
        and "." in v
        and not v.startswith("gen_ai.")
        and v not in GENERAL.values()
    ]
    assert own, "no project names found"
    for value in own:
        assert value.startswith("context_budget.") or value == names.ENV_CAPTURE_CONTENT, value


def test_metric_names_translate_to_prometheus_once_each() -> None:
    series = [m.prometheus for m in names.METRICS]
    assert len(set(series)) == len(series)
    for metric in names.METRICS:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", metric.prometheus), metric.prometheus
        assert metric.name.startswith("context_budget.")
        if metric.kind == "counter":
            assert metric.prometheus.endswith("_total")
        else:
            assert metric.buckets == tuple(sorted(metric.buckets))
            assert metric.series("_bucket") == metric.prometheus + "_bucket"
    with pytest.raises(ValueError, match="only histograms"):
        names.FITS.series("_bucket")


def test_every_component_and_fit_attribute_is_documented() -> None:
    for attr in names.FIT_SPAN_ATTRIBUTES:
        assert attr in names.ATTRIBUTE_DOCS, attr
    assert set(names.SUMMED_COMPONENTS) <= set(names.COMPONENTS)
    assert len(set(names.COMPONENTS)) == len(names.COMPONENTS)
