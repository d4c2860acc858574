"""The pinned versions agree with each other: pip's pyspark, pyspark-client, delta-spark and the jars,
and the doors into other projects' internals with the series pyproject allows."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

from eos_ingest import paths
from tests.helpers.dependencies import pyproject_series

REQUIREMENTS = (paths.REPO_ROOT / "requirements.in").read_text()


def pinned(name: str) -> str:
    match = re.search(rf"^{re.escape(name)}==(\S+)", REQUIREMENTS, re.MULTILINE | re.IGNORECASE)
    assert match, f"requirements.in has no exact pin for {name}"
    return match.group(1)


def pom_property(pom: str, prop: str) -> str:
    text = (paths.REPO_ROOT / "jvm" / pom / "pom.xml").read_text()
    match = re.search(rf"<{prop}>([^<]+)</{prop}>", text)
    assert match, f"jvm/{pom}/pom.xml has no <{prop}>"
    return match.group(1)


def test_pyspark_and_pyspark_client_are_one_version() -> None:
    import pyspark

    # pyspark-client ships the same pyspark/ files: whichever installed last wins, so both must match.
    assert pyspark.__version__ == pinned("pyspark") == pinned("pyspark-client")
    assert version("pyspark-client") == version("pyspark") == pyspark.__version__


def test_spark_kafka_jar_matches_pyspark() -> None:
    import pyspark

    assert pom_property("spark-connectors", "spark.version") == pyspark.__version__
    assert (paths.spark_jars_dir() / f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar").exists()


def test_delta_jar_matches_delta_spark() -> None:
    delta = version("delta-spark")
    assert pom_property("spark-connectors", "delta.version") == delta == pinned("delta-spark")
    assert (paths.spark_jars_dir() / f"delta-spark_4.1_2.13-{delta}.jar").exists()


def test_broker_is_kafka_4() -> None:
    kafka = pom_property("kafka-broker", "kafka.version")
    assert kafka.startswith("4.")
    # The broker's jars are where stack/stack.sh starts it from.
    assert (paths.state_dir() / "jars" / "kafka" / f"kafka_2.13-{kafka}.jar").exists()


def test_hadoop_aws_and_the_coordinator_match_pyspark_hadoop_and_delta() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    hadoop = (
        next(jars.glob("hadoop-client-api-*.jar"))
        .name.removeprefix("hadoop-client-api-")
        .removesuffix(".jar")
    )
    assert (
        pom_property("s3a", "hadoop.version")
        == hadoop
        == pom_property("delta-jdbc-logstore", "hadoop.version")
    )
    assert pom_property("delta-jdbc-logstore", "delta.version") == version("delta-spark")
    assert (paths.s3a_jars_dir() / f"hadoop-aws-{hadoop}.jar").exists()
    assert (paths.s3a_jars_dir() / "eos-delta-jdbc-logstore.jar").exists()


def test_spark_avro_jar_is_a_patch_of_pyspark_s_minor() -> None:
    """spark-avro is pinned apart (the newest 4.1 patch served: 4.1.1); from_avro must come from
    pyspark's own minor release, and the jar must be fetched."""
    import pyspark

    text = (paths.REPO_ROOT / "jvm" / "spark-connectors" / "pom.xml").read_text()
    match = re.search(r"<artifactId>spark-avro_2\.13</artifactId>\s*<version>([^<]+)</version>", text)
    assert match, "jvm/spark-connectors/pom.xml pins no spark-avro_2.13 version"
    assert match.group(1).split(".")[:2] == pyspark.__version__.split(".")[:2]
    assert (paths.spark_jars_dir() / f"spark-avro_2.13-{match.group(1)}.jar").exists()


def test_each_door_is_gated_on_the_series_pyproject_allows() -> None:
    """A door into another project's internals is tested on one minor series, and the package
    allows only that series: when a pin moves, this fails until the door is tested on the new
    series and its gate moves with it. GX's site builders: test_site (importing GX is not cheap);
    pyspark's Py4J door: test_jvm."""
    from eos_ingest.kafka import header_counts
    from eos_ingest.storage.delta import staged_write

    for name, known, on in (
        ("delta-spark", staged_write.KNOWN_SERIES, staged_write.STAGING_ON),
        ("kafka-python", header_counts.KNOWN_SERIES, header_counts.HEADERS_ON),
    ):
        low, high = pyproject_series(name)
        assert low == known and high == (known[0], known[1] + 1), name
        assert on, f"the installed {name} (the lock's) is in the tested series"
