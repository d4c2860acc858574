#!/usr/bin/env bash
# Starts and stops a local Apache Kafka cluster: N KRaft nodes on 127.0.0.1, each a combined broker
# and controller, a static quorum of all N voters, replication 3 and min.insync.replicas 2 for
# topics and the transaction state log. Each node is a stack.sh broker in a folder of its own.
#   cluster.sh up | down | status | bootstrap | kill I | stop I | start I   (I: a node id, 1..N)
# kill sends SIGKILL to node I (its data stays), stop shuts it down cleanly, start brings it back.
# Environment: EOS_STATE_DIR (default ./.state), KAFKA_NODES (3), KAFKA_CLUSTER_PORT (9192: node I
# listens on KAFKA_CLUSTER_PORT+I-1 for clients, KAFKA_CLUSTER_CONTROLLER_PORT+I-1, default 9292,
# for the quorum), KAFKA_CLUSTER_HOME (default $EOS_STATE_DIR/kafka-cluster-<port>), KAFKA_HEAP and
# KAFKA_START_TIMEOUT as in stack.sh. KAFKA_CLUSTER_PROXIED_PORT and
# KAFKA_CLUSTER_PROXIED_ADVERTISED_PORT (unset: none) give node I stack.sh's PROXIED listener, bound
# to the first +I-1 and advertising the second +I-1, where a TCP fault proxy forwards to it
# (bench/toxiproxy.py): clients that bootstrap at the advertised ports stay behind the proxy.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
NODES="${KAFKA_NODES:-3}"
PORT="${KAFKA_CLUSTER_PORT:-9192}"
CONTROLLER_PORT="${KAFKA_CLUSTER_CONTROLLER_PORT:-9292}"
HOME_DIR="${KAFKA_CLUSTER_HOME:-$STATE/kafka-cluster-$PORT}"

voters() {
  local i out=()
  for ((i = 1; i <= NODES; i++)); do out+=("$i@127.0.0.1:$((CONTROLLER_PORT + i - 1))"); done
  (IFS=,; echo "${out[*]}")
}

# stack.sh for node $1, with the node's ports, folder and the cluster's quorum.
node() {
  local id="$1"; shift
  if [[ -n "${KAFKA_CLUSTER_PROXIED_PORT:-}" ]]; then
    export KAFKA_PROXIED_PORT=$((KAFKA_CLUSTER_PROXIED_PORT + id - 1))
    export KAFKA_PROXIED_ADVERTISED_PORT=$((${KAFKA_CLUSTER_PROXIED_ADVERTISED_PORT:?KAFKA_CLUSTER_PROXIED_PORT needs KAFKA_CLUSTER_PROXIED_ADVERTISED_PORT} + id - 1))
  fi
  KAFKA_PORT=$((PORT + id - 1)) KAFKA_CONTROLLER_PORT=$((CONTROLLER_PORT + id - 1)) \
    KAFKA_HOME_DIR="$HOME_DIR/node-$id" KAFKA_NODE_ID="$id" KAFKA_QUORUM_VOTERS="$(voters)" \
    KAFKA_CLUSTER_ID="$(cat "$HOME_DIR/cluster.id")" KAFKA_REPLICATION="${KAFKA_REPLICATION:-3}" \
    "$ROOT/stack/stack.sh" "$@"
}

check_node() {
  [[ "$1" =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= NODES)) || { echo "cluster: no node $1 (1..$NODES)" >&2; exit 2; }
}

up() {
  mkdir -p "$HOME_DIR"
  if [[ ! -f "$HOME_DIR/cluster.id" ]]; then
    java -cp "$STATE/jars/kafka/*" kafka.tools.StorageTool random-uuid >"$HOME_DIR/cluster.id"
  fi
  # All at once: a node finishes starting only when a majority of the voters elected a leader.
  local i pids=() failed=0
  for ((i = 1; i <= NODES; i++)); do node "$i" up & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i" || failed=1; done
  if ((failed)); then
    echo "cluster: a node did not start; see $HOME_DIR/node-*/logs/server.log" >&2
    down
    exit 1
  fi
  echo "cluster: $NODES nodes up, bootstrap $(bootstrap)"
}

bootstrap() {
  local i out=()
  for ((i = 1; i <= NODES; i++)); do out+=("127.0.0.1:$((PORT + i - 1))"); done
  (IFS=,; echo "${out[*]}")
}

down() {
  local i
  for ((i = 1; i <= NODES; i++)); do [[ -f "$HOME_DIR/cluster.id" ]] && node "$i" down & done
  wait
}

status() {
  local i rc=0
  for ((i = 1; i <= NODES; i++)); do
    echo -n "node $i: "
    node "$i" status || rc=3
  done
  return $rc
}

kill_node() {
  local pid_file="$HOME_DIR/node-$1/kafka.pid"
  [[ -f "$pid_file" ]] && kill -KILL "$(cat "$pid_file")" 2>/dev/null && echo "cluster: node $1 killed" && return 0
  echo "cluster: node $1 is not running" >&2
  return 1
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  bootstrap) bootstrap ;;
  kill) check_node "${2:-}"; kill_node "$2" ;;
  stop) check_node "${2:-}"; node "$2" down ;;
  start) check_node "${2:-}"; node "$2" up ;;
  *) echo "usage: cluster.sh up|down|status|bootstrap|kill I|stop I|start I" >&2; exit 2 ;;
esac
