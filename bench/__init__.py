"""otel-ctx benchmarks: every performance figure the project promises, as ratios measured in one run.

Run with ``make bench`` (``python -m bench``). Absolute times depend on the machine; each
figure is a ratio of two medians from interleaved trials in the same process, so both
sides see the same CPU, the same noise and the same caches.
"""
