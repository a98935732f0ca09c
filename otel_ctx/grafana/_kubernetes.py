"""The dashboards and alert rules as Kubernetes objects, for clusters run by operators.

Three kinds, each what an operator installed in the cluster picks up by itself:

* ``PrometheusRule`` (``monitoring.coreos.com/v1``, the Prometheus Operator and
  kube-prometheus-stack): the rule groups of ``alerts.yml`` as they are, recording rules first;
* ``ConfigMap`` per dashboard, labelled for the Grafana sidecar of kube-prometheus-stack
  (``grafana_dashboard: "1"`` by default), the JSON under ``<file name>``;
* ``GrafanaDashboard`` (``grafana.integreatly.org/v1beta1``, grafana-operator v5) per dashboard,
  the JSON in ``spec.json`` and an ``instanceSelector`` naming the Grafana it goes to.

The objects hold the files byte for byte (the shipped ones, or a ``dashboards build`` output),
so a dashboard in the cluster is the one provisioned from files elsewhere. Every name, label
and namespace is checked against Kubernetes's own rules before anything is written: the API
server would refuse the object later, with less context.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

PROMETHEUS_RULE = "prometheusrule"
CONFIGMAP = "configmap"
GRAFANA_DASHBOARD = "grafanadashboard"
#: Every kind, in the order they are written.
KINDS = (PROMETHEUS_RULE, CONFIGMAP, GRAFANA_DASHBOARD)
#: The file each kind is written to (several objects of a kind share one multi-document file).
FILENAMES = {
    PROMETHEUS_RULE: "otel-ctx-prometheusrule.yaml",
    CONFIGMAP: "otel-ctx-dashboards-configmaps.yaml",
    GRAFANA_DASHBOARD: "otel-ctx-grafanadashboards.yaml",
}

#: The PrometheusRule's name.
RULE_NAME = "otel-ctx"
#: The label every object carries, so ``kubectl get -l`` finds them together.
APP_LABEL = ("app.kubernetes.io/name", "otel-ctx")
#: The label kube-prometheus-stack's Grafana sidecar looks for (``sidecar.dashboards.label``
#: and ``labelValue`` in the chart's values), unless told another.
SIDECAR_LABEL = ("grafana_dashboard", "1")
#: The annotation the sidecar reads a folder from, where the chart sets
#: ``sidecar.dashboards.folderAnnotation`` to it (without that, it is ignored).
SIDECAR_FOLDER_ANNOTATION = "grafana_folder"
#: The Grafana instances a GrafanaDashboard goes to: grafana-operator's documented example label.
INSTANCE_SELECTOR = ("dashboards", "grafana")
#: The folder the dashboards land in (the same default as ``otel-ctx dashboards push``).
FOLDER = "otel-ctx"

#: The data of one ConfigMap (keys and values together) may not exceed 1 MiB: the API server's
#: limit (validation of ``data`` and ``binaryData``).
CONFIGMAP_LIMIT = 1024 * 1024

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


class KubernetesError(ValueError):
    """A value Kubernetes would refuse (a name, a label, a namespace) or an object over a limit."""


def check_namespace(value: str) -> str:
    """A namespace is a DNS-1123 label: 63 characters at most, lowercase letters, digits, ``-``."""
    if len(value) > 63 or not _DNS1123_LABEL.fullmatch(value):
        raise KubernetesError(
            f"namespace {value!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def check_name(value: str, what: str) -> str:
    """An object name is a DNS-1123 subdomain: 253 characters at most, lowercase, ``-`` and ``.``."""
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise KubernetesError(
            f"{what} {value!r} is not a valid Kubernetes name (a DNS-1123 subdomain: lowercase "
            "letters, digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return value


def check_label(key: str, value: str) -> tuple[str, str]:
    """A label key is ``[prefix/]name`` (prefix a DNS-1123 subdomain, name a qualified name of
    63 characters at most); a value is empty or a qualified name of 63 characters at most."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        raise KubernetesError(f"label key {key!r}: the prefix before '/' must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise KubernetesError(
            f"label key {key!r}: the name must be at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        raise KubernetesError(
            f"label {key}={value!r}: a value must be empty or at most 63 letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit"
        )
    return key, value


def parse_label(item: str, option: str) -> tuple[str, str]:
    """``KEY=VALUE`` from the command line, checked as a label."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise KubernetesError(f"{option} takes KEY=VALUE, got {item!r}")
    return check_label(key, value)


@dataclass(frozen=True)
class Options:
    """Where the objects go and how the operators find them."""

    namespace: str | None = None
    #: Labels on every object (after the app label, which they may override).
    labels: Mapping[str, str] = field(default_factory=dict)
    sidecar_label: tuple[str, str] = SIDECAR_LABEL
    instance_selector: Mapping[str, str] = field(default_factory=lambda: dict([INSTANCE_SELECTOR]))
    folder: str | None = FOLDER

    def __post_init__(self) -> None:
        if self.namespace is not None:
            check_namespace(self.namespace)
        for key, value in (*self.labels.items(), self.sidecar_label, *self.instance_selector.items()):
            check_label(key, value)
        if not self.instance_selector:
            raise KubernetesError("a GrafanaDashboard needs at least one instance selector label")
        if self.folder is not None and not self.folder.strip():
            raise KubernetesError("the folder title is empty")


def _metadata(name: str, options: Options, extra_labels: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if options.namespace is not None:
        meta["namespace"] = options.namespace
    meta["labels"] = {APP_LABEL[0]: APP_LABEL[1], **options.labels, **dict(extra_labels)}
    return meta


def prometheus_rule(rules_text: str, options: Options) -> dict[str, Any]:
    """The PrometheusRule holding exactly the groups of a Prometheus rule file."""
    try:
        loaded = yaml.safe_load(rules_text)
    except yaml.YAMLError as exc:
        raise KubernetesError(f"the alert rule file is not YAML: {exc}") from None
    if (
        not isinstance(loaded, dict)
        or not isinstance(loaded.get("groups"), list)
        or set(loaded) != {"groups"}
    ):
        raise KubernetesError(
            "the alert rule file is not a Prometheus rule file (a mapping of 'groups' only)"
        )
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _metadata(RULE_NAME, options),
        "spec": {"groups": loaded["groups"]},
    }


def _dashboard_name(filename: str) -> str:
    stem = filename.removesuffix(".json")
    return check_name(stem, f"dashboard file {filename!r}: its name")


def _check_model(filename: str, text: str) -> dict[str, Any]:
    try:
        model = json.loads(text)
    except ValueError as exc:
        raise KubernetesError(f"dashboard file {filename!r} is not JSON: {exc}") from None
    if not isinstance(model, dict) or not isinstance(model.get("uid"), str) or not model["uid"]:
        raise KubernetesError(f"dashboard file {filename!r} is not a Grafana dashboard (no uid)")
    return model


def configmap(filename: str, text: str, options: Options) -> dict[str, Any]:
    """One dashboard as a ConfigMap the Grafana sidecar loads: the JSON under ``filename``."""
    name = _dashboard_name(filename)
    _check_model(filename, text)
    if not _CONFIG_KEY.fullmatch(filename):
        raise KubernetesError(f"dashboard file {filename!r}: not a valid ConfigMap key")
    size = len(filename.encode()) + len(text.encode())
    if size > CONFIGMAP_LIMIT:
        raise KubernetesError(
            f"dashboard {filename!r} is {size:,} bytes: over the 1 MiB ({CONFIGMAP_LIMIT:,} bytes) a "
            "ConfigMap may hold; provision it from files or with a GrafanaDashboard instead"
        )
    meta = _metadata(name, options, [options.sidecar_label])
    if options.folder is not None:
        meta["annotations"] = {SIDECAR_FOLDER_ANNOTATION: options.folder}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {filename: text}}


def grafana_dashboard(filename: str, text: str, options: Options) -> dict[str, Any]:
    """One dashboard as a grafana-operator GrafanaDashboard: the JSON in ``spec.json``."""
    name = _dashboard_name(filename)
    model = _check_model(filename, text)
    spec: dict[str, Any] = {
        "instanceSelector": {"matchLabels": dict(options.instance_selector)},
        # The dashboards link to one another by uid: keep the model's, never a generated one.
        "uid": model["uid"],
        "json": text,
    }
    if options.folder is not None:
        spec["folder"] = options.folder
    return {
        "apiVersion": "grafana.integreatly.org/v1beta1",
        "kind": "GrafanaDashboard",
        "metadata": _metadata(name, options),
        "spec": spec,
    }


def manifests(
    kind: str, dashboards: Mapping[str, str], rules_text: str, options: Options
) -> list[dict[str, Any]]:
    """The objects of one kind: ``dashboards`` maps each dashboard's file name to its JSON text."""
    if kind == PROMETHEUS_RULE:
        return [prometheus_rule(rules_text, options)]
    build = {CONFIGMAP: configmap, GRAFANA_DASHBOARD: grafana_dashboard}.get(kind)
    if build is None:
        raise KubernetesError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    return [build(filename, text, options) for filename, text in sorted(dashboards.items())]


class BlockDumper(yaml.SafeDumper):
    """Block style for multi-line strings (the dashboards' JSON, the rules' descriptions), so the
    manifests read like the files they hold; YAML falls back to quoting where a block cannot
    hold a string exactly."""


#: Characters YAML reads as line breaks besides ``\n``: a block scalar would turn them into ``\n``
#: (and ``\r\n`` into one break), so a string holding one is written double-quoted instead.
_OTHER_BREAKS = frozenset("\r\x85\u2028\u2029")


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if _OTHER_BREAKS.intersection(value):
        style: str | None = '"'
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockDumper.add_representer(str, _str)


def dump(objects: Iterable[Mapping[str, Any]]) -> str:
    """The objects as one multi-document YAML stream, in the order given."""
    return yaml.dump_all(
        list(objects),
        Dumper=BlockDumper,
        sort_keys=False,
        allow_unicode=True,
        width=100_000,
        explicit_start=True,
    )
