"""``otel-ctx dashboards export --kubernetes``: PrometheusRule, sidecar ConfigMaps, GrafanaDashboards
(and ``--format sloth-k8s``: Sloth's PrometheusServiceLevels).

Every manifest is validated by kubeconform (``-strict``) against the operators' own schemas: the
Prometheus Operator's, grafana-operator's and Sloth's CRDs, and for the ConfigMap the core/v1 OpenAPI
document Kubernetes publishes, all fetched from their Go modules by stack/build-kubeconform.sh.
kubeconform's default schemas are downloaded at run time; none is used here (no network).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from support import ROOT, missing
from typer.testing import CliRunner

from otel_ctx import artefacts
from otel_ctx.cli import app
from otel_ctx.grafana import _alerts as alerts
from otel_ctx.grafana import _kubernetes as k8s

runner = CliRunner()
SHIPPED = {
    name.removeprefix("dashboards/"): entry.read_text(encoding="utf-8")
    for name, entry in artefacts.files().items()
    if name.startswith("dashboards/") and name.endswith(".json")
}
RULES_TEXT = artefacts.files()[f"dashboards/{alerts.RULES_FILENAME}"].read_text(encoding="utf-8")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
ALL_KINDS = [arg for kind in k8s.KINDS for arg in ("--kubernetes", kind)]


def export(*args: str) -> Any:
    result = runner.invoke(app, ["dashboards", "export", *args])
    return result


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def exported(tmp_path: Path, *args: str) -> dict[str, list[dict[str, Any]]]:
    """Kind -> the objects ``export --kubernetes`` wrote for it, read back from its file."""
    result = export(str(tmp_path), *ALL_KINDS, *args)
    assert result.exit_code == 0, result.output
    return {kind: documents((tmp_path / k8s.FILENAMES[kind]).read_text()) for kind in k8s.KINDS}


# --- the schemas kubeconform validates against -------------------------------------------------


def _paths() -> dict[str, Path]:
    script = ROOT / "stack" / "build-kubeconform.sh"
    result = subprocess.run(["bash", str(script), "--paths"], capture_output=True, text=True, timeout=60)
    paths = {
        name: Path(path) for name, _, path in (line.partition("=") for line in result.stdout.splitlines())
    }
    if result.returncode != 0:
        why = f" ({result.stderr.strip()})" if result.stderr.strip() else ""
        missing(f"kubeconform or its schemas are not fetched; run: bash {script}{why}")
    return paths


def strict(schema: Any) -> Any:
    """What kubeconform's ``-strict`` means for a schema file (kubeconform's own
    openapi2jsonschema does the same): an object with listed properties admits no others,
    except where the API server keeps unknown fields."""
    if isinstance(schema, dict):
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        for value in schema.values():
            strict(value)
    elif isinstance(schema, list):
        for value in schema:
            strict(value)
    return schema


def resolved(schemas: dict[str, Any], name: str, seen: tuple[str, ...] = ()) -> Any:
    """One OpenAPI v3 component with every ``$ref`` inlined (the core types hold no cycle)."""
    assert name not in seen, seen

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                return resolved(schemas, ref.removeprefix("#/components/schemas/"), (*seen, name))
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(value) for value in node]
        return node

    return inline(copy.deepcopy(schemas[name]))


@pytest.fixture(scope="module")
def kubeconform(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """kubeconform and a schema location template holding exactly the four kinds exported."""
    paths = _paths()
    root = tmp_path_factory.mktemp("schemas")
    core = json.loads(paths["core_openapi"].read_text())["components"]["schemas"]
    object_meta = resolved(core, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    # ConfigMap is core (apiVersion v1): kubeconform's {{.Group}} and {{.ResourceAPIVersion}} are both "v1".
    written = {("v1", "configmap", "v1"): resolved(core, "io.k8s.api.core.v1.ConfigMap")}
    for crd_path in (paths["prometheusrule_crd"], paths["grafanadashboard_crd"], paths["servicelevel_crd"]):
        crd = yaml.safe_load(crd_path.read_text())
        for version in crd["spec"]["versions"]:
            schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
            # The API server checks every object's metadata as ObjectMeta; a CRD leaves it open.
            schema["properties"]["metadata"] = copy.deepcopy(object_meta)
            key = (crd["spec"]["group"], crd["spec"]["names"]["kind"].lower(), version["name"])
            written[key] = schema
    for (group, kind, version), schema in written.items():
        path = root / group / f"{kind}_{version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(strict(schema)))
    return paths["kubeconform"], str(root / "{{.Group}}" / "{{.ResourceKind}}_{{.ResourceAPIVersion}}.json")


def validate(kubeconform: tuple[Path, str], *files: Path) -> subprocess.CompletedProcess[str]:
    binary, location = kubeconform
    return subprocess.run(
        [str(binary), "-strict", "-summary", "-schema-location", location, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_kubeconform_accepts_every_exported_manifest(kubeconform: tuple[Path, str], tmp_path: Path) -> None:
    exported(tmp_path, "--namespace", "monitoring", "--label", "release=kube-prometheus-stack")
    files = [tmp_path / k8s.FILENAMES[kind] for kind in k8s.KINDS]
    proc = validate(kubeconform, *files)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    boards = len(SHIPPED)
    # Every object was checked against a schema (none skipped for want of one).
    assert f"Valid: {1 + 2 * boards}, Invalid: 0, Errors: 0, Skipped: 0" in proc.stdout, proc.stdout


def test_kubeconform_accepts_the_sloth_service_levels(kubeconform: tuple[Path, str], tmp_path: Path) -> None:
    """The SLOs as Sloth's PrometheusServiceLevel: valid against Sloth's CRD, for both namings."""
    for names_ in ("underscore", "utf8"):
        out = tmp_path / names_
        result = export(str(out), "--format", "sloth-k8s", "--names", names_, "--namespace", "monitoring")
        assert result.exit_code == 0, result.output
        proc = validate(kubeconform, out / "otel-ctx-sloth-servicelevels.yaml")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Valid: 1, Invalid: 0, Errors: 0, Skipped: 0" in proc.stdout, proc.stdout
    # The CRD does hold the spec: a misspelt field is refused.
    broken = tmp_path / "broken.yaml"
    text = (tmp_path / "underscore" / "otel-ctx-sloth-servicelevels.yaml").read_text()
    broken.write_text(text.replace("errorQuery:", "error_query:"))
    proc = validate(kubeconform, broken)
    assert proc.returncode != 0, proc.stdout


def test_kubeconform_refuses_what_the_operators_would(kubeconform: tuple[Path, str], tmp_path: Path) -> None:
    """The schemas bite: a field the operator does not know, a duration Prometheus cannot read,
    a GrafanaDashboard with no instance selector, a ConfigMap value that is not a string and
    a name with a capital are each refused."""
    objects = exported(tmp_path)
    rule, board, config = (
        objects[k8s.PROMETHEUS_RULE][0],
        objects[k8s.GRAFANA_DASHBOARD][0],
        objects[k8s.CONFIGMAP][0],
    )
    broken: dict[str, dict[str, Any]] = {}
    broken["unknown-field"] = copy.deepcopy(rule)
    broken["unknown-field"]["spec"]["groups"][0]["evaluation"] = "1m"
    broken["bad-duration"] = copy.deepcopy(rule)
    alert = next(r for r in broken["bad-duration"]["spec"]["groups"][0]["rules"] if "for" in r)
    alert["for"] = "5 minutes"
    broken["no-selector"] = copy.deepcopy(board)
    del broken["no-selector"]["spec"]["instanceSelector"]
    broken["not-a-string"] = copy.deepcopy(config)
    broken["not-a-string"]["data"] = {"n.json": 1}
    broken["metadata-typo"] = copy.deepcopy(config)
    broken["metadata-typo"]["metadata"]["label"] = {"a": "b"}
    for name, obj in broken.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(obj))
        proc = validate(kubeconform, path)
        assert proc.returncode != 0, f"{name} passed:\n{proc.stdout}"
        assert "Invalid: 1" in proc.stdout, (name, proc.stdout)


# --- what the objects hold -----------------------------------------------------------------------


def test_the_prometheus_rule_holds_exactly_the_rule_groups_of_alerts_yml(tmp_path: Path) -> None:
    (rule,) = exported(tmp_path)[k8s.PROMETHEUS_RULE]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    shipped = yaml.safe_load(RULES_TEXT)["groups"]
    got = rule["spec"]["groups"]
    assert [g["name"] for g in got] == [g["name"] for g in shipped]
    for ours, theirs in zip(got, shipped):
        assert ours == theirs, ours["name"]
    records = [r for g in got for r in g["rules"] if "record" in r]
    firing = [r for g in got for r in g["rules"] if "alert" in r]
    assert records and firing  # recording and alerting rules both travel


def test_the_sidecar_configmaps_hold_each_dashboard_file_byte_for_byte(tmp_path: Path) -> None:
    maps = exported(tmp_path)[k8s.CONFIGMAP]
    assert sorted(m["metadata"]["name"] for m in maps) == sorted(n.removesuffix(".json") for n in SHIPPED)
    for config in maps:
        (key,) = config["data"]
        assert key == config["metadata"]["name"] + ".json"
        assert config["data"][key] == SHIPPED[key]
        assert (ROOT / "dashboards" / key).read_text(encoding="utf-8") == config["data"][key]
        assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config["metadata"]["annotations"] == {"grafana_folder": "otel-ctx"}


def test_the_grafana_dashboards_hold_each_file_and_keep_its_uid(tmp_path: Path) -> None:
    boards = exported(tmp_path)[k8s.GRAFANA_DASHBOARD]
    assert len(boards) == len(SHIPPED)
    for board in boards:
        text = SHIPPED[board["metadata"]["name"] + ".json"]
        assert board["apiVersion"] == "grafana.integreatly.org/v1beta1"
        assert board["spec"]["json"] == text
        assert board["spec"]["uid"] == json.loads(text)["uid"]
        assert board["spec"]["instanceSelector"] == {"matchLabels": {"dashboards": "grafana"}}
        assert board["spec"]["folder"] == "otel-ctx"


def test_every_name_is_a_dns_1123_subdomain(tmp_path: Path) -> None:
    for objects in exported(tmp_path).values():
        for obj in objects:
            name = obj["metadata"]["name"]
            assert len(name) <= 253 and DNS1123_SUBDOMAIN.fullmatch(name), name


def test_namespace_labels_selector_and_folder_land_where_set(tmp_path: Path) -> None:
    objects = exported(
        tmp_path,
        "--namespace",
        "observability",
        "--label",
        "release=kps",
        "--label",
        "team.example.com/owner=sre",
        "--sidecar-label",
        "grafana_dashboard=otel",
        "--instance-selector",
        "app=grafana",
        "--instance-selector",
        "tier=prod",
        "--folder",
        "LLM agents",
    )
    for kind, found in objects.items():
        for obj in found:
            meta = obj["metadata"]
            assert meta["namespace"] == "observability"
            assert meta["labels"]["release"] == "kps"
            assert meta["labels"]["team.example.com/owner"] == "sre"
            assert meta["labels"]["app.kubernetes.io/name"] == "otel-ctx"
            # The sidecar's label marks the ConfigMaps alone: on the others it would mean nothing.
            assert (meta["labels"].get("grafana_dashboard") == "otel") == (kind == k8s.CONFIGMAP)
            assert "grafana_dashboard" not in meta["labels"] or kind == k8s.CONFIGMAP
    for board in objects[k8s.GRAFANA_DASHBOARD]:
        assert board["spec"]["instanceSelector"]["matchLabels"] == {"app": "grafana", "tier": "prod"}
        assert board["spec"]["folder"] == "LLM agents"
    for config in objects[k8s.CONFIGMAP]:
        assert config["metadata"]["annotations"]["grafana_folder"] == "LLM agents"


def test_no_namespace_and_no_folder_leave_them_out(tmp_path: Path) -> None:
    objects = exported(tmp_path, "--folder", "")
    for found in objects.values():
        for obj in found:
            assert "namespace" not in obj["metadata"]
            assert "annotations" not in obj["metadata"]
    assert all("folder" not in b["spec"] for b in objects[k8s.GRAFANA_DASHBOARD])


def test_stdout_holds_every_kind_asked_for_in_order() -> None:
    result = export("-", "--kubernetes", "configmap", "-k", "prometheusrule", "-k", "configmap")
    assert result.exit_code == 0, result.output
    kinds = [doc["kind"] for doc in documents(result.stdout)]
    assert kinds == ["ConfigMap"] * len(SHIPPED) + ["PrometheusRule"]


def test_from_a_build_directory_carries_its_thresholds(tmp_path: Path) -> None:
    built = tmp_path / "built"
    result = runner.invoke(app, ["dashboards", "build", "--out", str(built), "--set", "overflow_ratio=0.2"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "k8s"
    result = export(str(out), "-k", "prometheusrule", "-k", "configmap", "--from", str(built))
    assert result.exit_code == 0, result.output
    (rule,) = documents((out / k8s.FILENAMES[k8s.PROMETHEUS_RULE]).read_text())
    assert rule["spec"] == yaml.safe_load((built / alerts.RULES_FILENAME).read_text())
    assert rule["spec"] != yaml.safe_load(RULES_TEXT)  # the threshold moved
    for config in documents((out / k8s.FILENAMES[k8s.CONFIGMAP]).read_text()):
        ((key, text),) = config["data"].items()
        assert text == (built / key).read_text()


def test_existing_manifests_are_kept_without_force(tmp_path: Path) -> None:
    exported(tmp_path)
    again = export(str(tmp_path), "-k", "configmap")
    assert again.exit_code == 2
    assert "--force" in again.output
    assert export(str(tmp_path), "-k", "configmap", "--force").exit_code == 0


# --- bad options fail clearly -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-k", "configmap", "--namespace", "Monitoring"], "not a DNS-1123 label"),
        (["-k", "configmap", "--namespace", "a" * 64], "not a DNS-1123 label"),
        (["-k", "configmap", "--label", "release"], "--label takes KEY=VALUE"),
        (["-k", "configmap", "--label", "bad key=x"], "label key 'bad key'"),
        (["-k", "configmap", "--label", "a=" + "v" * 64], "a value must be empty"),
        (["-k", "configmap", "--label", "Bad_Prefix/a=b"], "prefix"),
        (["-k", "configmap", "--sidecar-label", "grafana_dashboard"], "--sidecar-label takes KEY=VALUE"),
        (["-k", "grafanadashboard", "--instance-selector", "=grafana"], "--instance-selector takes"),
        (["-k", "helmchart"], "helmchart"),
        (["--namespace", "monitoring"], "pass --kubernetes"),
        (["--folder", "x"], "pass --kubernetes"),
        (["-k", "configmap", "--from", "/nonexistent/otel-ctx"], "is not a directory"),
    ],
)
def test_bad_options_exit_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    result = export(str(tmp_path / "out"), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert isinstance(result.exception, SystemExit)  # a message, not a traceback
    assert not (tmp_path / "out").exists()


def test_a_dashboard_over_the_configmap_limit_is_refused_by_name(tmp_path: Path) -> None:
    built = tmp_path / "built"
    built.mkdir()
    (built / alerts.RULES_FILENAME).write_text(RULES_TEXT)
    big = json.dumps({"uid": "big", "title": "big", "panels": [], "padding": "x" * k8s.CONFIGMAP_LIMIT})
    (built / "big-board.json").write_text(big)
    result = export(str(tmp_path / "out"), "-k", "configmap", "--from", str(built))
    assert result.exit_code == 2, result.output
    assert "big-board.json" in result.output and "1 MiB" in result.output
    # The GrafanaDashboard has no such limit of its own: the same file exports.
    assert export(str(tmp_path / "out"), "-k", "grafanadashboard", "--from", str(built)).exit_code == 0


def test_a_dashboard_file_whose_name_kubernetes_refuses_is_named(tmp_path: Path) -> None:
    built = tmp_path / "built"
    built.mkdir()
    (built / alerts.RULES_FILENAME).write_text(RULES_TEXT)
    (built / "My_Board.json").write_text(json.dumps({"uid": "b", "title": "b"}))
    result = export(str(tmp_path / "out"), "-k", "grafanadashboard", "--from", str(built))
    assert result.exit_code == 2
    assert "My_Board" in result.output and "DNS-1123" in result.output


@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200))
def test_any_dashboard_text_survives_the_yaml_unchanged(text: str) -> None:
    """The block style the manifests use for multi-line strings never alters a string: YAML
    falls back to quoting where a block would (trailing spaces, tabs, control characters)."""
    objects = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"b.json": text}},
        {"lines": [text + "\n", "\n" + text, f"{text}\n\n{text}"]},
    ]
    assert documents(k8s.dump(objects)) == objects
