#!/usr/bin/env bash
# Copies Kafka Connect's runtime and Apache Iceberg's Kafka Connect sink (jvm/iceberg-connect/pom.xml)
# from Maven Central into $STATE/jars/iceberg-connect, for the bench's peer (bench/iceberg_connect).
# Not part of `make setup`: the harness runs this when the folder is missing or the POM changed
# (a stamp holds the POM's hash). Needs Maven (mvn).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
POM="$ROOT/jvm/iceberg-connect/pom.xml"
OUT="$STATE/jars/iceberg-connect"
want="$(cat "$POM" "$ROOT/jvm/settings.xml" | sha256sum | cut -c1-16)"
if [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "iceberg-connect jars: Maven (mvn) is required" >&2; exit 1; }
# The address of Central as Maven itself knows it (as scripts/fetch-jars.sh does), for jvm/settings.xml.
mvn_home="$(mvn -v | sed -n 's/^Maven home: //p')"
EOS_MAVEN_CENTRAL_URL="$(unzip -p "$mvn_home"/lib/maven-model-builder-*.jar org/apache/maven/model/pom-4.0.0.xml \
  | grep -o '<url>[^<]*' | head -1 | cut -c6-)"
export EOS_MAVEN_CENTRAL_URL
rm -rf "$OUT"
mvn -B -q -s "$ROOT/jvm/settings.xml" -Dmaven.repo.local="$STATE/m2" -f "$POM" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$OUT"
echo "$want" >"$OUT/.stamp"
echo "iceberg-connect jars: $(ls "$OUT"/*.jar | wc -l) in $OUT"
