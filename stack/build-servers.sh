#!/usr/bin/env bash
# Build the stack's Go servers from their Go modules, at the versions docker-compose.yml pins,
# so the end-to-end tests run the same Collector, Jaeger and Prometheus an SRE gets from compose:
#
#   otelcol  the OpenTelemetry Collector, a custom distribution made by the Collector's own
#            builder (go.opentelemetry.io/collector/cmd/builder) from stack/otelcol-builder.yaml,
#            which lists exactly the components stack/otelcol.yaml uses;
#   jaeger   Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger; the stack runs it with
#            in-memory storage, stack/jaeger.yaml);
#   prometheus, promtool
#            Prometheus 3 and its rule/config checker (github.com/prometheus/prometheus/cmd/...),
#            built in the module's own directory so its go.mod's replace and exclude directives
#            hold, as in an upstream build. The module carries no compiled web UI (the release
#            build embeds it with the builtinassets tag); the tests use only the HTTP API.
#   victoriametrics, vmalert
#            VictoriaMetrics single-node and its rule evaluator
#            (github.com/VictoriaMetrics/VictoriaMetrics/app/...), at VICTORIAMETRICS_VERSION
#            below (the compose stack runs Prometheus; docs/sre-guide.md, "VictoriaMetrics"),
#            built pure Go (CGO_ENABLED=0) in the module's own directory, as the project's
#            `make victoria-metrics-pure` does.
#   sloth    Sloth (github.com/slok/sloth/cmd/sloth), at SLOTH_VERSION below: the SLO generator
#            the exported Sloth spec is validated and turned into rules with, so the tests can
#            check its rules alert as otel-ctx's own do (docs/sre-guide.md, "Handing the SLOs to
#            Sloth or Pyrra"); built pure Go as its own scripts/build/bin/build-raw.sh does.
#   oslo     OpenSLO's validator (github.com/OpenSLO/oslo/cmd/oslo), at OSLO_VERSION below (the
#            version Sloth itself reads OpenSLO with), which the exported OpenSLO documents are
#            checked with; built in its module's directory, as its Makefile does.
#
# Everything comes through the Go module proxy. Builds land in a cache folder outside the
# work tree (a fresh clone on the same machine finds them) keyed on the version, the
# manifest and the Go toolchain, so a second run builds nothing. Go's module and build
# caches live there too. A cold build of all three takes tens of minutes on a 2-core machine
# (measured figures: README, "The stack: docker compose up").
#
#   stack/build-servers.sh           build what is missing, then print name=path lines
#   stack/build-servers.sh --paths   print name=path lines of what is built; build nothing
#                                    (exit 1 when something is missing)
#   stack/build-servers.sh NAME...   build only these (otelcol, jaeger, prometheus, promtool,
#                                    victoriametrics, vmalert, sloth, oslo), then print their lines
#
# Each build holds a lock of its own in the cache, so a run that builds one server waits only
# for another run building that same server, never for a long build of the others.
#
# OTEL_CTX_SERVER_CACHE  the cache folder (default ~/.cache/otel-ctx/servers)
# OTEL_CTX_GOPROXY       the module proxy (default https://proxy.golang.org)
# Under CI=true a failed build fails; elsewhere it warns, and the tests that need the
# servers skip.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NAME=build-servers
# shellcheck source=stack/go-env.sh
. "$ROOT/stack/go-env.sh"
MANIFEST="$ROOT/stack/otelcol-builder.yaml"
COMPOSE="$ROOT/docker-compose.yml"
# The jaeger build's module file: Jaeger's own replace directive, which a module that
# depends on Jaeger must repeat (Go ignores a dependency's replaces).
JAEGER_REPLACES='replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0'
# The one pin of VictoriaMetrics and vmalert (one Go module, one release tag for both).
VICTORIAMETRICS_VERSION=1.151.0
# The one pin of Sloth.
SLOTH_VERSION=0.16.0
# The one pin of oslo: the OpenSLO module Sloth $SLOTH_VERSION requires.
OSLO_VERSION=0.12.0

pinned() { # the tag docker-compose.yml pins for an image, without a leading v
    sed -n "s#^ *image: $1:v\\{0,1\\}\\([0-9][0-9.]*\\) *\$#\\1#p" "$COMPOSE"
}

collector_version="$(pinned otel/opentelemetry-collector-contrib)"
jaeger_version="$(pinned jaegertracing/jaeger)"
prometheus_version="$(pinned prom/prometheus)"
[ -n "$collector_version" ] || die "no otel/opentelemetry-collector-contrib:<version> image in $COMPOSE"
[ -n "$jaeger_version" ] || die "no jaegertracing/jaeger:<version> image in $COMPOSE"
[ -n "$prometheus_version" ] || die "no prom/prometheus:v<version> image in $COMPOSE"
grep -q "^  version: $collector_version\$" "$MANIFEST" ||
    die "$MANIFEST: dist.version must be $collector_version, the Collector version $COMPOSE pins"

# Jaeger tags its v2 server's Go module as v1.<minor + 63>: release 2.13.0 is module v1.76.0.
case "$jaeger_version" in
    2.13.0) jaeger_module=v1.76.0 ;;
    *) die "no Go module version known for Jaeger $jaeger_version: add it to this table" ;;
esac

# Prometheus tags release 3.N.M's Go module as v0.3NN.M: release 3.5.0 is module v0.305.0.
case "$prometheus_version" in
    3.*.*)
        IFS=. read -r _ prometheus_minor prometheus_patch <<<"$prometheus_version"
        prometheus_module="$(printf 'v0.3%02d.%d' "$prometheus_minor" "$prometheus_patch")"
        ;;
    *) die "Prometheus $prometheus_version: only 3.x releases map onto a Go module version (v0.3NN.M)" ;;
esac
# netgo as in the release build; builtinassets needs the compiled UI, which the module lacks.
PROMETHEUS_TAGS=netgo

otelcol_dir="$CACHE/otelcol-$collector_version-$(key "$collector_version" "$(cat "$MANIFEST")")"
jaeger_dir="$CACHE/jaeger-$jaeger_version-$(key "$jaeger_version" "$jaeger_module" "$JAEGER_REPLACES")"
OTELCOL="$otelcol_dir/otelcol-otel-ctx"
JAEGER="$jaeger_dir/jaeger"
prometheus_dir="$CACHE/prometheus-$prometheus_version-$(key "$prometheus_version" "$prometheus_module" "$PROMETHEUS_TAGS")"
PROMETHEUS="$prometheus_dir/prometheus"
PROMTOOL="$prometheus_dir/promtool"
victoriametrics_module="v$VICTORIAMETRICS_VERSION"
victoriametrics_dir="$CACHE/victoriametrics-$VICTORIAMETRICS_VERSION-$(key "$VICTORIAMETRICS_VERSION" "$victoriametrics_module" pure)"
VICTORIAMETRICS="$victoriametrics_dir/victoria-metrics"
VMALERT="$victoriametrics_dir/vmalert"
sloth_module="v$SLOTH_VERSION"
sloth_dir="$CACHE/sloth-$SLOTH_VERSION-$(key "$SLOTH_VERSION" "$sloth_module" pure)"
SLOTH="$sloth_dir/sloth"
oslo_module="v$OSLO_VERSION"
oslo_dir="$CACHE/oslo-$OSLO_VERSION-$(key "$OSLO_VERSION" "$oslo_module")"
OSLO="$oslo_dir/oslo"

print_paths() {
    echo "otelcol=$OTELCOL"
    echo "jaeger=$JAEGER"
    echo "prometheus=$PROMETHEUS"
    echo "promtool=$PROMTOOL"
    echo "victoriametrics=$VICTORIAMETRICS"
    echo "vmalert=$VMALERT"
    echo "sloth=$SLOTH"
    echo "oslo=$OSLO"
}

all_built() {
    [ -x "$OTELCOL" ] && [ -x "$JAEGER" ] && [ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ] &&
        [ -x "$VICTORIAMETRICS" ] && [ -x "$VMALERT" ] && [ -x "$SLOTH" ] && [ -x "$OSLO" ]
}

if [ "${1:-}" = "--paths" ]; then
    print_paths
    all_built
    exit
fi

# Which builds to run: all of them, or the ones that make the names given.
want_otelcol=1 want_jaeger=1 want_prometheus=1 want_victoriametrics=1 want_sloth=1 want_oslo=1
if [ $# -gt 0 ]; then
    want_otelcol=0 want_jaeger=0 want_prometheus=0 want_victoriametrics=0 want_sloth=0 want_oslo=0
    for name in "$@"; do
        case "$name" in
            otelcol | jaeger | sloth | oslo) eval "want_$name=1" ;;
            prometheus | promtool) want_prometheus=1 ;;
            victoriametrics | vmalert) want_victoriametrics=1 ;;
            *) die "usage: $0 [--paths | NAME...] (NAME: otelcol jaeger prometheus promtool victoriametrics vmalert sloth oslo)" ;;
        esac
    done
fi

print_wanted() {
    print_paths | while IFS='=' read -r name _; do
        case "$name" in
            promtool) [ "$want_prometheus" = 1 ] ;;
            vmalert) [ "$want_victoriametrics" = 1 ] ;;
            *) [ "$(eval "echo \$want_$name")" = 1 ] ;;
        esac && echo "$name=$(print_paths | sed -n "s/^$name=//p")"
    done
}

if [ $# -eq 0 ] && all_built; then
    echo "build-servers: Collector $collector_version, Jaeger $jaeger_version, Prometheus" \
        "$prometheus_version, VictoriaMetrics $VICTORIAMETRICS_VERSION, Sloth $SLOTH_VERSION and oslo $OSLO_VERSION" \
        "already built in $CACHE" >&2
    print_paths
    exit 0
fi

require_go "the servers are built from their Go modules" "the Collector/Jaeger/Prometheus/VictoriaMetrics tests"
go_env

build_otelcol() {
    local builder_dir="$CACHE/tools/builder-$collector_version" work
    if [ ! -x "$builder_dir/builder" ]; then
        GOBIN="$builder_dir" "$GO" install "go.opentelemetry.io/collector/cmd/builder@v$collector_version"
    fi
    work="$(mktemp -d "$CACHE/.otelcol-build.XXXXXX")"
    # The manifest as committed, writing its sources and binary into the scratch folder.
    sed "s#^\\(  output_path:\\).*#\\1 $work/src#" "$MANIFEST" >"$work/manifest.yaml"
    "$builder_dir/builder" --config "$work/manifest.yaml"
    mkdir -p "$otelcol_dir"
    mv "$work/src/otelcol-otel-ctx" "$OTELCOL.tmp" && mv "$OTELCOL.tmp" "$OTELCOL"
    rm -rf "$work"
}

build_jaeger() {
    local work
    work="$(mktemp -d "$CACHE/.jaeger-build.XXXXXX")"
    cat >"$work/go.mod" <<EOF
module otel-ctx.local/jaeger-build

go 1.24

require github.com/jaegertracing/jaeger $jaeger_module

$JAEGER_REPLACES
EOF
    local version_pkg=github.com/jaegertracing/jaeger/internal/version
    (
        cd "$work"
        "$GO" get "github.com/jaegertracing/jaeger/cmd/jaeger@$jaeger_module"
        "$GO" build -trimpath -ldflags "-s -w -X $version_pkg.latestVersion=v$jaeger_version" \
            -o "$work/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger
    )
    mkdir -p "$jaeger_dir"
    mv "$work/jaeger" "$JAEGER.tmp" && mv "$JAEGER.tmp" "$JAEGER"
    rm -rf "$work"
}

build_prometheus() {
    local work src version_pkg=github.com/prometheus/common/version
    work="$(mktemp -d "$CACHE/.prometheus-build.XXXXXX")"
    src="$(module_dir "github.com/prometheus/prometheus@$prometheus_module")"
    [ -d "$src" ] || { echo "no source directory for prometheus@$prometheus_module" >&2; exit 1; }
    (
        cd "$src"
        for cmd in prometheus promtool; do
            CGO_ENABLED=0 "$GO" build -trimpath -tags "$PROMETHEUS_TAGS" \
                -ldflags "-s -w -X $version_pkg.Version=$prometheus_version -X $version_pkg.Branch=HEAD" \
                -o "$work/$cmd" "./cmd/$cmd"
        done
    )
    mkdir -p "$prometheus_dir"
    mv "$work/promtool" "$PROMTOOL.tmp" && mv "$PROMTOOL.tmp" "$PROMTOOL"
    # prometheus last: all_built looks at both.
    mv "$work/prometheus" "$PROMETHEUS.tmp" && mv "$PROMETHEUS.tmp" "$PROMETHEUS"
    rm -rf "$work"
}

build_victoriametrics() {
    local work src buildinfo=github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version
    work="$(mktemp -d "$CACHE/.victoriametrics-build.XXXXXX")"
    src="$(module_dir "github.com/VictoriaMetrics/VictoriaMetrics@$victoriametrics_module")"
    [ -d "$src" ] || { echo "no source directory for VictoriaMetrics@$victoriametrics_module" >&2; exit 1; }
    (
        cd "$src"
        for app in victoria-metrics vmalert; do
            CGO_ENABLED=0 "$GO" build -trimpath \
                -ldflags "-s -w -X $buildinfo=$app-$victoriametrics_module" \
                -o "$work/$app" "./app/$app"
        done
    )
    mkdir -p "$victoriametrics_dir"
    mv "$work/vmalert" "$VMALERT.tmp" && mv "$VMALERT.tmp" "$VMALERT"
    # victoria-metrics last: all_built looks at both.
    mv "$work/victoria-metrics" "$VICTORIAMETRICS.tmp" && mv "$VICTORIAMETRICS.tmp" "$VICTORIAMETRICS"
    rm -rf "$work"
}

build_sloth() {
    local work
    work="$(mktemp -d "$CACHE/.sloth-build.XXXXXX")"
    CGO_ENABLED=0 GOBIN="$work" "$GO" install -trimpath \
        -ldflags "-s -w -X github.com/slok/sloth/internal/info.Version=$sloth_module" \
        "github.com/slok/sloth/cmd/sloth@$sloth_module"
    mkdir -p "$sloth_dir"
    mv "$work/sloth" "$SLOTH.tmp" && mv "$SLOTH.tmp" "$SLOTH"
    rm -rf "$work"
}

build_oslo() {
    local work src
    work="$(mktemp -d "$CACHE/.oslo-build.XXXXXX")"
    src="$(module_dir "github.com/OpenSLO/oslo@$oslo_module")"
    [ -d "$src" ] || { echo "no source directory for oslo@$oslo_module" >&2; exit 1; }
    (
        cd "$src"
        CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=$oslo_module" \
            -o "$work/oslo" ./cmd/oslo
    )
    mkdir -p "$oslo_dir"
    mv "$work/oslo" "$OSLO.tmp" && mv "$OSLO.tmp" "$OSLO"
    rm -rf "$work"
}

timed() { # name, function: run it, say how long it took
    local started=$SECONDS
    echo "build-servers: building $1 (first time: tens of minutes on 2 cores)..." >&2
    # A bash of its own, so `set -e` holds: bash ignores it in a function called as a condition.
    if ! bash -euo pipefail -c "$(declare -f module_dir "$2"); $2" >"$CACHE/$1.log" 2>&1; then
        tail -n 40 "$CACHE/$1.log" >&2
        return 1
    fi
    echo "build-servers: built $1 in $((SECONDS - started)) s (log: $CACHE/$1.log)" >&2
}

# What the build functions read, for the bash each runs in.
export CACHE MANIFEST GO collector_version otelcol_dir OTELCOL
export jaeger_version jaeger_module JAEGER_REPLACES jaeger_dir JAEGER
export prometheus_version prometheus_module PROMETHEUS_TAGS prometheus_dir PROMETHEUS PROMTOOL
export victoriametrics_module victoriametrics_dir VICTORIAMETRICS VMALERT
export sloth_module sloth_dir SLOTH oslo_module oslo_dir OSLO

locked() { # name, function, binaries...: build them unless built, one build per name at a time
    local name=$1 build=$2
    shift 2
    (
        # make and a CI run on the same machine may both start this build: the second waits,
        # then finds the binaries built.
        exec 9>"$CACHE/.$name.lock"
        flock 9
        for binary in "$@"; do [ -x "$binary" ] || { timed "$name" "$build"; exit; }; done
    )
}

failed=0
[ "$want_otelcol" = 0 ] || locked "otelcol-$collector_version" build_otelcol "$OTELCOL" || failed=1
[ "$want_jaeger" = 0 ] || locked "jaeger-$jaeger_version" build_jaeger "$JAEGER" || failed=1
[ "$want_prometheus" = 0 ] ||
    locked "prometheus-$prometheus_version" build_prometheus "$PROMETHEUS" "$PROMTOOL" || failed=1
[ "$want_victoriametrics" = 0 ] ||
    locked "victoriametrics-$VICTORIAMETRICS_VERSION" build_victoriametrics "$VICTORIAMETRICS" "$VMALERT" ||
    failed=1
[ "$want_sloth" = 0 ] || locked "sloth-$SLOTH_VERSION" build_sloth "$SLOTH" || failed=1
[ "$want_oslo" = 0 ] || locked "oslo-$OSLO_VERSION" build_oslo "$OSLO" || failed=1
if [ "$failed" = 1 ]; then
    [ "$in_ci" = 1 ] && die "a server build failed (CI=true: the end-to-end tests need them all)"
    echo "build-servers: WARNING: a server build failed; the tests that need it will skip" >&2
    exit 0
fi
print_wanted
