"""Streams handed back to the agent: the SDK's own object behind a transparent proxy.

The proxy passes every chunk through as it arrives (nothing is buffered), answers
``isinstance`` as the SDK's stream class, works as a (async) context manager, and
watches each chunk only for the provider's usage. When the stream ends, is closed or
fails, the round is finished once; a stream the agent stops reading and never closes
finishes it when it is garbage-collected (or at exit), with the usage it saw.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

import wrapt

from otel_ctx._pricing import Usage
from otel_ctx.instrumentation._core import Round
from otel_ctx.telemetry._emitter import log_failure

#: Reads one chunk; returns the usage it carries (merged with what earlier chunks said) or None.
Watcher = Callable[[Any, Usage | None], Usage | None]


class Watch:
    """The usage a round's answer reported so far; shared by a raw response and the stream it parses to."""

    __slots__ = ("round", "usage", "watcher")

    def __init__(self, round_: Round, watcher: Watcher) -> None:
        self.round = round_
        self.watcher = watcher
        self.usage: Usage | None = None

    def see(self, chunk: Any) -> None:
        try:
            found = self.watcher(chunk, self.usage)
            if found is not None:
                self.usage = found
        except Exception as exc:
            log_failure("reading a stream chunk's usage", exc)
        self.round.see(chunk)

    def done(self, error: BaseException | None = None) -> None:
        self.round.finish(self.usage, error)


class Watched(wrapt.ObjectProxy[Any]):
    """An SDK object the round waits on; garbage-collected, it ends the round with what it saw."""

    def __init__(self, wrapped: Any, watch: Watch) -> None:
        super().__init__(wrapped)
        self._self_watch = watch
        # Not the proxy itself (it would never be collected): the watch, which ends the round.
        weakref.finalize(self, watch.done)


class Closes(Watched):
    """A watched object of a sync client: closing it ends the round."""

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_watch.done()


class AsyncCloses(Watched):
    """A watched object of an async client: closing it ends the round."""

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_watch.done()


class StreamProxy(Closes):
    """A synchronous SDK stream (``openai.Stream``, ``anthropic.Stream``), watched."""

    def __iter__(self) -> StreamProxy:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self.__wrapped__)
        except StopIteration:
            self._self_watch.done()
            raise
        except BaseException as exc:
            self._self_watch.done(exc)
            raise
        self._self_watch.see(chunk)
        return chunk

    def __enter__(self) -> StreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_watch.done()


class AsyncStreamProxy(AsyncCloses):
    """An asynchronous SDK stream (``openai.AsyncStream``, ``anthropic.AsyncStream``), watched."""

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_watch.done()
            raise
        except BaseException as exc:
            self._self_watch.done(exc)
            raise
        self._self_watch.see(chunk)
        return chunk

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_watch.done()
