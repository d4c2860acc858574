#!/usr/bin/env bash
# Starts and stops the local Apache Kafka broker (one KRaft node, broker+controller) from the jars
# that scripts/fetch-jars.sh put in the state folder.
#   stack.sh up | down | status
# Environment: EOS_STATE_DIR (default ./.state), KAFKA_PORT (9092), KAFKA_CONTROLLER_PORT (9093),
# KAFKA_HEAP (512m), KAFKA_START_TIMEOUT (seconds, 90), KAFKA_JVM_OPTS (-XX:+UseG1GC: the broker
# JVM's collector and compiler options). Tests run a second broker on other ports and in their own
# folder, through this same script (tests/conftest.py gives theirs lighter options).
# KAFKA_SASL_SSL_PORT (unset: none) adds a second client listener, SASL_SSL with SCRAM-SHA-512 and a
# certificate from a private CA that stack/tls.sh makes into $HOME_DIR/tls (clients trust
# $HOME_DIR/tls/ca.pem). PLAINTEXT stays the default and inter-broker listener. The SCRAM users come
# from KAFKA_SCRAM_USERS_FILE, one `name=<user>,password=<password>` per line, and are written when
# the data folder is formatted (a folder formatted without them needs `stack.sh down` and a new
# folder).
# A node of a cluster (stack/cluster.sh starts them): KAFKA_NODE_ID, KAFKA_QUORUM_VOTERS (a static
# quorum, `1@127.0.0.1:9293,2@...`, instead of the one standalone controller), KAFKA_CLUSTER_ID (every
# node formatted with the same one) and KAFKA_REPLICATION (3: replication 3 and min.insync.replicas 2
# for topics and the internal ones). Unset, the broker is the single node above.
# KAFKA_PROXIED_PORT and KAFKA_PROXIED_ADVERTISED_PORT (unset: none) add a PLAINTEXT listener bound
# to the first port that tells clients to reconnect at the second, where a TCP fault proxy listens
# and forwards to the first (tests/fixtures/toxiproxy.py): clients that bootstrap through the proxy
# then stay behind it, as Kafka clients reconnect to the advertised address.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
HOME_DIR="${KAFKA_HOME_DIR:-$STATE/kafka-$KAFKA_PORT}"
SASL_SSL_PORT="${KAFKA_SASL_SSL_PORT:-}"
PROXIED_PORT="${KAFKA_PROXIED_PORT:-}"
PROXIED_ADVERTISED_PORT="${KAFKA_PROXIED_ADVERTISED_PORT:-}"
TLS_DIR="$HOME_DIR/tls"
JARS="$STATE/jars/kafka"
PID_FILE="$HOME_DIR/kafka.pid"
LOG_DIR="$HOME_DIR/logs"

running() { [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

up() {
  if running; then
    echo "kafka: already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  [[ -d "$JARS" ]] || { echo "kafka: no broker jars in $JARS: run 'make setup' first" >&2; exit 1; }
  if port_open "$KAFKA_PORT" || port_open "$CONTROLLER_PORT" || { [[ -n "$SASL_SSL_PORT" ]] && port_open "$SASL_SSL_PORT"; }; then
    echo "kafka: port $KAFKA_PORT, $CONTROLLER_PORT or ${SASL_SSL_PORT:-(no SASL_SSL)} is taken by another process; stop it or set KAFKA_PORT/KAFKA_CONTROLLER_PORT/KAFKA_SASL_SSL_PORT" >&2
    exit 1
  fi
  mkdir -p "$HOME_DIR/data" "$LOG_DIR"
  sed -e "s#@KAFKA_PORT@#$KAFKA_PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
      -e "s#@DATA_DIR@#$HOME_DIR/data#g" "$ROOT/stack/server.properties.in" > "$HOME_DIR/server.properties"
  if [[ -n "${KAFKA_QUORUM_VOTERS:-}" ]]; then
    # A static quorum names its voters; the bootstrap line is the standalone controller's.
    sed -i -e "/^controller.quorum.bootstrap.servers=/d" "$HOME_DIR/server.properties"
    cluster_node_properties >> "$HOME_DIR/server.properties"
  fi
  local scram=()
  [[ -z "$SASL_SSL_PORT" && -z "$PROXIED_PORT" ]] || listener_properties >> "$HOME_DIR/server.properties"
  if [[ -n "$SASL_SSL_PORT" ]]; then
    [[ -f "$TLS_DIR/broker.p12" ]] || "$ROOT/stack/tls.sh" "$TLS_DIR"
    sasl_ssl_properties >> "$HOME_DIR/server.properties"
    if [[ -n "${KAFKA_SCRAM_USERS_FILE:-}" ]]; then
      local user
      while IFS= read -r user || [[ -n "$user" ]]; do
        [[ -n "$user" ]] && scram+=(--add-scram "SCRAM-SHA-512=[$user]")
      done <"$KAFKA_SCRAM_USERS_FILE"
    fi
  fi
  # shellcheck disable=SC2206 # KAFKA_JVM_OPTS holds several options, split on spaces
  local java=(java -Xmx"${KAFKA_HEAP:-512m}" ${KAFKA_JVM_OPTS:--XX:+UseG1GC} -Djava.awt.headless=true
              -Dlog4j2.configurationFile="$ROOT/stack/log4j2.yaml" -Dkafka.logs.dir="$LOG_DIR" -cp "$JARS/*")
  # Format once per data folder; the meta.properties file marks a formatted one.
  if [[ ! -f "$HOME_DIR/data/meta.properties" ]]; then
    local cluster_id
    local cluster_id="${KAFKA_CLUSTER_ID:-}" standalone=(--standalone)
    [[ -n "$cluster_id" ]] || cluster_id="$("${java[@]}" kafka.tools.StorageTool random-uuid)"
    # With static voters the quorum is in the properties; --standalone would make a second one.
    [[ -z "${KAFKA_QUORUM_VOTERS:-}" ]] || standalone=()
    "${java[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$HOME_DIR/server.properties" "${standalone[@]}" "${scram[@]}" >"$LOG_DIR/format.log"
  fi
  nohup "${java[@]}" kafka.Kafka "$HOME_DIR/server.properties" >"$LOG_DIR/stdout.log" 2>&1 &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-90}))
  until grep -q "Kafka Server started" "$LOG_DIR/server.log" 2>/dev/null && port_open "$KAFKA_PORT"; do
    if ! running; then
      echo "kafka: the broker exited during start-up; see $LOG_DIR/server.log and $LOG_DIR/stdout.log" >&2
      tail -20 "$LOG_DIR/stdout.log" >&2 || true
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "kafka: not ready after ${KAFKA_START_TIMEOUT:-90}s; see $LOG_DIR/server.log" >&2
      down
      exit 1
    fi
    sleep 0.5
  done
  echo "kafka: up on 127.0.0.1:$KAFKA_PORT (pid $(cat "$PID_FILE"), data in $HOME_DIR)"
}

# The optional listeners, appended to server.properties (a later key wins): the properties file
# cannot hold an optional listener, and without them the broker is exactly the PLAINTEXT one.
listener_properties() {
  local listeners="PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT"
  local advertised="$listeners" protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ -n "$SASL_SSL_PORT" ]]; then
    listeners+=",SASL_SSL://127.0.0.1:$SASL_SSL_PORT"
    advertised+=",SASL_SSL://127.0.0.1:$SASL_SSL_PORT"
    protocols+=",SASL_SSL:SASL_SSL"
  fi
  if [[ -n "$PROXIED_PORT" ]]; then
    listeners+=",PROXIED://127.0.0.1:$PROXIED_PORT"
    advertised+=",PROXIED://127.0.0.1:${PROXIED_ADVERTISED_PORT:?KAFKA_PROXIED_PORT needs KAFKA_PROXIED_ADVERTISED_PORT}"
    protocols+=",PROXIED:PLAINTEXT"
  fi
  printf '# -- added by stack.sh for its optional listeners\nlisteners=%s\nadvertised.listeners=%s\nlistener.security.protocol.map=%s\n' \
    "$listeners" "$advertised" "$protocols"
}

# The SASL_SSL listener's settings (its address: listener_properties).
sasl_ssl_properties() {
  cat <<PROPS
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/broker.p12
ssl.keystore.password=$(cat "$TLS_DIR/keystore.password")
ssl.key.password=$(cat "$TLS_DIR/keystore.password")
ssl.client.auth=none
PROPS
}

# A cluster node's settings, appended (a later key wins in a properties file): server.properties.in
# stays the single broker that docker-compose.yaml copies.
cluster_node_properties() {
  local replication="${KAFKA_REPLICATION:-3}"
  local min_isr=$((replication > 1 ? 2 : 1))
  cat <<PROPS
# -- added by stack.sh for node ${KAFKA_NODE_ID:-1} of the quorum $KAFKA_QUORUM_VOTERS
node.id=${KAFKA_NODE_ID:-1}
controller.quorum.voters=$KAFKA_QUORUM_VOTERS
default.replication.factor=$replication
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$replication
transaction.state.log.replication.factor=$replication
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$replication
share.coordinator.state.topic.min.isr=$min_isr
# A restarted node becomes its partitions' leader again only by an election the test asks for.
auto.leader.rebalance.enable=false
PROPS
}

down() {
  if ! running; then
    rm -f "$PID_FILE"
    echo "kafka: not running"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill -TERM "$pid"
  # A clean shutdown lets the next start skip log recovery; kill -9 only if it hangs.
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$PID_FILE"
  echo "kafka: stopped (pid $pid)"
}

status() {
  if running; then echo "kafka: running (pid $(cat "$PID_FILE")) on 127.0.0.1:$KAFKA_PORT"; else echo "kafka: stopped"; return 3; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: stack.sh up|down|status" >&2; exit 2 ;;
esac
