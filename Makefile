# eos-ingest. `make test` and `make demo` are the two commands; see README.md.
SHELL := /bin/bash
ROOT := $(CURDIR)
export EOS_STATE_DIR ?= $(ROOT)/.state
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python

.PHONY: compose-test setup stack-up stack-down spark-up spark-down lint docs test test-unit test-pythons bench chaos clean lock lock-airflow-image

setup:
	@scripts/setup.sh

stack-up: setup
	@stack/stack.sh up

stack-down:
	@stack/stack.sh down

# A Spark standalone master (spark://127.0.0.1:7077) and worker; see docs/cluster.md.
spark-up: setup
	@stack/spark.sh up

spark-down:
	@stack/spark.sh down

define LINT_CHECKS
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy eos_ingest dags spark plugins
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mkdocs build --strict --quiet
endef

lint: setup
	$(LINT_CHECKS)

# The docs as a site (README.md as its home page) in .state/site; `make lint` builds it with --strict.
docs: setup
	$(VENV)/bin/mkdocs build --strict

# The whole suite: unit, integration (real broker, Spark, Delta, SQLite, PostgreSQL) and e2e.
# Prints the 25 slowest tests; every test's time goes to $(EOS_STATE_DIR)/test-times.xml (JUnit XML),
# what a profile of the suite starts from. EOS_LONG_TESTS=1 runs the long variants of tests that
# keep a short one here (test_maintenance: 50 batches instead of 6; test_s3a_commits: 8 concurrent
# commit rounds instead of 2; test_s3a_operations: two overlapping backfills beside the ingest, not one;
# test_cluster_failover: the controller's kill, a leader election, clean stops; test_from_avro: the
# check that pyspark's own from_avro still races, the exit of formats/from_avro.py; tests/chaos: the
# whole short chaos run on Iceberg, where make test runs a lean one beside the whole one on Delta).
# EOS_TEST_WORKERS pytest-xdist workers (0 runs in this process), a test file per worker at a time
# (--dist loadfile), the longest first, the e2e files of the shared Airflow stack as one
# (tests/scheduling.py): each worker is a test session of its own, with one broker and one Spark
# session; they share one PostgreSQL (tests/fixtures/postgres.py). 3 on 2 cores: many files wait
# (on Airflow's scheduler, a bounded timeout, a restarted server) while the others could use the
# core; with 2 the cores were 86 % busy, with 3 97 %. A fresh clone, alone: pytest 37:35 -> 34:10,
# the whole target 40.0 -> 36.3 min (2026-12-06, one run each).
EOS_TEST_WORKERS ?= 3
# setup's class-data archive (~45 s) is made beside the lint checks (mypy ~26 s), not before them.
test:
	@EOS_SETUP_ARCHIVE=background scripts/setup.sh
	$(LINT_CHECKS)
	@scripts/wait-archive.sh
	$(PY) -m pytest -p no:cacheprovider -n $(EOS_TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 \
	  --junitxml=$(EOS_STATE_DIR)/test-times.xml $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest -p no:cacheprovider tests/unit $(PYTEST_ARGS)

# The unit tests and a real batch (the wheel test: broker, spark-submit, Delta, GX) on each other
# Python the package supports, in venvs with the lock's pins (scripts/pythons.sh: 3.12, 3.13).
# `make test` runs a short part of it (tests/integration/test_pythons.py, on the newest version; here
# on each). On each supported Python, 3.11 too, the wheel alone installed by plain pip without the
# lock into a fresh venv, then a batch (EOS_WHEEL_PIP=1: 5 to 8 min each on a loaded machine, pip's
# install 2 to 4 of them, so not in `make test`; docs/install.md). Then the wheel in a venv
# that mirrors an official Airflow image (scripts/pythons.sh image: Python 3.12,
# requirements-airflow-image.lock): Airflow untouched, the DAG folder's DagBag, the CLI and plugin.
test-pythons: setup
	EOS_WHEEL_PIP=1 $(PY) -m pytest -p no:cacheprovider tests/integration/test_wheel.py -k pip $(PYTEST_ARGS)
	@for version in $$(scripts/pythons.sh versions); do \
	  python="$$(scripts/pythons.sh venv $$version)" || exit 1; \
	  echo "== Python $$version: $$python"; \
	  EOS_WHEEL_PIP=1 "$$python" -m pytest -p no:cacheprovider tests/unit tests/integration/test_wheel.py $(PYTEST_ARGS) || exit 1; \
	done
	@python="$$(scripts/pythons.sh image)" && echo "== the Airflow image: $$python"
	EOS_AIRFLOW_IMAGE=1 EOS_TEST_PYTHONS=all $(PY) -m pytest -p no:cacheprovider tests/integration/test_airflow_image.py \
	  tests/integration/test_pythons.py $(PYTEST_ARGS)

# docker-compose.yaml run for real (tests/e2e/test_docker_compose_up.py): Docker Engine and Compose
# (scripts/docker.sh install: as root), the base image (made with mmdebstrap where no registry has
# it), then from a fresh clone `docker compose up -d --build --wait`, the demo ingested through the
# REST API, verify, `docker compose down -v`. Not part of `make test`: the image builds alone take
# longer than its budget. Times in $(EOS_STATE_DIR)/compose-test/times.json.
compose-test: setup
	@scripts/docker.sh install
	EOS_COMPOSE_TEST=1 nice -n 19 $(PY) -m pytest -p no:cacheprovider tests/e2e/test_docker_compose_up.py $(PYTEST_ARGS)

# Re-resolve requirements.in into the committed lock (hashes included), and requirements-bootstrap.in
# (uv, pip, setuptools: what installs and builds the rest): universal, one set of pins
# for every Python the package supports (3.11 to 3.13; markers where a package differs).
lock:
	$(VENV)/bin/uv pip compile requirements.in -o requirements.lock --universal --python-version 3.11 \
	  --generate-hashes -q
	$(VENV)/bin/uv pip compile requirements-bootstrap.in -o requirements-bootstrap.lock --universal \
	  --python-version 3.11 --generate-hashes -q

# Re-resolve requirements-airflow-image.in (Airflow 3.3.2 with its official image's default extras)
# for the image's Python 3.12 only. It stands in for Airflow's published constraints file, which
# cannot be fetched from every machine. scripts/pythons.sh image installs it.
lock-airflow-image:
	$(VENV)/bin/uv pip compile requirements-airflow-image.in -o requirements-airflow-image.lock \
	  --python-version 3.12 --generate-hashes -q

# Removes all generated state: venv, jars, Kafka data, databases, Delta tables.
clean: stack-down
	-scripts/postgres.sh down
	rm -rf "$$(scripts/postgres.sh home)" $(EOS_STATE_DIR) $(VENV)

# eos-ingest side by side with a raw consumer, plain Spark, Structured Streaming, the audit, a DAG
# run and a catch-up, on one workload it produces (1M records); medians of 3. Outside `make test`.
# BENCH_ARGS: e.g. "--records 100000 --runs 1", --small (10k records), --no-dag; see bench/README.md.
bench: stack-up
	$(PY) -m bench.side_by_side $(BENCH_ARGS)

# Chaos run on the real stack (own broker, own PostgreSQL): kills, broker and DB restarts, zombies,
# backfills; then verify + an independent check. Result in bench/results/chaos-<stamp>.json. The
# defaults are the full target (hours on 2 cores); tests/chaos/ runs a short variant in `make test`.
# CHAOS_FORMAT=iceberg runs it on an Iceberg table (the JDBC catalog in the run's PostgreSQL).
# CHAOS_ARGS="--catalog rest" puts that table in the REST catalog server behind the fault proxy,
# which loses the answers of some publishes; on Delta, "--storage s3a" puts the tables on s3a and
# drops the commit coordinator's connection to PostgreSQL right after some commits' entries.
# CHAOS_BROKERS=3 runs it on a 3-node cluster (stack/cluster.sh) whose broker kills take a
# partition's leader, a writer's transaction coordinator and the active controller in turn.
# CHAOS_NETWORK_FAULTS=N puts a TCP fault proxy (Toxiproxy) in front of each broker for the jobs'
# Kafka clients and injects N faults spread over the chaos phase: latency, connection resets, a
# black hole and a slow close in turn, each on one broker for 5 to 20 s (bench/chaos/network.py).
CHAOS_RECORDS ?= 1000000
CHAOS_KILLS ?= 100
CHAOS_BROKER_RESTARTS ?= 5
CHAOS_BROKERS ?= 1
CHAOS_NETWORK_FAULTS ?= 0
CHAOS_SECONDS ?= 3600
CHAOS_MAX_MINUTES ?= 300
CHAOS_FORMAT ?= delta
chaos: setup
	$(PY) -m bench.chaos --records $(CHAOS_RECORDS) --kills $(CHAOS_KILLS) \
	  --broker-restarts $(CHAOS_BROKER_RESTARTS) --brokers $(CHAOS_BROKERS) \
	  --network-faults $(CHAOS_NETWORK_FAULTS) --chaos-seconds $(CHAOS_SECONDS) \
	  --max-minutes $(CHAOS_MAX_MINUTES) --format $(CHAOS_FORMAT) $(CHAOS_ARGS)

# The main job, end to end on local defaults: setup, Kafka, `airflow standalone`, a demo stream,
# the ingest DAG through the REST API, verify; then a summary in $(EOS_STATE_DIR)/demo/summary.json.
# Leaves everything running; see docs/airflow.md.
demo:
	@scripts/demo.sh

# Airflow alone (after `make stack-up` for Kafka): UI at http://127.0.0.1:8080, login in docs/airflow.md.
airflow-up: setup
	@scripts/airflow.sh up

# Stops what `make demo` started: Airflow (every process it started) and the Kafka broker;
# and the Spark standalone cluster of `make spark-up`, if one runs.
down:
	@scripts/airflow.sh down
	@stack/stack.sh down
	@stack/spark.sh down
.PHONY: demo airflow-up down
