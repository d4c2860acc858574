"""Fixtures for the whole suite live in tests/fixtures/, one module per component."""

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.postgres",
    "tests.fixtures.pipelines",
    "tests.fixtures.browser",
    "tests.fixtures.s3",
    "tests.fixtures.registry",
]
