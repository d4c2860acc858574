#!/usr/bin/env bash
# Copies the JVM artifacts the project needs from Maven Central into the state folder:
#   $STATE/jars/kafka  the Apache Kafka broker with its log4j2 binding (started by stack.sh)
#   $STATE/jars/spark  spark-sql-kafka and Delta, handed to Spark with --jars / spark.jars
#   $STATE/jars/s3a    hadoop-aws with the AWS SDK, and the Delta commit coordinator built from
#                      jvm/delta-jdbc-logstore with the PostgreSQL JDBC driver: added to the
#                      Spark jars only for a pipeline whose tables are s3a:// (spark/session.py)
#   $STATE/jars/iceberg  Iceberg's Spark runtime and the JDBC drivers of its JDBC catalog (SQLite,
#                      PostgreSQL): added to the Spark jars only for a pipeline whose output.format
#                      is iceberg (spark/session.py)
#   $STATE/jars/s3proxy  the S3 API server of the test stack (stack/s3.sh)
#   $STATE/jars/iceberg-rest  the Iceberg REST catalog of the test stack (stack/iceberg-rest.sh), built
#                      from jvm/iceberg-rest with its dependencies (never on Spark's classpath)
# A stamp holding the hash of the POMs and the module's sources makes a second run a no-op.
# EOS_FETCH_JARS (default "kafka spark s3a iceberg s3proxy iceberg-rest") fetches only the folders named; the Airflow image
# (docker/airflow.Dockerfile) takes "spark" only. A partial run writes no stamp.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${EOS_STATE_DIR:-$ROOT/.state}"
STAMP="$STATE/jars/.stamp"
want="$(cat "$ROOT"/jvm/*/pom.xml "$ROOT/jvm/settings.xml" $(find "$ROOT/jvm" -name '*.java' | sort) \
  | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch-jars: Maven (mvn) is required: install it (Debian: apt-get install maven)" >&2; exit 1; }
# The address of Central as Maven itself knows it, so no host is written into this repository.
mvn_home="$(mvn -v | sed -n 's/^Maven home: //p')"
EOS_MAVEN_CENTRAL_URL="$(unzip -p "$mvn_home"/lib/maven-model-builder-*.jar org/apache/maven/model/pom-4.0.0.xml \
  | grep -o '<url>[^<]*' | head -1 | cut -c6-)"
export EOS_MAVEN_CENTRAL_URL
parts=" ${EOS_FETCH_JARS:-kafka spark s3a iceberg s3proxy iceberg-rest} "
for part in kafka-broker:kafka spark-connectors:spark s3a:s3a iceberg:iceberg s3proxy:s3proxy; do
  pom="${part%%:*}"; out="$STATE/jars/${part##*:}"
  [[ "$parts" == *" ${part##*:} "* ]] || continue
  rm -rf "$out"
  mvn -B -q -s "$ROOT/jvm/settings.xml" -Dmaven.repo.local="$STATE/m2" -f "$ROOT/jvm/$pom/pom.xml" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out"
done
# The commit coordinator: built (into the state folder, not the source tree), then its jar and its
# runtime dependency (the PostgreSQL JDBC driver) go beside hadoop-aws.
logstore="$ROOT/jvm/delta-jdbc-logstore/pom.xml"
if [[ "$parts" == *" s3a "* ]]; then
mvn -B -q -s "$ROOT/jvm/settings.xml" -Dmaven.repo.local="$STATE/m2" -f "$logstore" \
  -Deos.build.dir="$STATE/build/delta-jdbc-logstore" package dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$STATE/jars/s3a"
cp "$STATE/build/delta-jdbc-logstore/eos-delta-jdbc-logstore.jar" "$STATE/jars/s3a/"
fi
# The test stack's REST catalog: its launcher built, then its jar beside its dependencies (after
# s3a's fetch: its Hadoop jars are hadoop-aws's, already in the Maven repository).
if [[ "$parts" == *" iceberg-rest "* ]]; then
rm -rf "$STATE/jars/iceberg-rest"
mvn -B -q -s "$ROOT/jvm/settings.xml" -Dmaven.repo.local="$STATE/m2" -f "$ROOT/jvm/iceberg-rest/pom.xml" \
  -Deos.build.dir="$STATE/build/iceberg-rest" package dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$STATE/jars/iceberg-rest"
cp "$STATE/build/iceberg-rest/eos-iceberg-rest.jar" "$STATE/jars/iceberg-rest/"
fi
# Every artifact is pinned (no version range, no plugin without a version, in our POMs or in those
# they pull): Maven fetched no repository metadata, which it does only to find the newest version.
# A range that creeps in would make the jars depend on what Central publishes next: refused here.
ranged="$(find "$STATE/m2" -name 'maven-metadata*.xml' 2>/dev/null | sed "s|^$STATE/m2/||" | head -5)"
if [[ -n "$ranged" ]]; then
  echo "fetch-jars: Maven looked up the newest version of (a version range or an unpinned plugin):" >&2
  echo "$ranged" | sed 's/^/  /' >&2
  echo "fetch-jars: pin that artifact in the jvm/ POM that pulls it (mvn -f jvm/<module>/pom.xml" \
    "dependency:tree shows which), then remove $STATE/m2 and run make setup again" >&2
  exit 1
fi
# Spark's own jars win: drop every connector dependency that pip's pyspark already ships (in any
# version), so the classpath holds one Jackson, one Hadoop, one Scala library.
pyspark_jars="$("$ROOT/.venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
for jar in "$STATE"/jars/spark/*.jar "$STATE"/jars/s3a/*.jar "$STATE"/jars/iceberg/*.jar; do
  [[ -f "$jar" ]] || continue
  artifact="$(basename "$jar" .jar | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9.]+)?$//')"
  if compgen -G "$pyspark_jars/$artifact-[0-9]*.jar" >/dev/null || [[ "$artifact" == shims ]]; then
    rm "$jar"
  fi
done
if [[ "$parts" != " kafka spark s3a iceberg s3proxy iceberg-rest " ]]; then
  echo "fetch-jars: $(ls "$STATE/jars/spark" 2>/dev/null | wc -l) Spark connector jars (EOS_FETCH_JARS=${EOS_FETCH_JARS})"
  exit 0
fi
echo "$want" > "$STAMP"
echo "fetch-jars: $(ls "$STATE/jars/kafka" | wc -l) broker jars, $(ls "$STATE/jars/spark" | wc -l) Spark connector jars, $(ls "$STATE/jars/s3a" | wc -l) s3a jars, $(ls "$STATE/jars/iceberg" | wc -l) Iceberg jars, s3proxy and the REST catalog ($(ls "$STATE/jars/iceberg-rest" | wc -l) jars) in $STATE/jars"
