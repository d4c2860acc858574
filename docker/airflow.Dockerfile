# syntax=docker/dockerfile:1
#
# The Airflow image of docker-compose.yaml: the official Apache Airflow image plus what `make setup`
# gives the local stack: the pinned Python packages of requirements.lock, Java 17 for spark-submit,
# and the Spark connector jars (spark-sql-kafka, Delta) fetched from Maven Central by
# scripts/fetch-jars.sh, and the eos-ingest package itself (pip install of the repository, no
# dependencies: the lock has them), whose airflow.plugins entry point gives Airflow the UI plugin.
# docker-compose.yaml mounts dags/, pipelines/ and eos_ingest/ (on PYTHONPATH, so it is imported
# before the installed copy): edits show without a rebuild.
#
# Build context: the repository root (`docker compose build` does this). The ignore file next to this
# one, airflow.Dockerfile.dockerignore, sends only the files used below, never .state/ or .venv/.
#
# The versions live elsewhere and tests/unit/test_docker_compose.py checks that they agree:
#   apache/airflow:<version>  = the apache-airflow pin in requirements.in
#   -python<X.Y>              = requires-python in pyproject.toml
# requirements.lock is compiled for x86_64 Linux (see its header). On an arm64 host (Apple silicon)
# build and run the amd64 image: DOCKER_DEFAULT_PLATFORM=linux/amd64 docker compose up -d --build

FROM apache/airflow:3.3.2-python3.11 AS base

USER root
# pyspark's spark-submit starts a JVM: Java 17, as on the local stack. The slim Debian
# base has no man folders, which the JDK's postinst writes to. JAVA_HOME is a link so it is the same
# path on amd64 and arm64.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/eos-java; \
    /usr/lib/jvm/eos-java/bin/java -version; \
    apt-get autoremove -yqq --purge; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/eos-java

USER airflow
# The project's exact pins, with hashes (pip checks every download against them). The lock pins
# apache-airflow to this image's version, so the image's Airflow stays as it is.
COPY --chown=airflow:0 requirements.lock /tmp/eos/requirements.lock
RUN pip install --no-cache-dir -r /tmp/eos/requirements.lock


# ---- jars: Maven runs here only, so neither Maven nor its download cache reach the final image ----
FROM base AS jars

USER root
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends maven unzip; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /opt/eos/build; \
    chown airflow:0 /opt/eos/build

USER airflow
WORKDIR /opt/eos/build
COPY --chown=airflow:0 jvm/ jvm/
COPY --chown=airflow:0 scripts/fetch-jars.sh scripts/fetch-jars.sh
# fetch-jars.sh asks the project's .venv/bin/python where pip's pyspark keeps its jars, to drop the
# connector dependencies Spark already ships; in this image that interpreter is the image's python.
RUN set -eux; \
    mkdir -p .venv/bin; \
    printf '#!/bin/sh\nexec python "$@"\n' > .venv/bin/python; \
    chmod 755 .venv/bin/python; \
    EOS_STATE_DIR=/opt/eos/build/state bash scripts/fetch-jars.sh; \
    test -n "$(ls state/jars/spark)"


# ---- the image docker-compose.yaml runs ----
FROM base

# Only the Spark connector jars: the broker runs in its own container (apache/kafka). The airflow-init
# service of docker-compose.yaml copies them into the state volume, at $EOS_STATE_DIR/jars/spark,
# where eos_ingest.paths.spark_jars_dir() looks, so a rebuilt image also refreshes an existing volume.
COPY --from=jars --chown=airflow:0 /opt/eos/build/state/jars/spark /opt/eos/jars/spark
COPY docker/eos-ingest /usr/local/bin/eos-ingest
COPY --chown=airflow:0 pyproject.toml README.md /tmp/eos/package/
COPY --chown=airflow:0 eos_ingest/ /tmp/eos/package/eos_ingest/

USER root
# The state folder belongs to the airflow user (group 0, as the Airflow image does for OpenShift);
# a new named volume mounted here starts with this owner.
RUN set -eux; \
    chmod 755 /usr/local/bin/eos-ingest; \
    mkdir -p /opt/eos/state; \
    chown airflow:0 /opt/eos/state; \
    chmod 2775 /opt/eos/state
USER airflow
RUN pip install --no-cache-dir --no-deps /tmp/eos/package && rm -rf /tmp/eos/package

ENV EOS_STATE_DIR=/opt/eos/state
