# The Airflow image of docker-compose.yaml, built from debian:bookworm-slim alone (no published Airflow
# image needed): what `make setup` gives the local stack, in a container:
#   Debian's Python 3.11 with a venv at /opt/eos/venv holding the pinned packages of requirements.lock
#   (Airflow included; pip checks every download against the lock's hashes), Debian's Java 17 for
#   spark-submit, the Spark connector jars (spark-sql-kafka, Delta) fetched from Maven Central by
#   scripts/fetch-jars.sh, and the eos-ingest package itself (no dependencies: the lock has them), whose
#   airflow.plugins entry point gives Airflow the UI plugin. The entry point is `airflow`, so the
#   compose file's `command: scheduler` runs `airflow scheduler`. User airflow, uid 50000, group 0, as
#   in Airflow's own image.
# docker-compose.yaml mounts dags/, pipelines/ and eos_ingest/ (on PYTHONPATH, so it is imported
# before the installed copy): edits show without a rebuild.
#
# Build context: the repository root (`docker compose build` does this). The ignore file next to this
# one, airflow.Dockerfile.dockerignore, sends only the files used below, never .state/ or .venv/.
#
# tests/unit/test_docker_compose.py checks that the Python of the base (python3 of Debian bookworm,
# 3.11; PYTHON_VERSION below) is the one requires-python in pyproject.toml names and that the lock
# pins apache-airflow. requirements.lock is compiled for x86_64 and arm64 Linux alike (universal).

FROM debian:bookworm-slim AS base
ENV PYTHON_VERSION=3.11
# Extra CAs (docker/ca-certificates/README.md, empty in the repository): Debian's ca-certificates
# adds them to the system bundle, which pip uses (PIP_CERT), and to Java's trust store (Maven).
COPY docker/ca-certificates/ /usr/local/share/ca-certificates/
# python3 is 3.11 on bookworm; the JDK's postinst writes to the man folders the slim base lacks;
# JAVA_HOME is a link so it is the same path on amd64 and arm64; curl for the healthchecks.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
      "python$PYTHON_VERSION" python3-venv openjdk-17-jre-headless ca-certificates curl procps; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/eos-java; \
    /usr/lib/jvm/eos-java/bin/java -version; \
    "python$PYTHON_VERSION" --version; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --uid 50000 --gid 0 --home-dir /home/airflow --create-home --shell /bin/bash airflow; \
    mkdir -p /opt/eos/venv /opt/airflow; \
    chown airflow:0 /opt/eos/venv /opt/airflow; \
    chmod 2775 /opt/airflow
ENV JAVA_HOME=/usr/lib/jvm/eos-java \
    VIRTUAL_ENV=/opt/eos/venv \
    PATH=/opt/eos/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    AIRFLOW_HOME=/opt/airflow \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PYTHONUNBUFFERED=1

USER airflow
# The project's exact pins, with hashes (pip checks every download against them), installed as they
# are, without resolving (--no-deps; docker/install-lock.sh says why): the lock is complete, so the
# build takes nothing from the index but the files it names, whatever the index publishes later.
# bookworm's own pip (23.0.1) does it; tests/integration/test_image_lock.py runs the same script
# with that pip in `make test` (a dry run), so a lock it would refuse fails there, not in a build.
COPY --chown=airflow:0 requirements.lock /tmp/eos/requirements.lock
COPY docker/install-lock.sh /usr/local/bin/eos-install-lock
RUN set -eux; \
    "python$PYTHON_VERSION" -m venv /opt/eos/venv; \
    eos-install-lock /tmp/eos/requirements.lock; \
    airflow version


# ---- jars: Maven runs here only, so neither Maven nor its download cache reach the final image ----
FROM base AS jars

USER root
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends maven unzip; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /opt/eos/build; \
    chown airflow:0 /opt/eos/build

USER airflow
WORKDIR /opt/eos/build
COPY --chown=airflow:0 jvm/ jvm/
COPY --chown=airflow:0 scripts/fetch-jars.sh scripts/fetch-jars.sh
# fetch-jars.sh asks the project's .venv/bin/python where pip's pyspark keeps its jars, to drop the
# connector dependencies Spark already ships; here a shim runs the venv's python (a symlink would
# not: Python finds its venv next to the path it was started by).
RUN set -eux; \
    mkdir -p .venv/bin; \
    printf '#!/bin/sh\nexec /opt/eos/venv/bin/python "$@"\n' > .venv/bin/python; \
    chmod 755 .venv/bin/python; \
    EOS_STATE_DIR=/opt/eos/build/state EOS_FETCH_JARS="spark iceberg" bash scripts/fetch-jars.sh; \
    test -n "$(ls state/jars/spark)"; \
    test -n "$(ls state/jars/iceberg)"


# ---- the image docker-compose.yaml runs ----
FROM base

# Only the Spark connector jars (spark-sql-kafka and Delta; Iceberg's Spark runtime and its JDBC
# catalog's drivers, 63 MB, for output.format: iceberg): the broker runs in its own container
# (docker/kafka.Dockerfile). The airflow-init service of docker-compose.yaml copies them into the
# state volume, at $EOS_STATE_DIR/jars/{spark,iceberg}, where eos_ingest.paths looks, so a rebuilt
# image also refreshes an existing volume.
COPY --from=jars --chown=airflow:0 /opt/eos/build/state/jars/spark /opt/eos/jars/spark
COPY --from=jars --chown=airflow:0 /opt/eos/build/state/jars/iceberg /opt/eos/jars/iceberg
COPY docker/eos-ingest /usr/local/bin/eos-ingest
COPY --chown=airflow:0 pyproject.toml README.md /tmp/eos/package/
COPY --chown=airflow:0 eos_ingest/ /tmp/eos/package/eos_ingest/
# The top-level folders pyproject.toml maps into the wheel (the job entry points, the default
# suite, the plugin module).
COPY --chown=airflow:0 spark/ /tmp/eos/package/spark/
COPY --chown=airflow:0 expectations/ /tmp/eos/package/expectations/
COPY --chown=airflow:0 plugins/ /tmp/eos/package/plugins/

USER root
# The state folder belongs to the airflow user (group 0, as the Airflow image does for OpenShift);
# a new named volume mounted here starts with this owner.
RUN set -eux; \
    chmod 755 /usr/local/bin/eos-ingest; \
    mkdir -p /opt/eos/state; \
    chown airflow:0 /opt/eos/state; \
    chmod 2775 /opt/eos/state
USER airflow
# Built with the lock's setuptools (no build isolation, which would fetch the newest one).
RUN pip install --no-cache-dir --no-deps --no-build-isolation /tmp/eos/package && rm -rf /tmp/eos/package

ENV EOS_STATE_DIR=/opt/eos/state
WORKDIR /opt/airflow
ENTRYPOINT ["airflow"]
