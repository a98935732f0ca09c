"""Bounded metric labels: the model label cannot be driven to thousands of series."""

from __future__ import annotations

import logging

import pytest
from conversations import long_dispute
from telemetry_capture import Capture, attrs_of

from otel_ctx import ContextFitter
from otel_ctx import _encodings as encodings
from otel_ctx import names as n
from otel_ctx.demo import SUPPORT_DESK
from otel_ctx.telemetry import LabelPolicy
from otel_ctx.telemetry import _labels as labels
from otel_ctx.telemetry import _recorder as recorder
from otel_ctx.telemetry._labels import DEFAULT_MAX_MODELS


@pytest.fixture
def warned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labels, "_other_model_warned", False)


def models_on_metrics(cap: Capture) -> dict[str, set[str]]:
    return {
        name: {str(attrs_of(p)[n.GEN_AI_REQUEST_MODEL]) for p in cap.points(name)}
        for name in (m.name for m in n.METRICS if n.GEN_AI_REQUEST_MODEL in m.attributes)
        if cap.points(name)
    }


@pytest.mark.usefixtures("warned_once")
def test_thousands_of_model_names_stay_a_bounded_label(caplog: pytest.LogCaptureFixture) -> None:
    cap = Capture()
    result = ContextFitter(SUPPORT_DESK).fit(long_dispute(6), task_type="status")
    table = {"gpt-4o", "gpt-4", "o3"}  # names of the model table take no slot of their own
    with caplog.at_level(logging.DEBUG, logger="otel_ctx.telemetry"):
        for i in range(1_000):
            cap.emitter.record_metrics(result, 1, f"tenant-{i}-model")
            cap.emitter.record_accuracy(1.0, task_type="status", model=f"tenant-{i}-model")
        for model in table:
            cap.emitter.record_metrics(result, 1, model)
    seen = models_on_metrics(cap)
    # Every per-fit metric that carries the model (the per-run ones are recorded when a run ends).
    per_run = {n.CEILING_STOPS.name, n.RUN_TOKENS.name, n.RUN_COST.name, n.RUN_CEILING_UTILIZATION.name}
    with_model = {m.name for m in n.METRICS if n.GEN_AI_REQUEST_MODEL in m.attributes}
    assert set(seen) == with_model - per_run
    first = {f"tenant-{i}-model" for i in range(DEFAULT_MAX_MODELS)}
    # The shipped table is no licence past the bound: the label's worst case is known up front.
    assert seen[n.TOKENS.name] == first | {n.OTHER_MODEL}
    assert seen[n.ESTIMATE_ACCURACY.name] == first | {n.OTHER_MODEL}
    for values in seen.values():
        assert len(values) <= DEFAULT_MAX_MODELS + 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "model" in r.getMessage()]
    assert len(warnings) == 1 and f"tenant-{DEFAULT_MAX_MODELS}-model" in warnings[0].getMessage()
    assert len(cap.emitter.labels._seen_models) == DEFAULT_MAX_MODELS
    cap.close()


@pytest.mark.usefixtures("warned_once")
def test_configured_models_and_known_families_keep_their_names() -> None:
    policy = LabelPolicy(models=["my-llm"], max_models=2)
    assert policy.model_label("my-llm") == "my-llm"
    # With models configured, a stranger is `other`; the table's names and a known family's
    # variants share the slots.
    assert policy.model_label("someone-elses-llm") == n.OTHER_MODEL
    assert [policy.model_label(m) for m in ("gpt-4", "gpt-4o-mini", "gpt-4.1-mini", "gpt-4")] == [
        "gpt-4",
        "gpt-4o-mini",
        n.OTHER_MODEL,
        "gpt-4",
    ]
    assert policy.model_label("my-llm") == "my-llm"  # configured: always
    assert encodings.is_known_model("o3-mini")


def test_the_model_bound_is_validated() -> None:
    with pytest.raises(ValueError, match="max_models"):
        LabelPolicy(max_models=-1)
    assert LabelPolicy(max_models=0).model_label("local-llm") == n.OTHER_MODEL


def test_spans_keep_the_model_as_given() -> None:
    cap = Capture(labels=LabelPolicy(max_models=0))
    fitter = ContextFitter(SUPPORT_DESK, model="local-llm-7b")
    rec = recorder.start(cap.emitter)
    rec.result(fitter.fit(long_dispute(4), task_type="status"))
    rec.end()
    (span,) = cap.spans(n.SPAN_FIT)
    assert span.attributes is not None and span.attributes[n.MODEL] == "local-llm-7b"
    assert models_on_metrics(cap)[n.FITS.name] == {n.OTHER_MODEL}
    cap.close()


@pytest.mark.usefixtures("warned_once")
def test_run_metrics_bound_the_model_label_too() -> None:
    from otel_ctx.telemetry import run

    cap = Capture(labels=LabelPolicy(max_models=2))
    fitter = ContextFitter(SUPPORT_DESK)
    for i in range(6):
        with run(fitter, task_type="status", model=f"tenant-{i}-model", emitter=cap.emitter) as r:
            r.fit(long_dispute(4))
    run_metrics = [m.name for m in n.METRICS if n.GEN_AI_REQUEST_MODEL in m.attributes]
    seen = {name: values for name, values in models_on_metrics(cap).items() if name in run_metrics}
    assert seen and n.FITS.name in seen
    # The per-run histograms carry no model at all (the series budget): nothing to bound there.
    for metric in (n.RUN_TOKENS, n.RUN_COST, n.RUN_CEILING_UTILIZATION, n.CEILING_STOPS):
        assert n.GEN_AI_REQUEST_MODEL not in metric.attributes
        assert all(n.GEN_AI_REQUEST_MODEL not in attrs_of(p) for p in cap.points(metric.name))
    for values in seen.values():
        assert values <= {"tenant-0-model", "tenant-1-model", n.OTHER_MODEL}, values
    cap.close()
