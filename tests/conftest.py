"""Fixtures for the whole suite live in tests/fixtures/, one module per component; how the
suite is spread over xdist's workers, in tests/scheduling.py."""

import pytest

from tests.scheduling import FileScheduling, longest_first

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
