"""``otel-ctx dashboards build|export|push``: regenerate, write out or upload the dashboards.

The generator and the push need the ``dashboards`` extra; they are imported inside the
commands so ``otel-ctx --help`` works without it. ``export`` writes the files the package
ships and needs no extra.

Exit codes: 0 done, 1 the dashboards are out of date (``build --check``) or Grafana
refused/failed, 2 a usage or input error, or an answer that is not shaped like Grafana's.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from types import ModuleType

    from otel_ctx.grafana._alerts import AlertSettings
    from otel_ctx.grafana._push import GrafanaTarget, PushResult
    from otel_ctx.grafana._slo import Objective

app = typer.Typer(no_args_is_help=True, help="Build or push the shipped Grafana dashboards.")

EXIT_FAILED = 1
EXIT_USAGE = 2


def _fail(command: str, message: str, code: int = EXIT_USAGE) -> NoReturn:
    # Plain echo, not Rich: an error must stay on one line whatever the terminal width.
    typer.echo(f"otel-ctx dashboards {command}: error: {message}", err=True)
    raise typer.Exit(code)


class Names(str, Enum):
    """How the Prometheus the dashboards read names the series (``--names``)."""

    underscore = "underscore"
    utf8 = "utf8"


#: Help of ``--names``, shared by every command that writes or uploads dashboards or rules.
NAMES_HELP = (
    "How Prometheus names the series: underscore (context_budget_fits_total; the Collector, the "
    "scrape endpoint, Prometheus 3's OTLP receiver by default) or utf8 (context_budget.fits_total: "
    "the OTLP receiver with translation_strategy: NoUTF8EscapingWithSuffixes)."
)
NamesOption = Annotated[Names, typer.Option("--names", help=NAMES_HELP, case_sensitive=False)]


#: ``--slo-config`` and ``--objective``: the SLOs the error-budget alerts and panels enforce.
SloConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--slo-config",
        help=(
            "YAML or JSON file of objectives per task type (objectives: [{task_type, objective, "
            "kind, window}]); see the SRE guide."
        ),
    ),
]
ObjectiveOption = Annotated[
    list[str] | None,
    typer.Option(
        "--objective",
        help=(
            "An objective as [KIND:]TASK_TYPE=SHARE (repeatable), e.g. dispute=0.95, "
            "ceiling:status=99%, '*=0.995' for every other task type; over --slo-config."
        ),
    ),
]


def _objectives(
    command: str, config: Path | None, overrides: list[str] | None
) -> tuple[Objective, ...] | None:
    """The objectives ``--slo-config`` and ``--objective`` give, or None when neither is given."""
    if config is None and not overrides:
        return None
    from otel_ctx.grafana import _slo as slo

    try:
        return slo.objectives(config, overrides or [])
    except ValueError as exc:
        _fail(command, str(exc))


class Backend(str, Enum):
    """What answers the dashboards' queries and evaluates the rules (``--backend``)."""

    prometheus = "prometheus"
    victoriametrics = "victoriametrics"


#: Help of ``--backend``, shared by every command that writes or uploads dashboards or rules.
BACKEND_HELP = (
    "What stores the metrics and evaluates the rules: prometheus, or victoriametrics (single-node "
    "or cluster, rules in vmalert: histograms read from their _bucket{vmrange}/_sum/_count series; "
    "underscore names only)."
)
BackendOption = Annotated[Backend, typer.Option("--backend", help=BACKEND_HELP, case_sensitive=False)]


def _check_target(command: str, names: Names, backend: Backend) -> None:
    if backend is Backend.victoriametrics and names is not Names.underscore:
        _fail(
            command,
            "--backend victoriametrics takes the underscore names only (--names underscore)",
        )


def _grafana(command: str) -> ModuleType:
    try:
        import otel_ctx.grafana as grafana
    except ImportError as exc:
        _fail(
            command,
            f"the dashboards extra is not installed ({exc.name or exc}); pip install 'otel-ctx[dashboards]'",
        )
    return grafana


@app.command(
    epilog=(
        "Examples:\n\n"
        "  otel-ctx dashboards build                   # rewrite ./dashboards/*.json\n\n"
        "  otel-ctx dashboards build --out /etc/grafana/dashboards/otel-ctx\n\n"
        "  otel-ctx dashboards build --check           # CI: exit 1 when the JSON is stale\n\n"
        "  otel-ctx dashboards build --out /etc/otel-ctx --jaeger-url https://jaeger.example.com "
        "--set overflow_ratio=0.1\n\n"
        "  otel-ctx dashboards build --out /etc/otel-ctx --names utf8  # Prometheus 3 keeping OTLP names\n\n"
        "  otel-ctx dashboards build --out /etc/otel-ctx --backend victoriametrics  # and vmalert"
    )
)
def build(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for the dashboard JSON files (created if missing).")
    ] = Path("dashboards"),
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Write nothing; exit 1 if the files differ from what the code generates."
        ),
    ] = False,
    grafana_url: Annotated[
        str | None,
        typer.Option("--grafana-url", help="Grafana the alerts link to (env OTEL_CTX_GRAFANA_URL)."),
    ] = None,
    jaeger_url: Annotated[
        str | None,
        typer.Option(
            "--jaeger-url",
            help="Jaeger UI the alerts and dashboards link to (env OTEL_CTX_JAEGER_URL).",
        ),
    ] = None,
    runbook_url: Annotated[
        str | None,
        typer.Option(
            "--runbook-url",
            help="Where the runbooks (docs/sre-guide.md) are served (env OTEL_CTX_RUNBOOK_URL).",
        ),
    ] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help=(
                "Any alert setting as NAME=VALUE, e.g. overflow_ratio=0.1 or overflow_window=10m "
                "(env OTEL_CTX_<NAME>); the dashboards' thresholds follow."
            ),
        ),
    ] = None,
    names: NamesOption = Names.underscore,
    backend: BackendOption = Backend.prometheus,
    slo_config: SloConfigOption = None,
    objective: ObjectiveOption = None,
) -> None:
    """Generate the Grafana dashboards (JSON for file provisioning) and the Prometheus alert rules.

    Both come from the names registry, so they query exactly what the emitter records. URLs
    and thresholds come from one place, the alert settings: their defaults, then
    ``OTEL_CTX_<NAME>`` variables, then these options.
    """
    if out.exists() and not out.is_dir():
        _fail("build", f"--out {out} exists and is not a directory")
    _check_target("build", names, backend)
    # The extra's check comes first: the rule generator imports the package that needs it.
    grafana = _grafana("build")
    urls = {"grafana_url": grafana_url, "jaeger_url": jaeger_url, "runbook_url": runbook_url}
    chosen = _alert_settings(settings, urls, _objectives("build", slo_config, objective))
    if check:
        _check_built(grafana, out, chosen, names, backend)
    else:
        _write_built(grafana, out, chosen, names, backend)


def _alert_settings(
    settings: list[str] | None, urls: dict[str, str | None], objectives: tuple[Objective, ...] | None = None
) -> AlertSettings:
    """What ``build`` generates with: the defaults, ``OTEL_CTX_<NAME>``, then ``--set``, the URLs
    and the objectives."""
    from otel_ctx.grafana import _alerts as alerts

    overrides: dict[str, object] = {}
    for item in settings or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            _fail("build", f"--set takes NAME=VALUE, got {item!r}")
        overrides[name.strip()] = value.strip()
    overrides.update({name: url for name, url in urls.items() if url is not None})
    if objectives is not None:
        overrides["objectives"] = objectives
    try:
        return alerts.AlertSettings.from_env(overrides=overrides)
    except (TypeError, ValueError) as exc:
        _fail("build", str(exc))


def _check_built(
    grafana: ModuleType, out: Path, chosen: AlertSettings, names: Names, backend: Backend
) -> None:
    """``build --check``: exit 1 naming each file that differs from what the generator writes."""
    from otel_ctx.grafana import _alerts as alerts

    drift = [f"{item.path} {item.problem}" for item in grafana.check(out, chosen, names.value, backend.value)]
    rules_problem = alerts.check(out / alerts.RULES_FILENAME, chosen, names.value, backend.value)
    if rules_problem is not None:
        drift.append(rules_problem)
    if backend is Backend.prometheus:
        from otel_ctx.grafana import _slo_tests as slo_tests

        tests_problem = slo_tests.check(out / slo_tests.TESTS_FILENAME, chosen, names.value)
        if tests_problem is not None:
            drift.append(tests_problem)
    if drift:
        for item in drift:
            typer.echo(f"otel-ctx dashboards build: {item}", err=True)
        _fail("build", f"{len(drift)} file(s) out of date; run: otel-ctx dashboards build --out {out}", 1)
    Console().print(
        f"[green]✓[/green] {len(grafana.DASHBOARDS)} dashboards and {alerts.RULES_FILENAME} "
        f"in {out} match the generator"
    )


def _write_built(
    grafana: ModuleType, out: Path, chosen: AlertSettings, names: Names, backend: Backend
) -> None:
    """Write the dashboards and the rules, then list what each dashboard holds."""
    from otel_ctx.grafana import _alerts as alerts

    console = Console()
    try:
        written = grafana.write(out, chosen, names.value, backend.value)
        rules = alerts.write(out / alerts.RULES_FILENAME, chosen, names.value, backend.value)
        if backend is Backend.prometheus:
            # The error-budget alerts' promtool tests follow the objectives they were built with.
            from otel_ctx.grafana import _slo_tests as slo_tests

            slo_tests.write(out / slo_tests.TESTS_FILENAME, chosen, names.value)
    except OSError as exc:
        _fail("build", f"cannot write to {out}: {exc.strerror or exc}")
    models = grafana.build_dashboards(chosen, names.value, backend.value)
    table = Table(title=f"Dashboards written to {out}", title_justify="left")
    for column in ("file", "title", "panels", "queries"):
        table.add_column(column, justify="right" if column in ("panels", "queries") else "left")
    for path in written:
        model = models[path.name]
        panels = [p for p in grafana.iter_panels(model) if p.get("type") != "row"]
        table.add_row(path.name, model["title"], str(len(panels)), str(len(grafana.queries(model))))
    console.print(table)
    if backend is Backend.victoriametrics:
        console.print(f"Alert rules written to {rules} (load them into vmalert with -rule={rules})")
    else:
        console.print(f"Alert rules written to {rules} (test them with: promtool test rules)")


class Kind(str, Enum):
    """A Kubernetes object kind ``export --kubernetes`` writes."""

    prometheusrule = "prometheusrule"
    configmap = "configmap"
    grafanadashboard = "grafanadashboard"


#: The options that only shape Kubernetes objects: given without ``--kubernetes`` they are a mistake.
_KUBERNETES_ONLY = ("--from", "--namespace", "--label", "--sidecar-label", "--instance-selector", "--folder")


class SloFormat(str, Enum):
    """An SLO tool ``export --format`` writes the SLOs for."""

    sloth = "sloth"
    sloth_k8s = "sloth-k8s"
    openslo = "openslo"


#: The file each SLO format is written to (Sloth's specs are one per window, named by it).
_SLO_FILES = {
    SloFormat.sloth_k8s: "otel-ctx-sloth-servicelevels.yaml",
    SloFormat.openslo: "otel-ctx-openslo.yaml",
}


_ExportOutOption = Annotated[
    Path,
    typer.Argument(help="Directory to write into (created if missing); with --kubernetes, - for stdout."),
]
_ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite files that are already there.")]
_KubernetesOption = Annotated[
    list[Kind] | None,
    typer.Option(
        "--kubernetes",
        "-k",
        help=(
            "Write Kubernetes manifests instead (repeatable): prometheusrule (Prometheus Operator), "
            "configmap (kube-prometheus-stack's Grafana sidecar), grafanadashboard (grafana-operator)."
        ),
    ),
]
_SourceOption = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Read the dashboards and alerts.yml from a `dashboards build --out` directory instead.",
    ),
]
_NamespaceOption = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="metadata.namespace of every object."),
]
_LabelsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--label",
        help="A label KEY=VALUE on every object (repeatable), e.g. release=kube-prometheus-stack.",
    ),
]
_SidecarLabelOption = Annotated[
    str | None,
    typer.Option(
        "--sidecar-label",
        help="The label the Grafana sidecar selects by, KEY=VALUE (default grafana_dashboard=1).",
    ),
]
_InstanceSelectorOption = Annotated[
    list[str] | None,
    typer.Option(
        "--instance-selector",
        help=(
            "A matchLabels KEY=VALUE of the GrafanaDashboards' instanceSelector "
            "(repeatable; default dashboards=grafana)."
        ),
    ),
]
_FormatOption = Annotated[
    SloFormat | None,
    typer.Option(
        "--format",
        help=(
            "Write the SLOs (error budgets per task type) for an SLO tool instead, where a team "
            "already runs one: sloth (Sloth specs and the alert windows that make Sloth page at "
            "otel-ctx's burn rates), sloth-k8s (Sloth's PrometheusServiceLevel objects), openslo "
            "(OpenSLO v1 Service, SLI and SLO documents)."
        ),
        case_sensitive=False,
    ),
]
_ExportFolderOption = Annotated[
    str | None,
    typer.Option(
        "--folder",
        help=(
            "Grafana folder title: a GrafanaDashboard's spec.folder, a ConfigMap's grafana_folder "
            "annotation; '' for none (default otel-ctx)."
        ),
    ),
]


@app.command(
    epilog=(
        "Examples:\n\n"
        "  otel-ctx dashboards export ./otel-ctx            # dashboards/, alerts.yml, otelcol.yaml\n\n"
        "  otel-ctx dashboards export ./otel-ctx --names utf8  # for Prometheus 3 keeping OTLP names\n\n"
        "  otel-ctx dashboards export ./otel-ctx --backend victoriametrics  # VictoriaMetrics + vmalert\n\n"
        "  otel-ctx dashboards export /etc/otel-ctx --force  # overwrite earlier copies\n\n"
        "  otel-ctx dashboards export - --kubernetes prometheusrule --kubernetes configmap "
        "--namespace monitoring --label release=kube-prometheus-stack | kubectl apply --server-side -f -\n\n"
        "  otel-ctx dashboards export ./k8s -k grafanadashboard --instance-selector dashboards=grafana\n\n"
        "  otel-ctx dashboards export ./slos --format sloth   # then: sloth generate (printed)\n\n"
        "  otel-ctx dashboards export - --format sloth-k8s -n monitoring | kubectl apply -f -\n\n"
        "  otel-ctx dashboards export ./slos --format openslo --objective dispute=0.95"
    )
)
def export(
    out: _ExportOutOption,
    force: _ForceOption = False,
    slo_format: _FormatOption = None,
    kubernetes: _KubernetesOption = None,
    source: _SourceOption = None,
    namespace: _NamespaceOption = None,
    labels: _LabelsOption = None,
    sidecar_label: _SidecarLabelOption = None,
    instance_selector: _InstanceSelectorOption = None,
    folder: _ExportFolderOption = None,
    names: NamesOption = Names.underscore,
    backend: BackendOption = Backend.prometheus,
    slo_config: SloConfigOption = None,
    objective: ObjectiveOption = None,
) -> None:
    """Write the shipped dashboards, alert rules (with their promtool tests) and Collector config,
    or with ``--kubernetes`` the same dashboards and rules as Kubernetes objects, or with
    ``--format`` the SLOs for Sloth or an OpenSLO tool.

    They are the files the package was built with, so no extra is needed: provision
    ``dashboards/*.json`` in Grafana, load ``dashboards/alerts.yml`` into Prometheus, run the
    OpenTelemetry Collector with ``otelcol.yaml``. To change URLs or thresholds, regenerate
    with ``otel-ctx dashboards build`` (needs the ``dashboards`` extra). The Kubernetes
    manifests need the extra too (PyYAML writes them), as does ``--names utf8``: the shipped
    files rewritten for a Prometheus that keeps OpenTelemetry's names, and ``--backend
    victoriametrics``: the dashboards and rules generated for VictoriaMetrics and vmalert (with
    the default settings, as shipped; no promtool tests, which are Prometheus's). With
    ``--slo-config``/``--objective`` the dashboards, rules and error-budget tests are generated
    for those objectives (the extra again).
    """
    if slo_format is not None:
        # The SLOs for another tool: of the options above, the objectives, names, backend and
        # (for Sloth's Kubernetes objects) namespace and labels apply.
        if kubernetes:
            _fail("export", "--format writes SLOs and --kubernetes dashboards and rules: pass one")
        if source is not None or sidecar_label is not None or instance_selector or folder is not None:
            _fail("export", "of the Kubernetes options --format takes --namespace and --label only")
        _check_target("export", names, backend)
        _export_slos(
            out,
            force,
            slo_format,
            names=names.value,
            backend=backend.value,
            objectives=_objectives("export", slo_config, objective),
            namespace=namespace,
            labels=labels or [],
        )
        return
    _check_target("export", names, backend)
    objectives = _objectives("export", slo_config, objective)
    if kubernetes and objectives is not None:
        _fail(
            "export",
            "--kubernetes writes the shipped objectives; for others: otel-ctx dashboards build "
            "--out DIR --objective ..., then export --kubernetes ... --from DIR",
        )
    if kubernetes:
        _export_kubernetes(
            out,
            force,
            names=names.value,
            backend=backend.value,
            kinds=list(dict.fromkeys(kind.value for kind in kubernetes)),
            source=source,
            namespace=namespace,
            labels=labels or [],
            sidecar_label=sidecar_label,
            instance_selector=instance_selector or [],
            folder=folder,
        )
        return
    given = [
        name
        for name, value in zip(
            _KUBERNETES_ONLY, (source, namespace, labels, sidecar_label, instance_selector, folder)
        )
        if value is not None
    ]
    if given:
        _fail("export", f"{given[0]} shapes the Kubernetes manifests: pass --kubernetes KIND too")
    _export_files(out, force, names.value, backend.value, objectives)


def _export_files(
    out: Path, force: bool, names: str, backend: str, objectives: tuple[Objective, ...] | None = None
) -> None:
    """Write the shipped files (or those generated for ``names`` and ``backend``) into ``out``,
    refusing to overwrite earlier copies unless ``force``."""
    if str(out) == "-":
        _fail("export", "- (stdout) is for --kubernetes manifests; give a directory")
    if out.exists() and not out.is_dir():
        _fail("export", f"{out} exists and is not a directory")
    contents = _export_contents(names, backend, objectives)
    existing = [name for name in contents if (out / name).exists()]
    if existing and not force:
        _fail(
            "export",
            f"{len(existing)} file(s) already in {out} ({existing[0]}, ...); pass --force",
        )
    written = []
    try:
        for name, data in contents.items():
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.append(target)
    except OSError as exc:
        _fail("export", f"cannot write to {out}: {exc.strerror or exc}")
    console = Console()
    for path in written:
        console.print(f"  {path}")
    console.print(f"{len(written)} files written to {out}")


def _export_contents(
    names: str, backend: str, objectives: tuple[Objective, ...] | None = None
) -> dict[str, bytes]:
    """Export-relative path -> bytes: the shipped files, or for other names or backend the
    dashboards and rules generated for them with the default settings (what the shipped ones
    are), the promtool tests rewritten as the rules are (VictoriaMetrics gets none)."""
    from otel_ctx import artefacts

    shipped = {name: entry.read_bytes() for name, entry in artefacts.files().items()}
    if names == Names.underscore.value and backend == Backend.prometheus.value and objectives is None:
        return shipped
    boards, rules = _generated(names, backend, objectives)
    from otel_ctx.grafana import _alerts as alerts
    from otel_ctx.grafana import _slo_tests as slo_tests

    prefix = f"{artefacts.DASHBOARDS_DIR}/"
    made = {prefix + name: text for name, text in boards.items()}
    made[prefix + alerts.RULES_FILENAME] = rules
    if backend != Backend.prometheus.value:
        kept = {name: data for name, data in shipped.items() if not name.startswith(prefix)}
        return {**{name: text.encode("utf-8") for name, text in made.items()}, **kept}
    tests = prefix + alerts.RULES_FILENAME.replace(".yml", ".test.yml")
    made[tests] = alerts.rule_tests(shipped[tests].decode("utf-8"), names)
    made[prefix + slo_tests.TESTS_FILENAME] = slo_tests.render(_settings(objectives), names)
    return {name: made[name].encode("utf-8") if name in made else data for name, data in shipped.items()}


def _settings(objectives: tuple[Objective, ...] | None) -> AlertSettings:
    """The default settings (as the package ships them), with ``objectives`` if given."""
    from otel_ctx.grafana import _alerts as alerts

    if objectives is None:
        return alerts.AlertSettings()
    return alerts.AlertSettings(objectives=objectives)


def _generated(
    names: str, backend: str, objectives: tuple[Objective, ...] | None = None
) -> tuple[dict[str, str], str]:
    """The dashboards (file name -> JSON) and the rule file's text for ``names`` and ``backend``,
    with the default settings (as the package ships them) and ``objectives``, generated (needs
    the extra)."""
    grafana = _grafana("export")
    from otel_ctx.grafana import _alerts as alerts

    settings = _settings(objectives)
    models = grafana.build_dashboards(settings, names, backend)
    boards = {name: grafana.render(model) for name, model in models.items()}
    return boards, alerts.render(settings, names, backend)


def _renamed(boards: dict[str, str], rules: str, names: str) -> tuple[dict[str, str], str]:
    """A build directory's dashboard texts (file name -> JSON) and rule file rewritten for ``names``."""
    import json

    import yaml

    from otel_ctx.grafana import _alerts as alerts
    from otel_ctx.grafana import _naming as naming
    from otel_ctx.grafana import render

    if names == Names.underscore.value:
        return boards, rules
    try:
        boards = {name: render(naming.dashboard(json.loads(text))) for name, text in boards.items()}
    except (ValueError, naming.NamingError) as exc:
        _fail("export", f"cannot rewrite the dashboards for {names} names: {exc}")
    try:
        return boards, alerts.dump(naming.rules(yaml.safe_load(rules), names))
    except (yaml.YAMLError, ValueError, KeyError, TypeError) as exc:
        _fail("export", f"cannot rewrite the alert rules for {names} names: {exc}")


def _read_build(source: Path) -> tuple[dict[str, str], str]:
    """The dashboards (file name -> JSON text) and the alert rules' text of a build directory."""
    from otel_ctx.grafana import _alerts as alerts

    if not source.is_dir():
        _fail("export", f"--from {source} is not a directory")
    rules = source / alerts.RULES_FILENAME
    boards_found = sorted(source.glob("*.json"))
    if not boards_found or not rules.is_file():
        _fail(
            "export",
            f"--from {source} holds no dashboards/{alerts.RULES_FILENAME}; "
            f"write one with: otel-ctx dashboards build --out {source}",
        )
    try:
        return {p.name: p.read_text(encoding="utf-8") for p in boards_found}, rules.read_text(
            encoding="utf-8"
        )
    except (OSError, UnicodeDecodeError) as exc:
        _fail("export", f"cannot read --from {source}: {exc}")


def _export_kubernetes(
    out: Path,
    force: bool,
    *,
    names: str,
    backend: str,
    kinds: list[str],
    source: Path | None,
    namespace: str | None,
    labels: list[str],
    sidecar_label: str | None,
    instance_selector: list[str],
    folder: str | None,
) -> None:
    _grafana("export")
    from otel_ctx.grafana import _kubernetes as k8s

    to_stdout = str(out) == "-"
    if not to_stdout and out.exists() and not out.is_dir():
        _fail("export", f"{out} exists and is not a directory")
    try:
        options = k8s.Options(
            namespace=namespace,
            labels=dict(k8s.parse_label(item, "--label") for item in labels),
            sidecar_label=(
                k8s.parse_label(sidecar_label, "--sidecar-label")
                if sidecar_label is not None
                else k8s.SIDECAR_LABEL
            ),
            instance_selector=(
                dict(k8s.parse_label(item, "--instance-selector") for item in instance_selector)
                or dict([k8s.INSTANCE_SELECTOR])
            ),
            folder=k8s.FOLDER if folder is None else (folder or None),
        )
        if source is None:
            boards, rules = _generated(names, backend)
        else:
            boards, rules = _renamed(*_read_build(source), names)
        objects = {kind: k8s.manifests(kind, boards, rules, options) for kind in kinds}
    except k8s.KubernetesError as exc:
        _fail("export", str(exc))
    documents = {kind: k8s.dump(found) for kind, found in objects.items()}
    if to_stdout:
        typer.echo("".join(documents.values()), nl=False)
        return
    targets = {kind: out / k8s.FILENAMES[kind] for kind in kinds}
    existing = [path.name for path in targets.values() if path.exists()]
    if existing and not force:
        _fail("export", f"{existing[0]} is already in {out}; pass --force")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for kind, path in targets.items():
            path.write_text(documents[kind], encoding="utf-8")
    except OSError as exc:
        _fail("export", f"cannot write to {out}: {exc.strerror or exc}")
    console = Console()
    for kind, path in targets.items():
        count = len(objects[kind])
        console.print(f"  {path} ({count} {kind}{'s' if count != 1 else ''})")
    where = f" in namespace {namespace}" if namespace else ""
    console.print(f"{len(targets)} manifest file(s) written to {out}{where}")
    console.print(f"Apply with: kubectl apply --server-side -f {out}")


def _export_slos(
    out: Path,
    force: bool,
    slo_format: SloFormat,
    *,
    names: str,
    backend: str,
    objectives: tuple[Objective, ...] | None,
    namespace: str | None,
    labels: list[str],
) -> None:
    """Write the SLOs for Sloth or OpenSLO: into ``out``, or (but Sloth's specs, which come with
    their alert windows) to stdout for ``-``."""
    _grafana("export")
    from otel_ctx.grafana import _alerts as alerts
    from otel_ctx.grafana import _kubernetes as k8s
    from otel_ctx.grafana import _slo as slo
    from otel_ctx.grafana import _slo_export as slo_export

    if slo_format is not SloFormat.sloth_k8s and (namespace is not None or labels):
        _fail("export", "--namespace and --label shape Kubernetes objects: --format sloth-k8s")
    to_stdout = str(out) == "-"
    if to_stdout and slo_format is SloFormat.sloth:
        _fail("export", "--format sloth writes specs and their alert windows: give a directory")
    if not to_stdout and out.exists() and not out.is_dir():
        _fail("export", f"{out} exists and is not a directory")
    runbook = alerts.DEFAULT_SETTINGS.runbook_url
    try:
        table = slo.DEFAULT_OBJECTIVES if objectives is None else objectives
        if slo_format is SloFormat.sloth:
            files = slo_export.sloth_files(table, names, backend, runbook)
        elif slo_format is SloFormat.sloth_k8s:
            options = k8s.Options(
                namespace=namespace, labels=dict(k8s.parse_label(item, "--label") for item in labels)
            )
            objects = slo_export.prometheus_service_levels(table, options, names, backend, runbook)
            files = {_SLO_FILES[slo_format]: slo_export.dump_all(objects)}
        else:
            files = {_SLO_FILES[slo_format]: slo_export.dump_all(slo_export.openslo(table, names, backend))}
    except (ValueError, k8s.KubernetesError) as exc:
        _fail("export", str(exc))
    if to_stdout:
        typer.echo("".join(files.values()), nl=False)
        return
    existing = [name for name in files if (out / name).exists()]
    if existing and not force:
        _fail("export", f"{existing[0]} is already in {out}; pass --force")
    try:
        for name, text in files.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail("export", f"cannot write to {out}: {exc.strerror or exc}")
    console = Console()
    for name in files:
        console.print(f"  {out / name}")
    console.print(f"{len(table)} SLOs written to {out}")
    if slo_format is SloFormat.sloth:
        for window in slo_export.windows_of(table):
            spec = out / slo_export.sloth_filename(window)
            console.print(
                f"Generate the rules with: sloth generate -i {spec} --default-slo-period {window} "
                f"--slo-period-windows-path {out / slo_export.WINDOWS_DIR} -o {out}/sloth-rules-{window}.yml",
                soft_wrap=True,
            )
    elif slo_format is SloFormat.sloth_k8s:
        console.print(
            "Run the Sloth controller with --default-slo-period and --slo-period-windows-path "
            f"(export --format sloth writes the windows), then: kubectl apply -f {out}",
            soft_wrap=True,
        )


def _basic_auth(user: str | None) -> tuple[str, str] | None:
    if user is None:
        return None
    name, sep, password = user.partition(":")
    if not sep or not name:
        _fail("push", "--user takes USER:PASSWORD")
    return name, password


@app.command(
    epilog=(
        "Examples:\n\n"
        "  GRAFANA_URL=https://grafana.example.com GRAFANA_TOKEN=glsa_... otel-ctx dashboards push\n\n"
        "  otel-ctx dashboards push --url http://localhost:3000 --user admin:$GRAFANA_PASSWORD\n\n"
        "  otel-ctx dashboards push --folder 'LLM agents' --datasource-uid prometheus-prod\n\n"
        "  otel-ctx dashboards push --url http://localhost:3000 --names utf8\n\n"
        "  otel-ctx dashboards push --url http://localhost:3000 --backend victoriametrics"
    )
)
def push(
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="GRAFANA_URL", help="Grafana's root URL, e.g. http://localhost:3000."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="GRAFANA_TOKEN",
            help="Service-account token (Editor role). Never printed.",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", help="Basic auth as USER:PASSWORD instead of a token."),
    ] = None,
    folder: Annotated[str, typer.Option("--folder", help="Folder title, created if missing.")] = "otel-ctx",
    datasource: Annotated[
        str, typer.Option("--datasource", help="Name of the Prometheus data source the dashboards open on.")
    ] = "Prometheus",
    datasource_uid: Annotated[
        str | None, typer.Option("--datasource-uid", help="Or its uid (wins over --datasource).")
    ] = None,
    ca_cert: Annotated[
        Path | None, typer.Option("--ca-cert", help="CA bundle to verify Grafana's TLS certificate with.")
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Do not verify Grafana's TLS certificate.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds the whole push may take (every API call included).", min=0.1),
    ] = 10.0,
    names: NamesOption = Names.underscore,
    backend: BackendOption = Backend.prometheus,
) -> None:
    """Upload every dashboard to a Grafana, into a folder, overwriting earlier versions."""
    _check_target("push", names, backend)
    if not url:
        _fail("push", "no Grafana URL: pass --url or set GRAFANA_URL")
    if token and user:
        _fail("push", "pass either --token (GRAFANA_TOKEN) or --user, not both")
    if ca_cert is not None and insecure:
        _fail("push", "--ca-cert and --insecure contradict each other")
    if ca_cert is not None and not ca_cert.is_file():
        _fail("push", f"--ca-cert {ca_cert} is not a file")
    grafana = _grafana("push")
    from otel_ctx.grafana import _push as pusher

    basic = _basic_auth(user)
    if not token and basic is None and "@" not in url.split("//", 1)[-1].split("/", 1)[0]:
        _fail("push", "no credentials: pass --token (or set GRAFANA_TOKEN) or --user USER:PASSWORD")
    try:
        target = pusher.GrafanaTarget(
            url=url,
            token=token or None,
            basic_auth=basic,
            verify=False if insecure else (str(ca_cert) if ca_cert is not None else True),
            timeout=timeout,
        )
    except pusher.PushError as exc:
        _fail("push", str(exc))
    try:
        result = pusher.push(
            target,
            grafana.build_dashboards(names=names.value, backend=backend.value),
            folder=folder,
            datasource=None if datasource_uid else datasource,
            datasource_uid=datasource_uid,
        )
    except pusher.PushError as exc:
        _fail("push", str(exc), EXIT_USAGE if exc.kind in ("usage", "response") else EXIT_FAILED)
    _print_pushed(target, result)


def _print_pushed(target: GrafanaTarget, result: PushResult) -> None:
    """Where the dashboards went: the Grafana, its data source and folder, then each dashboard's URL."""
    console = Console()
    console.print(
        f"Grafana {result.grafana_version or '(version unknown)'} at {target.display_url}: "
        f"data source [bold]{result.datasource_name}[/bold] (uid {result.datasource_uid}) found; "
        f"folder [bold]{result.folder_title}[/bold] "
        f"{'created' if result.folder_created else 'reused'} (uid {result.folder_uid})"
    )
    table = Table(title="Dashboards pushed", title_justify="left")
    table.add_column("title")
    table.add_column("uid")
    table.add_column("version", justify="right")
    table.add_column("url", overflow="fold")
    for board in result.dashboards:
        table.add_row(board.title, board.uid, str(board.version or ""), board.url)
    console.print(table)
