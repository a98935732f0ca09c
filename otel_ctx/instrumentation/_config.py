"""What the instrumentor needs to budget a request nobody configured, from code or environment.

Every setting has an environment variable so ``opentelemetry-instrument python agent.py``
works with no code at all; ``otel_ctx.instrument(**config)`` overrides them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from otel_ctx._models import ModelTable, default_models
from otel_ctx._tables import read_config_bytes
from otel_ctx.engine import BudgetPolicy, InvalidPolicyError

ENV_TASK_TYPE = "OTEL_CTX_TASK_TYPE"
ENV_POLICIES = "OTEL_CTX_POLICIES"
ENV_RESERVED_OUTPUT = "OTEL_CTX_RESERVED_OUTPUT"
ENV_CONTEXT_WINDOW = "OTEL_CTX_CONTEXT_WINDOW"
ENV_MAX_CONVERSATIONS = "OTEL_CTX_MAX_CONVERSATIONS"
ENV_LANGCHAIN = "OTEL_CTX_LANGCHAIN"

DEFAULT_TASK_TYPE = "default"
#: Room kept for the answer when the request names no output limit.
DEFAULT_RESERVED_OUTPUT = 4096
#: Window assumed for a model the table does not know (the most common current size).
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_CONVERSATIONS = 10_000


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """A budget with gaps: what is not given comes from the model table and the request."""

    context_length: int | None = None
    reserved_output: int | None = None
    safety_margin: int | None = None
    request_limit: int | None = None
    tool_result_cap: int | None = None

    @classmethod
    def from_mapping(cls, task: str, raw: Mapping[str, Any]) -> TaskPolicy:
        unknown = set(raw) - {f.name for f in fields(cls)}
        if unknown:
            raise InvalidPolicyError(f"policies[{task!r}]", f"unknown fields {sorted(unknown)}")
        for key, value in raw.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidPolicyError(
                    f"policies[{task!r}].{key}", f"must be an integer >= 0, got {value!r}"
                )
        return cls(**dict(raw))


PolicyLike = BudgetPolicy | TaskPolicy | Mapping[str, Any]


def _check_room(task: str, given: TaskPolicy, default_reserve: int) -> None:
    """Refuse, when loaded, a task policy whose limit leaves no room after the reserve.

    Otherwise every call of that task type would fail to get a budget, and be dropped
    unobserved, from the first one on. The window a policy does not name comes from the
    model table per call; a ``context_length`` or ``request_limit`` it names is known now,
    and so is the reserve: its own ``reserved_output``, else the instrumentation's default.
    """
    named = [
        (k, v)
        for k, v in (("context_length", given.context_length), ("request_limit", given.request_limit))
        if v
    ]
    if not named:
        return
    field, limit = min(named, key=lambda kv: kv[1])
    own = given.reserved_output is not None
    reserve = given.reserved_output if given.reserved_output is not None else default_reserve
    margin = given.safety_margin or 0
    budget = limit - reserve - margin
    if budget > 0:
        return
    reserve_text = f"reserved_output={reserve}" if own else f"the default reserved_output={reserve}"
    fix = "lower its reserved_output" if own else "give it a reserved_output"
    raise InvalidPolicyError(
        f"policies[{task!r}]",
        f"{field}={limit} - {reserve_text} - safety_margin={margin} = {budget}: "
        f"task type {task!r} leaves no budget for the prompt; {fix} below {limit - margin} "
        f"or raise {field}",
    )


def _policies(raw: Mapping[str, PolicyLike] | None) -> dict[str, BudgetPolicy | TaskPolicy]:
    out: dict[str, BudgetPolicy | TaskPolicy] = {}
    for task, policy in (raw or {}).items():
        if isinstance(policy, (BudgetPolicy, TaskPolicy)):
            out[str(task)] = policy
        elif isinstance(policy, Mapping):
            out[str(task)] = TaskPolicy.from_mapping(str(task), policy)
        else:
            raise InvalidPolicyError(
                f"policies[{task!r}]", f"must be a BudgetPolicy or a mapping, got {policy!r}"
            )
    return out


def _one_line(exc: BaseException) -> str:
    """A parser's complaint, on one line and bounded (it may quote the file)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"


def load_policies(path: str | Path) -> dict[str, BudgetPolicy | TaskPolicy]:
    """A policy file: ``{task_type: {reserved_output, safety_margin, request_limit, ...}}``.

    JSON, or TOML (one table per task type) on Python 3.11+ when the name ends in ``.toml``.
    """
    target = Path(path)
    raw = read_config_bytes(target, "policy file")
    try:
        text = raw.decode("utf-8")
        if target.suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib

                data: Any = tomllib.loads(text)
            else:
                raise InvalidPolicyError(str(target), "TOML policy files need Python 3.11+; use JSON")
        else:
            data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError too
        raise InvalidPolicyError(str(target), f"cannot parse the policy file: {_one_line(exc)}") from None
    if not isinstance(data, Mapping):
        raise InvalidPolicyError(str(target), "a policy file must map task types to policies")
    return _policies(data)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidPolicyError(name, f"must be an integer, got {raw!r}") from None
    if value <= 0:
        raise InvalidPolicyError(name, f"must be positive, got {value}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    return default if not raw else raw in ("1", "true", "yes", "on")


@dataclass
class Config:
    """Resolved settings of one instrumentation."""

    policies: dict[str, BudgetPolicy | TaskPolicy] = field(default_factory=dict)
    default_task_type: str = DEFAULT_TASK_TYPE
    reserved_output: int = DEFAULT_RESERVED_OUTPUT
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    models: ModelTable = field(default_factory=default_models)
    langchain: bool = True
    _cache: dict[tuple[str, str, int | None], BudgetPolicy] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _task_types: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_env(
        cls,
        *,
        policies: Mapping[str, PolicyLike] | None = None,
        default_task_type: str | None = None,
        reserved_output: int | None = None,
        context_window: int | None = None,
        max_conversations: int | None = None,
        models: ModelTable | Mapping[str, Any] | None = None,
        langchain: bool | None = None,
    ) -> Config:
        """Settings given in code win; the environment fills the rest; then the defaults."""
        if policies is None:
            path = os.environ.get(ENV_POLICIES, "").strip()
            resolved = load_policies(path) if path else {}
        else:
            resolved = _policies(policies)
        table = default_models()
        if isinstance(models, ModelTable):
            table = table.merged(models)
        elif models is not None:
            table = table.merged(ModelTable.from_dict(models, source="instrument(models=...)"))
        return cls(
            policies=resolved,
            default_task_type=default_task_type
            or os.environ.get(ENV_TASK_TYPE, "").strip()
            or DEFAULT_TASK_TYPE,
            reserved_output=reserved_output or _env_int(ENV_RESERVED_OUTPUT, DEFAULT_RESERVED_OUTPUT),
            context_window=context_window or _env_int(ENV_CONTEXT_WINDOW, DEFAULT_CONTEXT_WINDOW),
            max_conversations=max_conversations or _env_int(ENV_MAX_CONVERSATIONS, DEFAULT_MAX_CONVERSATIONS),
            models=table,
            langchain=_env_bool(ENV_LANGCHAIN, True) if langchain is None else langchain,
        )

    def __post_init__(self) -> None:
        for task, given in self.policies.items():
            if isinstance(given, TaskPolicy):
                _check_room(task, given, self.reserved_output)
        # Read by every observed call's records: made once, like the resolved budgets below
        # (the settings of an instrumentation do not change while it runs).
        self._task_types = tuple(t for t in self.policies if t != DEFAULT_TASK_TYPE)

    @property
    def task_types(self) -> tuple[str, ...]:
        """Task types with a policy of their own: the metric labels are bounded to these."""
        return self._task_types

    def policy(self, task_type: str, model: str, requested_output: int | None) -> BudgetPolicy:
        """The budget of one request: the task's policy, the model's window, the request's output limit.

        A complete :class:`BudgetPolicy` given for the task is used as it is. Otherwise the
        window is the task's ``context_length``, else the model table's, else the default;
        the reserved output is the request's own limit (``max_tokens`` and kin: what the
        provider holds back), else the task's, else the default capped to the model's limit.
        """
        key = (task_type, model, requested_output)
        found = self._cache.get(key)
        if found is not None:
            return found
        given = self.policies.get(task_type) or self.policies.get(DEFAULT_TASK_TYPE) or TaskPolicy()
        if isinstance(given, BudgetPolicy):
            policy = given
        else:
            limits = self.models.limits_for(model)
            window = given.context_length or (limits.context_window if limits else self.context_window)
            if requested_output is not None:
                reserved = requested_output
            elif given.reserved_output is not None:
                reserved = given.reserved_output
            else:
                cap = limits.max_output if limits is not None and limits.max_output else self.reserved_output
                reserved = min(self.reserved_output, cap)
            policy = BudgetPolicy(
                context_length=window,
                reserved_output=reserved,
                safety_margin=given.safety_margin or 0,
                request_limit=given.request_limit or None,
                tool_result_cap=given.tool_result_cap or None,
            )
        with self._lock:
            if len(self._cache) >= 4096:  # model names and output limits are open-ended
                self._cache.clear()
            self._cache[key] = policy
        return policy
