#!/usr/bin/env bash
# Builds the Schema Registry server of the test stack (stack/registry.sh) from stack/registry/:
# Conduit's schema registry library behind a small main, Go modules pinned by go.mod and go.sum.
#   $STATE/tools/eos-schema-registry
# A stamp holding the hash of the sources and of the Go version makes a second run a no-op.
# Needs Go 1.21 or newer (go.mod asks for 1.24.2: an older go 1.21+ fetches that toolchain as a
# module by itself). Without any go, it installs Debian's golang-go when run as root.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
SRC="$ROOT/stack/registry"
OUT="$STATE/tools/eos-schema-registry"
STAMP="$STATE/tools/.registry-stamp"

# Go may be installed outside PATH (its tarball's default place): use it from there.
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
  PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  echo "build-registry: no Go toolchain; installing Debian's golang-go" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go >/dev/null
fi
command -v go >/dev/null || {
  echo "build-registry: Go 1.21+ is required to build the test Schema Registry: install it (Debian: apt-get install golang-go)" >&2
  exit 1
}
version="$(go env GOVERSION)"  # go1.26.8
minor="$(sed -E 's/^go1\.([0-9]+).*/\1/' <<<"$version")"
if [[ ! "$minor" =~ ^[0-9]+$ ]] || ((minor < 21)); then
  echo "build-registry: $version is too old (Debian bookworm's golang-go is 1.19): Go 1.21+ is required," \
    "as it fetches the toolchain that stack/registry/go.mod names" >&2
  exit 1
fi

want="$( (cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go; echo "$version") | sha256sum | cut -c1-16)"
if [[ -x "$OUT" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
mkdir -p "$(dirname "$OUT")"
# -mod=readonly: the modules are exactly those go.sum pins; nothing is re-resolved here.
(cd "$SRC" && go build -mod=readonly -trimpath -o "$OUT.tmp" .)
mv "$OUT.tmp" "$OUT"
echo "$want" >"$STAMP"
echo "setup: test Schema Registry built into $OUT"
