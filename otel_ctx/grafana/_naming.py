"""The dashboards and rules for a Prometheus that keeps OpenTelemetry's names (UTF-8 names).

Prometheus 3's OTLP receiver names what it stores one of two ways: dots to underscores
(``translation_strategy: UnderscoreEscapingWithSuffixes``, its default, and what every other
path into Prometheus does: the Collector's exporters, the SDK's scrape endpoint), or the names
kept as OpenTelemetry spells them (``NoUTF8EscapingWithSuffixes``: ``context_budget.fits_total``
with the label ``gen_ai.request.model``), which PromQL must then quote:
``{"context_budget.fits_total", "gen_ai.request.model"=~"gpt-4o"}``, ``sum by ("gen_ai.request.model")``.

The generators write the underscore names; this module turns a generated dashboard or rule
file into the UTF-8 one. It is one translation, not a second spelling of each query: every
name it rewrites is one the registry (:mod:`otel_ctx.names`) defines, found by reading the
PromQL token by token, so a label value, a string, a function or a recording rule's name that
looks like one is never touched. A registry name in a place it does not know how to rewrite
raises :class:`NamingError` rather than pass through unquoted, and after rewriting nothing of
the underscore spelling may be left anywhere in the output (:func:`leftovers`).

The recording rules keep their names (``job:context_budget_fits_total:rate2m``): they are
otel-ctx's own, valid under both settings, so a change of setting renames no recorded series;
they keep the labels of what they record, which are the UTF-8 ones.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from otel_ctx import names

UNDERSCORE = names.NAMES_UNDERSCORE
UTF8 = names.NAMES_UTF8
NAMINGS = names.NAMINGS


class NamingError(ValueError):
    """A registry name where the rewriter cannot tell how to spell it under UTF-8 names."""


def suffixes(metric: names.Metric) -> tuple[str, ...]:
    """The series a metric becomes: a histogram's ``_bucket``, ``_sum`` and ``_count`` besides its own."""
    return ("", "_bucket", "_sum", "_count") if metric.kind == "histogram" else ("",)


#: Underscore series name -> its UTF-8 name, for every series the registry's metrics become.
SERIES: dict[str, str] = {
    metric.series(suffix): metric.utf8_series(suffix)
    for metric in names.ALL_METRICS
    for suffix in suffixes(metric)
}
#: Underscore label -> the attribute it translates, for every metric attribute.
LABELS: dict[str, str] = {
    names.prometheus_label(attribute): attribute
    for metric in names.ALL_METRICS
    for attribute in metric.attributes
}

_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: One token of PromQL: a string, a comment, a range or subquery duration, a number, a name, a run
#: of spaces, or any other single character (an opening quote or ``[`` alone never closed).
_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`|#[^\n]*|\[[^\]]*\]'
    r"|[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*|\s+|.",
    re.DOTALL,
)
#: The keywords whose parenthesis holds label names.
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})


def _whole_words(words: Iterable[str]) -> re.Pattern[str]:
    """Any of ``words`` as a whole name: not part of a longer name or of a recording rule's."""
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    return re.compile(r"(?<![A-Za-z0-9_:.])(" + alternatives + r")(?![A-Za-z0-9_:])")


#: Every underscore registry name as a whole word.
_LEFTOVER = _whole_words({*SERIES, *LABELS})


def quote(name: str) -> str:
    """A PromQL string literal."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _skip_space(expr: str, i: int) -> int:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return i


#: The keywords whose label list Prometheus 3.5 prints without quotes when it re-reads a rule's
#: expression (a rule is evaluated from its printed form): a UTF-8 label there breaks the rule.
_MATCHING = frozenset({"on", "ignoring", "group_left", "group_right"})


def promql(expr: str, *, rule: bool = False) -> str:
    """A generated PromQL expression with its registry names in their UTF-8 form.

    A series name becomes a quoted name inside the selector's braces (``m{a="b"}`` →
    ``{"m.x", a="b"}``, ``m[5m]`` → ``{"m.x"}[5m]``); a label name is quoted inside a
    selector and in the label lists of ``by``, ``without``, ``on``, ``ignoring``,
    ``group_left`` and ``group_right``. Strings, numbers, durations and other names are
    copied as they are. A ``rule`` expression may not match on a UTF-8 label (``on``,
    ``ignoring``, ``group_left``, ``group_right``): Prometheus 3.5 evaluates a rule from its
    printed form and prints those lists unquoted, so the rule would fail at every evaluation.
    """
    out: list[str] = []
    stack: list[str] = []
    previous = ""
    i = 0
    while i < len(expr):
        match = _TOKEN.match(expr, i)
        assert match is not None  # the last alternative takes any one character
        token, i = match.group(), match.end()
        if token in ('"', "'", "`"):
            raise NamingError(f"unterminated string in {expr!r}")
        if token == "[":
            raise NamingError(f"unclosed [ in {expr!r}")
        if token[0] in "\"'`[" or token[0].isdigit():
            out.append(token)
            previous = ""
        elif token[0] == "#":
            out.append(token)
        elif _IDENT.fullmatch(token):
            if token in SERIES:
                i = _selector(expr, token, i, stack, out)
            else:
                out.append(_word(expr, token, stack))
            previous = token
        else:
            if token == "{":
                stack.append("{")
            elif token == "(":
                stack.append("grouping" if previous in _GROUPING else "(")
                if rule and previous in _MATCHING:
                    stack[-1] = "matching"
            elif token in ")}":
                if not stack:
                    raise NamingError(f"unbalanced {token!r} in {expr!r}")
                stack.pop()
            if not token.isspace():
                previous = ""
            out.append(token)
    if stack:
        raise NamingError(f"unclosed {stack[-1]!r} in {expr!r}")
    return "".join(out)


def _word(expr: str, word: str, stack: list[str]) -> str:
    """A name that is not a series: a registry label is quoted where PromQL reads label names."""
    if word not in LABELS:
        return word
    if stack and stack[-1] == "matching":
        raise NamingError(
            f"rule matches on label {word}, which Prometheus 3.5 cannot re-read under UTF-8 names: {expr!r}"
        )
    if stack and stack[-1] in ("{", "grouping"):
        return quote(LABELS[word])
    raise NamingError(f"label {word} outside a selector or a label list in {expr!r}")


def _selector(expr: str, word: str, i: int, stack: list[str], out: list[str]) -> int:
    """Write the selector of the series ``word`` (read up to ``i``); return where reading goes on."""
    if stack and stack[-1] in ("{", "grouping", "matching"):
        raise NamingError(f"series name {word} where a label name belongs in {expr!r}")
    name = quote(SERIES[word])
    j = _skip_space(expr, i)
    if j < len(expr) and expr[j] == "{":
        k = _skip_space(expr, j + 1)
        if k < len(expr) and expr[k] == "}":
            out.append("{" + name + "}")
            return k + 1
        out.append("{" + name + ", ")
        stack.append("{")
        return k
    out.append("{" + name + "}")
    return i


_LEGEND = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")


def legend(text: str) -> str:
    """A Grafana legend format: ``{{label}}`` names the UTF-8 label (Grafana reads it as a key)."""
    return _LEGEND.sub(lambda m: "{{" + LABELS.get(m.group(1), m.group(1)) + "}}", text)


_LABEL_VALUES = re.compile(r"label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)", re.DOTALL)


def variable_query(text: str) -> str:
    """A Grafana ``label_values(selector, label)`` variable query."""
    match = _LABEL_VALUES.fullmatch(text.strip())
    if match is None:
        return text
    label = match.group(2)
    return f"label_values({promql(match.group(1))}, {LABELS.get(label, label)})"


def field_name(text: str) -> str:
    """A Grafana field name made of labels (a table column; ``a\\b`` for a grouped matrix's)."""
    return "\\".join(LABELS.get(part, part) for part in text.split("\\"))


_DATA_FIELD = re.compile(r"\$\{__data\.fields\.([A-Za-z_][A-Za-z0-9_]*)\}")


def data_link(url: str) -> str:
    """A panel link: ``${__data.fields.<label>}`` becomes ``${__data.fields["<label>"]}``."""
    return _DATA_FIELD.sub(
        lambda m: '${__data.fields["' + LABELS[m.group(1)] + '"]}' if m.group(1) in LABELS else m.group(),
        url,
    )


_TEMPLATE_LABEL = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")


def template(text: str) -> str:
    """An alert annotation: ``$labels.<label>`` becomes ``index $labels "<label>"`` (a Go template
    cannot read a dotted key as a field), and a series named in the prose gets its UTF-8 name."""
    text = _TEMPLATE_LABEL.sub(
        lambda m: f"index $labels {quote(LABELS[m.group(1)])}" if m.group(1) in LABELS else m.group(), text
    )
    return _series_words(text)


_SERIES_WORD = _whole_words(SERIES)


def _series_words(text: str) -> str:
    return _SERIES_WORD.sub(lambda m: SERIES[m.group(1)], text)


def leftovers(value: Any) -> list[str]:
    """Every underscore registry name still in a dashboard or rule model (keys and strings)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            found += _LEFTOVER.findall(str(key))
            found += leftovers(item)
    elif isinstance(value, list):
        for item in value:
            found += leftovers(item)
    elif isinstance(value, str):
        found += _LEFTOVER.findall(value)
    return found


def _check(model: Any, what: str) -> None:
    left = leftovers(model)
    if left:
        raise NamingError(f"{what}: underscore names left after the UTF-8 rewrite: {sorted(set(left))}")


# --- dashboards ------------------------------------------------------------------------------


def _dashboard_value(key: str, value: Any) -> Any:
    if isinstance(value, Mapping):
        return {field_name(k): _dashboard_value(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dashboard_value(key, item) for item in value]
    if not isinstance(value, str):
        return value
    if key == "expr":
        return promql(value)
    if key == "legendFormat":
        return legend(value)
    if key in ("query", "definition"):
        return variable_query(value)
    if key == "url":
        return data_link(value)
    return field_name(value)


def dashboard(model: Mapping[str, Any]) -> dict[str, Any]:
    """A generated dashboard model with every registry name in its UTF-8 form.

    Queries, variable queries, legends, table columns and transformations that name a label,
    and panel links that read a field: each gets the UTF-8 spelling. Raises
    :class:`NamingError` when an underscore name would be left behind.
    """
    out = {key: _dashboard_value(key, value) for key, value in copy.deepcopy(dict(model)).items()}
    _check(out, f"dashboard {model.get('uid')}")
    return out


def dashboards(models: Mapping[str, Mapping[str, Any]], naming: str) -> dict[str, dict[str, Any]]:
    """Dashboards (file name -> model) for ``naming``: as generated, or rewritten for UTF-8 names."""
    check_naming(naming)
    if naming == UNDERSCORE:
        return {name: dict(model) for name, model in models.items()}
    return {name: dashboard(model) for name, model in models.items()}


# --- rule files ----------------------------------------------------------------------------


def _rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(rule)
    out["expr"] = promql(str(rule["expr"]), rule=True)
    for field in ("labels", "annotations"):
        if field in rule:
            out[field] = {k: template(str(v)) for k, v in rule[field].items()}
    return out


def rules(file: Mapping[str, Any], naming: str) -> dict[str, Any]:
    """A Prometheus rule file (as loaded) for ``naming``: each expression, label and annotation
    of every rule rewritten for UTF-8 names, the recording rules' own names kept."""
    check_naming(naming)
    if naming == UNDERSCORE:
        return copy.deepcopy(dict(file))
    out = copy.deepcopy(dict(file))
    out["groups"] = [
        {**group, "rules": [_rule(rule) for rule in group.get("rules") or ()]} for group in file["groups"]
    ]
    _check(out, "rule file")
    return out


def rule_tests(file: Mapping[str, Any], naming: str) -> dict[str, Any]:
    """A ``promtool test rules`` file for ``naming``: input series, queries, expected labels and
    annotations rewritten as :func:`rules` rewrites the rules they test."""
    check_naming(naming)
    out = copy.deepcopy(dict(file))
    if naming == UNDERSCORE:
        return out
    # An input series (``name{labels}``) is written as the selector PromQL would read.
    for test in out.get("tests") or ():
        for series in test.get("input_series") or ():
            series["series"] = promql(series["series"])
        for case in test.get("promql_expr_test") or ():
            case["expr"] = promql(case["expr"])
            for sample in case.get("exp_samples") or ():
                if "labels" in sample:
                    sample["labels"] = promql(sample["labels"])
        for case in test.get("alert_rule_test") or ():
            for alert in case.get("exp_alerts") or ():
                if "exp_labels" in alert:
                    alert["exp_labels"] = {LABELS.get(k, k): v for k, v in alert["exp_labels"].items()}
                if "exp_annotations" in alert:
                    expected = alert["exp_annotations"].items()
                    alert["exp_annotations"] = {k: _series_words(str(v)) for k, v in expected}
    _check({k: v for k, v in out.items() if k != "rule_files"}, "rule tests")
    return out


def check_naming(naming: str) -> str:
    if naming not in NAMINGS:
        raise ValueError(f"names must be one of {', '.join(NAMINGS)}, got {naming!r}")
    return naming


def series(names_in: Iterable[str], naming: str) -> list[str]:
    """Underscore series names as ``naming`` stores them."""
    check_naming(naming)
    return [SERIES[n] if naming == UTF8 else n for n in names_in]
