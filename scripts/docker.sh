#!/usr/bin/env bash
# Docker for docker-compose.yaml on a machine that has Debian's packages, the Go module proxy and
# Maven Central but maybe no image registry (what `make compose-test` runs on):
#   docker.sh install      Docker Engine from Debian (apt docker.io), mmdebstrap, the Compose v2 plugin
#                          built from the Go module proxy (github.com/docker/compose/v2@$COMPOSE_VERSION),
#                          and dockerd started when none answers. Idempotent. Needs root (apt, dockerd):
#                          as another user it says what to run.
#   docker.sh base-image   debian:bookworm-slim, the one base image of docker/*.Dockerfile: kept when
#                          the engine has it, pulled when a registry answers, else a Debian bookworm
#                          root file system made with mmdebstrap (minbase, cached as a tar in the state
#                          folder) and `docker import`ed under that name.
#   docker.sh daemon-stop  stops the dockerd this script started (its pid file), nothing else.
#   docker.sh docker       prints the docker client to use (Debian's, /usr/bin/docker, when present).
# Environment: EOS_STATE_DIR (default ./.state; files in $EOS_STATE_DIR/docker), COMPOSE_VERSION
# (2.40.3), DOCKER_CONFIG (the plugin goes to $DOCKER_CONFIG/cli-plugins, default ~/.docker),
# EOS_DOCKER (the client), EOS_BASE_IMAGE_PULL=0 (never try a registry for the base image).
# dockerd runs at nice 19, so image builds and containers yield the CPU to everything else.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
DIR="$STATE/docker"
COMPOSE_VERSION="${COMPOSE_VERSION:-2.40.3}"
BASE_IMAGE=debian:bookworm-slim
PLUGINS="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"

docker_client() {
  if [[ -n "${EOS_DOCKER:-}" ]]; then echo "$EOS_DOCKER"
  elif [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker
  else command -v docker || echo docker
  fi
}
DOCKER="$(docker_client)"

as_root() {
  [[ "$(id -u)" -eq 0 ]] || { echo "docker.sh: $1 needs root; run: sudo $0 ${2:-install}" >&2; exit 1; }
}

daemon_up() { "$DOCKER" info >/dev/null 2>&1; }

install_packages() {
  local missing=()
  command -v dockerd >/dev/null && [[ -x /usr/bin/docker ]] || missing+=(docker.io)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if ((${#missing[@]})); then
    as_root "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
  DOCKER="$(docker_client)"
}

# Compose v2 from the Go module proxy. `go install` refuses the module (its go.mod has exclude
# directives), so: download the module, copy it out of the read-only module cache, go build ./cmd.
install_compose() {
  if [[ "$("$DOCKER" compose version --short 2>/dev/null || true)" == "$COMPOSE_VERSION" ]]; then
    return 0
  fi
  local go
  go="$(command -v go || echo /usr/local/go/bin/go)"
  [[ -x "$go" ]] || { echo "docker.sh: Go (1.24 or newer) is needed to build Compose $COMPOSE_VERSION" >&2; exit 1; }
  local module="github.com/docker/compose/v2@v$COMPOSE_VERSION" src="$DIR/compose-v$COMPOSE_VERSION" moddir
  echo "docker.sh: building Compose $COMPOSE_VERSION from the Go module proxy (a few minutes)"
  moddir="$(cd /tmp && GOFLAGS=-mod=mod "$go" mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$moddir" ]] || { echo "docker.sh: go mod download $module gave no folder" >&2; exit 1; }
  rm -rf "$src"
  mkdir -p "$DIR" "$PLUGINS"
  cp -r "$moddir" "$src"
  chmod -R u+w "$src"
  (cd "$src" && nice -n 19 "$go" build -trimpath -o "$DIR/docker-compose" \
    -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=v$COMPOSE_VERSION" ./cmd)
  install -m 755 "$DIR/docker-compose" "$PLUGINS/docker-compose"
  rm -rf "$src"
  "$DOCKER" compose version
}

start_daemon() {
  daemon_up && return 0
  as_root "starting dockerd" install
  mkdir -p "$DIR"
  echo "docker.sh: starting dockerd (nice 19; log $DIR/dockerd.log)"
  nohup nice -n 19 dockerd >"$DIR/dockerd.log" 2>&1 &
  echo $! >"$DIR/dockerd.pid"
  local deadline=$((SECONDS + 60))
  until daemon_up; do
    if ((SECONDS > deadline)); then
      echo "docker.sh: dockerd did not answer within 60 s; see $DIR/dockerd.log" >&2
      exit 1
    fi
    sleep 1
  done
  "$DOCKER" version --format 'docker.sh: Docker Engine {{.Server.Version}} up'
}

daemon_stop() {
  local pid
  [[ -f "$DIR/dockerd.pid" ]] || { echo "docker.sh: no dockerd started by this script"; return 0; }
  pid="$(cat "$DIR/dockerd.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 1; done
    echo "docker.sh: dockerd (pid $pid) stopped"
  fi
  rm -f "$DIR/dockerd.pid"
}

base_image() {
  daemon_up || { echo "docker.sh: no Docker daemon answers; run $0 install first" >&2; exit 1; }
  if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "docker.sh: $BASE_IMAGE is there"
    return 0
  fi
  if [[ "${EOS_BASE_IMAGE_PULL:-1}" != 0 ]] && timeout 60 "$DOCKER" pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "docker.sh: $BASE_IMAGE pulled"
    return 0
  fi
  local tar="$DIR/bookworm-slim.tar" partial="$DIR/bookworm-slim.partial.tar"
  if [[ ! -f "$tar" || ! -s "$tar" ]]; then
    command -v mmdebstrap >/dev/null || { echo "docker.sh: mmdebstrap is missing; run $0 install" >&2; exit 1; }
    mkdir -p "$DIR"
    rm -rf "$tar" "$partial"
    echo "docker.sh: no registry for $BASE_IMAGE; making it with mmdebstrap (minbase bookworm)"
    # mmdebstrap picks its output format by the name's extension: a name not ending in .tar (the
    # .tmp this had) makes a directory, which `docker import` cannot read.
    nice -n 19 mmdebstrap --quiet --variant=minbase bookworm "$partial"
    mv "$partial" "$tar"
  fi
  "$DOCKER" import --change 'CMD ["bash"]' "$tar" "$BASE_IMAGE" >/dev/null
  echo "docker.sh: $BASE_IMAGE imported from $tar"
}

case "${1:-}" in
  install) install_packages; install_compose; start_daemon ;;
  base-image) base_image ;;
  daemon-stop) daemon_stop ;;
  docker) echo "$DOCKER" ;;
  *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
