#!/usr/bin/env bash
# Build kubeconform from its Go module and fetch the schemas the Kubernetes export is checked
# against, so tests/grafana/test_kubernetes.py validates every manifest with no network at test
# time, against the operators' own definitions:
#
#   kubeconform                 github.com/yannh/kubeconform/cmd/kubeconform
#   prometheusrules CRD         the Prometheus Operator's module,
#                               example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
#   grafanadashboards CRD       grafana-operator v5's module,
#                               config/crd/bases/grafana.integreatly.org_grafanadashboards.yaml
#   prometheusservicelevels CRD Sloth's module,
#                               pkg/kubernetes/gen/crd/sloth.slok.dev_prometheusservicelevels.yaml
#                               (the SLOs exported with --format sloth-k8s)
#   core/v1 OpenAPI (ConfigMap) the Kubernetes module's published OpenAPI v3 document,
#                               api/openapi-spec/v3/api__v1_openapi.json (what the API server
#                               serves at /openapi/v3/api/v1)
#
# Everything comes through the Go module proxy, at the versions pinned below, into a cache
# folder outside the work tree keyed on those versions and the Go toolchain, so a second run
# fetches and builds nothing. The test turns each CRD version's openAPIV3Schema, and the
# ConfigMap definition, into the JSON schema files kubeconform reads.
#
#   stack/build-kubeconform.sh           build/fetch what is missing, then print name=path lines
#   stack/build-kubeconform.sh --paths   print name=path lines of what is there; fetch nothing
#                                        (exit 1 when something is missing)
#
# OTEL_CTX_SERVER_CACHE  the cache folder (default ~/.cache/otel-ctx/servers), as stack/build-servers.sh
# OTEL_CTX_GOPROXY       the module proxy (default https://proxy.golang.org)
# Under CI=true a failure fails; elsewhere it warns, and the tests that need these skip.
set -euo pipefail

KUBECONFORM_VERSION=v0.8.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0
GRAFANA_OPERATOR_VERSION=v5.18.0
KUBERNETES_VERSION=v1.35.4
# The Sloth stack/build-servers.sh builds: its one pin, SLOTH_VERSION, read from there.
SLOTH_VERSION="v$(sed -n 's/^SLOTH_VERSION=//p' "$(dirname "$0")/build-servers.sh")"

PROMETHEUS_OPERATOR=github.com/prometheus-operator/prometheus-operator
GRAFANA_OPERATOR=github.com/grafana/grafana-operator/v5
KUBERNETES=k8s.io/kubernetes
SLOTH=github.com/slok/sloth
PROMETHEUSRULE_CRD=example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
GRAFANADASHBOARD_CRD=config/crd/bases/grafana.integreatly.org_grafanadashboards.yaml
CORE_OPENAPI=api/openapi-spec/v3/api__v1_openapi.json
SERVICELEVEL_CRD=pkg/kubernetes/gen/crd/sloth.slok.dev_prometheusservicelevels.yaml

NAME=build-kubeconform
# shellcheck source=stack/go-env.sh
. "$(dirname "$0")/go-env.sh"
dir="$CACHE/kubeconform-$KUBECONFORM_VERSION-$(key "$KUBECONFORM_VERSION" \
    "$PROMETHEUS_OPERATOR_VERSION" "$GRAFANA_OPERATOR_VERSION" "$KUBERNETES_VERSION" "$SLOTH_VERSION")"
KUBECONFORM="$dir/kubeconform"
SOURCES="$dir/sources"
declare -A files=(
    [prometheusrule_crd]="$SOURCES/$(basename "$PROMETHEUSRULE_CRD")"
    [grafanadashboard_crd]="$SOURCES/$(basename "$GRAFANADASHBOARD_CRD")"
    [core_openapi]="$SOURCES/$(basename "$CORE_OPENAPI")"
    [servicelevel_crd]="$SOURCES/$(basename "$SERVICELEVEL_CRD")"
)

print_paths() {
    echo "kubeconform=$KUBECONFORM"
    for name in prometheusrule_crd grafanadashboard_crd core_openapi servicelevel_crd; do echo "$name=${files[$name]}"; done
}

complete() {
    [ -x "$KUBECONFORM" ] || return 1
    for path in "${files[@]}"; do [ -s "$path" ] || return 1; done
}

if [ "${1:-}" = "--paths" ]; then
    print_paths
    complete
    exit
fi
[ $# -eq 0 ] || die "usage: $0 [--paths]"

if complete; then
    echo "build-kubeconform: kubeconform $KUBECONFORM_VERSION and the schemas already in $dir" >&2
    print_paths
    exit 0
fi

require_go "kubeconform and the schemas come from Go modules" "the Kubernetes manifest validation"
go_env

fetch() { # module@version, path in it, destination
    local from
    from="$(module_dir "$1")" || return 1
    if [ -z "$from" ] || [ ! -s "$from/$2" ]; then
        echo "build-kubeconform: $1 has no $2" >&2
        return 1
    fi
    cp "$from/$2" "$3.tmp" && chmod u+w "$3.tmp" && mv "$3.tmp" "$3"
}

build() { # each step checked: `set -e` does not hold in a function run as a condition
    mkdir -p "$SOURCES" || return 1
    if [ ! -x "$KUBECONFORM" ]; then
        GOBIN="$dir" "$GO" install -trimpath -ldflags "-s -w" \
            "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" || return 1
    fi
    fetch "$PROMETHEUS_OPERATOR@$PROMETHEUS_OPERATOR_VERSION" "$PROMETHEUSRULE_CRD" \
        "${files[prometheusrule_crd]}" || return 1
    fetch "$GRAFANA_OPERATOR@$GRAFANA_OPERATOR_VERSION" "$GRAFANADASHBOARD_CRD" \
        "${files[grafanadashboard_crd]}" || return 1
    fetch "$KUBERNETES@$KUBERNETES_VERSION" "$CORE_OPENAPI" "${files[core_openapi]}" || return 1
    fetch "$SLOTH@$SLOTH_VERSION" "$SERVICELEVEL_CRD" "${files[servicelevel_crd]}"
}

# One run at a time per cache (a lock of its own: the servers' build may hold theirs for long).
exec 9>"$CACHE/.kubeconform.lock"
flock 9
started=$SECONDS
echo "build-kubeconform: building kubeconform $KUBECONFORM_VERSION and fetching the schemas..." >&2
if ! (build) >"$CACHE/kubeconform-$KUBECONFORM_VERSION.log" 2>&1; then
    tail -n 40 "$CACHE/kubeconform-$KUBECONFORM_VERSION.log" >&2
    [ "$in_ci" = 1 ] && die "the build failed (CI=true: the Kubernetes export tests need it)"
    echo "build-kubeconform: WARNING: the build failed; the Kubernetes manifest validation will skip" >&2
    exit 0
fi
echo "build-kubeconform: done in $((SECONDS - started)) s (log: $CACHE/kubeconform-$KUBECONFORM_VERSION.log)" >&2
print_paths
