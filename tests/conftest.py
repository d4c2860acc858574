"""Fixtures for the whole suite live in tests/fixtures/, one module per component; how the
suite is spread over xdist's workers, in tests/scheduling.py."""

import os

import pytest

from tests import cpu_accounting
from tests.scheduling import FileScheduling, longest_first

# Every broker the tests start (stack/stack.sh: a worker's, a cluster's nodes, a chaos run's) gets
# the serial collector and C1 only: a test broker carries little traffic, and C2's compiles and G1's
# concurrent threads took CPU from the tests on 2 cores. One broker, 20,000 transactional records,
# then idle (CPU seconds, G1 and C2 -> serial and C1): start 3.7 -> 2.3, the records 1.6 -> 0.8,
# a minute idle 1.7 -> 1.3. `make demo`, `make bench` and `make chaos` keep stack.sh's default.
os.environ.setdefault("KAFKA_JVM_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.kafka_cluster",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.postgres",
    "tests.fixtures.pipelines",
    "tests.fixtures.browser",
    "tests.fixtures.s3",
    "tests.fixtures.registry",
    "tests.fixtures.iceberg_rest",
    "tests.fixtures.fault_proxy",
    "tests.fixtures.toxiproxy",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest_first(items)  # the longest test files first, the shared-Airflow e2e files together


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> FileScheduling | None:
    """Under --dist loadfile, FileScheduling's units: a file, or the shared-Airflow e2e files as one."""
    if config.getoption("dist") != "loadfile":
        return None
    return FileScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    cpu_accounting.register(config)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    merged = {} if hasattr(config, "workerinput") else cpu_accounting.merge()  # workers report here
    if merged:
        terminalreporter.write_sep("=", "CPU by test file (.state/test-cpu.json)")
        for line in cpu_accounting.summary(merged):
            terminalreporter.write_line(line)
