#!/bin/bash
# The entry point of docker/kafka.Dockerfile: one KRaft node (broker+controller).
# Every KAFKA_<NAME> variable becomes a line of server.properties, as in the apache/kafka image:
# NAME lower-cased, "___" -> "-", "__" -> "_", "_" -> "." (KAFKA_LOG_DIRS -> log.dirs). Not copied:
# KAFKA_HEAP_OPTS (the JVM's heap). CLUSTER_ID formats the data folder on the first start, with the
# static quorum of KAFKA_CONTROLLER_QUORUM_VOTERS. The broker logs to /opt/kafka/logs/server.log
# (stack/log4j2.yaml, as the local broker) and to stdout; the healthcheck of docker-compose.yaml
# waits for the "Kafka Server started" line there and the listener.
set -euo pipefail
CONFIG=/opt/kafka/config/server.properties
LOGS=/opt/kafka/logs
: "${CLUSTER_ID:?set CLUSTER_ID (a Kafka cluster id, e.g. from kafka-storage random-uuid)}"
: "${KAFKA_LOG_DIRS:=/var/lib/kafka/data}"
export KAFKA_LOG_DIRS

{
  echo "# Written by kafka-start.sh from the KAFKA_* variables of the container"
  while IFS='=' read -r name value; do
    case "$name" in KAFKA_HEAP_OPTS) continue ;; esac
    prop="${name#KAFKA_}"
    prop="$(printf '%s' "$prop" | tr '[:upper:]' '[:lower:]' \
      | sed -e 's/___/-/g' -e 's/__/\x01/g' -e 's/_/./g' -e 's/\x01/_/g')"
    printf '%s=%s\n' "$prop" "$value"
  done < <(env | grep -E '^KAFKA_[A-Z0-9_]+=' | sort)
} >"$CONFIG"

# A restarted container keeps its file system: the healthcheck must not see an earlier start's line.
rm -f "$LOGS"/server.log*
java=(java ${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m} -XX:+UseG1GC -Djava.awt.headless=true
      -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml -Dkafka.logs.dir="$LOGS"
      -cp "/opt/kafka/libs/*")
if [[ ! -f "$KAFKA_LOG_DIRS/meta.properties" ]]; then
  "${java[@]}" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$CONFIG" --ignore-formatted
fi
"${java[@]}" kafka.Kafka "$CONFIG" &
broker=$!
trap 'kill -TERM "$broker" 2>/dev/null' TERM INT
# The log file to stdout too, so `docker compose logs kafka` shows the broker.
tail -n +1 -F "$LOGS/server.log" 2>/dev/null &
tailer=$!
status=0
wait "$broker" || status=$?
# A TERM interrupts the first wait: wait again for the broker's own exit.
if kill -0 "$broker" 2>/dev/null; then wait "$broker" || status=$?; fi
kill "$tailer" 2>/dev/null || true
exit "$status"
