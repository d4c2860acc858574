#!/usr/bin/env bash
# Builds Toxiproxy's server, the TCP fault proxy the network fault tests put between the job and
# the test broker (tests/fixtures/toxiproxy.py), from the Go module proxy at a pinned version:
#   $STATE/tools/toxiproxy-server
# A stamp holding the version and the Go version makes a second run a no-op. Needs Go 1.21+; the
# first build downloads the module and its dependencies (here 5 min on a slow link, 13 s of CPU).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
TOXIPROXY_VERSION="v2.12.0"
OUT="$STATE/tools/toxiproxy-server"
STAMP="$STATE/tools/.toxiproxy-stamp"

if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
  PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || {
  echo "build-toxiproxy: Go 1.21+ is required to build the tests' TCP fault proxy: install it (Debian: apt-get install golang-go)" >&2
  exit 1
}
want="$TOXIPROXY_VERSION $(go env GOVERSION)"
if [[ -x "$OUT" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
bin="$STATE/tools/toxiproxy-build"
rm -rf "$bin"
mkdir -p "$bin"
# The server's package is cmd/server (the binary `server`); a module@version install takes go.sum
# from the module itself, so nothing is resolved beyond what Toxiproxy pinned.
GOBIN="$bin" nice -n 10 go install -trimpath "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
mv "$bin/server" "$OUT"
rm -rf "$bin"
echo "$want" >"$STAMP"
echo "setup: Toxiproxy $TOXIPROXY_VERSION built into $OUT"
