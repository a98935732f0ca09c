"""Dialect adapters: each provider's request format read into the engine's model and back.

One module per dialect, each defining ``ADAPTER`` and importing no other dialect
(code they share lives in :mod:`otel_ctx.adapters._base` and small helper modules).
Which adapter reads a request (by provider name, or detected from the body) is
decided a layer above, in :mod:`otel_ctx._dialects`, which imports a dialect only
when its first request arrives, so its optional dependency (``langchain-core``)
loads only then.
"""

from otel_ctx.adapters._base import Adapter, Fitted, ReadContext, Reading

__all__ = ["Adapter", "Fitted", "ReadContext", "Reading"]
