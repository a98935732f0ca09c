# Sourced (not run) by stack/build-servers.sh and stack/build-kubeconform.sh: where their cache
# lies, which Go builds, how a build is keyed, and the Go environment every build runs in, so the
# two scripts fill one cache the same way. The sourcing script sets NAME (its name in messages).

# A CI run may start without HOME; the cache must still be the one the last build filled.
HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE="${OTEL_CTX_SERVER_CACHE:-$HOME/.cache/otel-ctx/servers}"

case "${CI:-}" in 1 | true | TRUE | True | yes) in_ci=1 ;; *) in_ci=0 ;; esac

die() {
    echo "$NAME: $*" >&2
    exit 1
}

find_go() {
    if command -v go >/dev/null 2>&1; then
        command -v go
    elif [ -x /usr/local/go/bin/go ]; then
        echo /usr/local/go/bin/go
    fi
}
GO="$(find_go)"

key() { # a short hash of the inputs that make a build different
    { printf '%s\n' "$@"; [ -z "$GO" ] || "$GO" version; } | sha256sum | cut -c1-12
}

# No Go: under CI=true a failure; elsewhere a warning, and the script stops (the tests that need
# its output skip). $1 says what comes from Go modules, $2 what will skip.
require_go() {
    [ -n "$GO" ] && return 0
    [ "$in_ci" = 1 ] && die "Go is not installed ($1)"
    echo "$NAME: WARNING: Go is not installed ($1); $2 will skip" >&2
    exit 0
}

# Everything through the module proxy, the module and build caches inside the cache folder.
go_env() {
    export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
    export GOPROXY="${OTEL_CTX_GOPROXY:-https://proxy.golang.org}" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
    mkdir -p "$CACHE"
}

module_dir() { # module@version -> its extracted directory in the module cache
    "$GO" mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}
