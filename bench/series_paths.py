"""Series one agent process puts into Prometheus on each metrics path, at 3 task types × 3 models.

* the scrape path: the SDK's Prometheus endpoint (``exporter="prometheus"``), classic
  histograms (a series per bucket) and the per-round counter, counted from a real scrape;
* the native path: OTLP with exponential histograms (``native_histograms=True``) through the
  Collector's remote write, where each histogram point is one native-histogram series and the
  per-round line distributions replace the per-round counter; counted as OTLP points (one
  series each), which ``tests/e2e/test_native.py`` checks against the real Prometheus TSDB.

``python -m bench.series_paths --otlp URL --service NAME`` pushes the same spread to a
Collector (what the end-to-end test counts in Prometheus).
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from collections.abc import Iterable

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from bench import spread
from bench.report import Figure
from otel_ctx.telemetry import Emitter, ExportSettings, create_providers, views

SECTION = "Telemetry for a fleet: series per process at full spread"
TARGET = 1_500
#: Three models: the spread the series budget is stated for (3 task types × 3 models).
MODELS: tuple[str, ...] = ("gpt-4o", "gpt-4o-mini", "gpt-4.1")


def native_points(models: Iterable[str] = MODELS) -> dict[str, int]:
    """OTLP points per metric at the full spread with native histograms on (one series each)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=views(native=True))
    try:
        spread.record_full_spread(
            Emitter(meter_provider=provider, distributions=True), spread.outcomes(), tuple(models)
        )
        counts: dict[str, int] = {}
        data = reader.get_metrics_data()
        assert data is not None
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    counts[metric.name] = counts.get(metric.name, 0) + len(metric.data.data_points)
        return counts
    finally:
        provider.shutdown()


def scraped_series(models: Iterable[str] = MODELS) -> dict[str, int]:
    """Series per family on a real scrape of the SDK's Prometheus endpoint at the full spread."""
    handle = create_providers(ExportSettings("prometheus", prometheus_port=0, prometheus_host="127.0.0.1"))
    try:
        spread.record_full_spread(
            Emitter(meter_provider=handle.meter_provider), spread.outcomes(), tuple(models)
        )
        assert handle.prometheus_address is not None
        host, port = handle.prometheus_address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as response:
            return spread.exposition_series(response.read().decode())
    finally:
        handle.shutdown()


def figures() -> list[Figure]:
    def detail(counts: dict[str, int]) -> str:
        return ", ".join(f"{family} {n}" for family, n in sorted(counts.items(), key=lambda kv: -kv[1]))

    native, scraped = native_points(), scraped_series()
    native_total, scraped_total = sum(native.values()), sum(scraped.values())
    spread_text = f"3 task types × {len(MODELS)} models × 3 outcomes × every round label"
    return [
        Figure(
            SECTION,
            "series per process at 3 × 3, native histograms (OTLP → Collector remote write)",
            f"{native_total:,}",
            f"≤ {TARGET:,}",
            native_total <= TARGET,
            f"{spread_text}, a native histogram counted as one series: {detail(native)}; plus target_info",
        ),
        Figure(
            SECTION,
            "series per process at 3 × 3, SDK scrape endpoint (classic buckets, per-round counter)",
            f"{scraped_total:,}",
            f"≤ {TARGET:,}",
            scraped_total <= TARGET,
            f"{spread_text}, from a real scrape: {detail(scraped)}; plus target_info",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--otlp", required=True, help="OTLP/gRPC endpoint (a Collector)")
    parser.add_argument("--service", required=True)
    args = parser.parse_args(argv)
    handle = create_providers(
        ExportSettings("otlp", endpoint=args.otlp, service_name=args.service, native_histograms=True),
        traces=False,
    )
    try:
        emitter = Emitter(meter_provider=handle.meter_provider, distributions=handle.distributions)
        spread.record_full_spread(emitter, spread.outcomes(), MODELS)
        return 0 if handle.force_flush(30_000) else 1
    finally:
        handle.shutdown()


if __name__ == "__main__":
    sys.exit(main())
