"""``python -m otel_ctx.cli``: the same as the ``otel-ctx`` console script."""

from otel_ctx.cli import main

main()
