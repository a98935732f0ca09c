"""LangChain tool objects as the Chat Completions tool definitions a chat model sends.

Shared by the Chat Completions dialect (``fit(messages, tools=[@tool functions])``)
and the LangChain dialect, which must not import each other. ``langchain-core`` is
imported only when a LangChain tool arrives; plain dicts never load it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from otel_ctx.engine._errors import InvalidToolSchemaError


def is_langchain_tool(tool: Any) -> bool:
    """A ``@tool``/``BaseTool``, a pydantic model class or a function: LangChain describes it."""
    if isinstance(tool, type) or inspect.isfunction(tool):
        return True
    return any(c.__module__.startswith("langchain_core.") for c in type(tool).__mro__)


def tool_dicts(tools: Any) -> Any:
    """Tool definitions as Chat Completions dicts; LangChain tools through its own helper."""
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        return tools  # the counter names the problem
    if all(t.__class__ is dict for t in tools):
        return tools
    from langchain_core.utils.function_calling import convert_to_openai_tool

    out = []
    for k, t in enumerate(tools):
        if isinstance(t, Mapping):
            out.append(t)
            continue
        try:
            out.append(convert_to_openai_tool(t))
        except Exception as exc:  # LangChain's helper raises many kinds; the caller gets one
            raise InvalidToolSchemaError(
                f"tools[{k}]", f"LangChain cannot describe this {type(t).__name__} as a tool: {exc}"
            ) from exc
    return out
