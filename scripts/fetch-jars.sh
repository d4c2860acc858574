#!/usr/bin/env bash
# Copies the JVM artifacts the project needs from Maven Central into the state folder:
#   $STATE/jars/kafka  the Apache Kafka broker with its log4j2 binding (started by stack.sh)
#   $STATE/jars/spark  spark-sql-kafka and Delta, handed to Spark with --jars / spark.jars
# A stamp holding the hash of the POMs makes a second run a no-op.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
STAMP="$STATE/jars/.stamp"
want="$(cat "$ROOT"/jvm/*/pom.xml "$ROOT/jvm/settings.xml" | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is required: install it (Debian: apt-get install maven)" >&2; exit 1; }
# The address of Central as Maven itself knows it, so no host is written into this repository.
mvn_home="$(mvn -v | sed -n 's/^Maven home: //p')"
EOS_MAVEN_CENTRAL_URL="$(unzip -p "$mvn_home"/lib/maven-model-builder-*.jar org/apache/maven/model/pom-4.0.0.xml \
  | grep -o '<url>[^<]*' | head -1 | cut -c6-)"
export EOS_MAVEN_CENTRAL_URL
for part in kafka-broker:kafka spark-connectors:spark; do
  pom="${part%%:*}"; out="$STATE/jars/${part##*:}"
  rm -rf "$out"
  mvn -B -q -s "$ROOT/jvm/settings.xml" -Dmaven.repo.local="$STATE/m2" -f "$ROOT/jvm/$pom/pom.xml" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out"
done
# Spark's own jars win: drop every connector dependency that pip's pyspark already ships (in any
# version), so the classpath holds one Jackson, one Hadoop, one Scala library.
pyspark_jars="$("$ROOT/.venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
for jar in "$STATE"/jars/spark/*.jar; do
  artifact="$(basename "$jar" .jar | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9.]+)?$//')"
  if compgen -G "$pyspark_jars/$artifact-[0-9]*.jar" >/dev/null || [[ "$artifact" == shims ]]; then
    rm "$jar"
  fi
done
echo "$want" > "$STAMP"
echo "fetch-jars: $(ls "$STATE/jars/kafka" | wc -l) broker jars, $(ls "$STATE/jars/spark" | wc -l) Spark connector jars in $STATE/jars"
