"""A standalone Kafka Connect worker running Iceberg's sink, in a process group of its own.

Standalone mode keeps the worker's own state in a file, which a sink does not need: the sink's
progress is in the Iceberg table (the snapshot summary holds the control topic's offsets) and its
source offsets are committed to Kafka by its coordinator, in the same Kafka transaction as the
control topic's events. That is the sink's exactly-once design; distributed mode would add nothing
to it (Connect's exactly-once support, KIP-618, is for source connectors).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
JARS_SH = Path(__file__).resolve().parent / "jars.sh"
CONNECTOR = "org.apache.iceberg.connect.IcebergSinkConnector"
METADATA = "org.apache.iceberg.connect.transforms.KafkaMetadataTransform"
NAMESPACE = "bench"

LOG4J2 = """rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
"""


def versions(jars: Path) -> dict[str, str]:
    """The Connect runtime's and the sink's versions, from the jars' names."""
    found = {}
    for key, stem in (("kafka_connect", "connect-runtime-"), ("iceberg", "iceberg-kafka-connect-1")):
        jar = next(iter(sorted(jars.glob(f"{stem}*.jar"))), None)
        found[key] = jar.name.removeprefix(stem.rstrip("1")).removesuffix(".jar") if jar else "?"
    return found


def jars_dir(state: Path) -> Path:
    """The worker's classpath folder, fetched by jars.sh when missing or out of date."""
    env = {**os.environ, "EOS_STATE_DIR": str(state)}
    subprocess.run([str(JARS_SH)], env=env, check=True)
    return state / "jars" / "iceberg-connect"


@dataclass(frozen=True)
class SinkConfig:
    """What one run of the sink writes where."""

    bootstrap: str
    topic: str
    table: str  # without the namespace; also names the connector (its consumer group) and control topic
    home: Path  # worker files, catalog, warehouse and logs
    tasks: int = 1
    commit_interval_ms: int = 1000
    session_timeout_ms: int = 10_000

    @property
    def catalog_db(self) -> Path:
        return self.home / "catalog.db"

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse"

    @property
    def control_topic(self) -> str:
        return f"{self.table}-control"

    def worker_properties(self, rest_port: int) -> str:
        return "\n".join(
            [
                f"bootstrap.servers={self.bootstrap}",
                "key.converter=org.apache.kafka.connect.storage.StringConverter",
                # bench/workload.py's values are plain JSON objects: schemaless maps for the sink.
                "value.converter=org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable=false",
                f"offset.storage.file.filename={self.home / 'worker.offsets'}",
                "offset.flush.interval.ms=1000",
                # Every plugin jar here has its ServiceLoader manifest: no 20 s reflective scan of
                # the classpath at each start.
                "plugin.discovery=service_load",
                "consumer.isolation.level=read_committed",
                "consumer.auto.offset.reset=earliest",
                f"listeners=http://127.0.0.1:{rest_port}",
                "",
            ]
        )

    def sink_settings(self) -> dict[str, str]:
        """The connector's configuration: its properties file, or the body of a REST request."""
        return {
            "name": self.table,
            "connector.class": CONNECTOR,
            "tasks.max": str(self.tasks),
            "topics": self.topic,
            "consumer.override.isolation.level": "read_committed",
            # A SIGKILLed member stays in the group until its session expires: the default 45 s
            # would stall every restart that long.
            "consumer.override.session.timeout.ms": str(self.session_timeout_ms),
            "iceberg.tables": f"{NAMESPACE}.{self.table}",
            "iceberg.tables.auto-create-enabled": "true",
            "iceberg.control.topic": self.control_topic,
            "iceberg.control.commit.interval-ms": str(self.commit_interval_ms),
            "iceberg.catalog.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "iceberg.catalog.uri": f"jdbc:sqlite:{self.catalog_db}",
            "iceberg.catalog.warehouse": str(self.warehouse),
            # topic, partition, offset and timestamp of each record as columns
            "transforms": "meta",
            "transforms.meta.type": METADATA,
        }

    def sink_properties(self) -> str:
        return "\n".join([*(f"{key}={value}" for key, value in self.sink_settings().items()), ""])


class ConnectWorker:
    """One worker JVM at a time; `kill()` is SIGKILL of its process group, `start()` a new one."""

    def __init__(self, config: SinkConfig, jars: Path, rest_port: int, heap: str = "1g") -> None:
        self.config, self.jars, self.rest_port, self.heap = config, jars, rest_port, heap
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        config.home.mkdir(parents=True, exist_ok=True)
        config.warehouse.mkdir(exist_ok=True)
        (config.home / "worker.properties").write_text(config.worker_properties(rest_port))
        (config.home / "sink.properties").write_text(config.sink_properties())
        (config.home / "log4j2.properties").write_text(LOG4J2)

    @property
    def log_path(self) -> Path:
        return self.config.home / f"connect-{self.starts}.log"

    def start(self, with_connector: bool = True) -> None:
        """A new worker JVM; without the connector it idles until `create_connector()` (a worker
        that users keep running, given a new connector through its REST API)."""
        home = self.config.home
        self.starts += 1
        argv = [
            "java",
            f"-Xmx{self.heap}",
            f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
            "-cp",
            f"{self.jars}/*",
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(home / "worker.properties"),
            *([str(home / "sink.properties")] if with_connector else []),
        ]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request to the worker's REST API; the answer's JSON."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"null")

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Until the worker lists its connectors: its REST server and its herder are up."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.alive():
                raise RuntimeError(f"the Connect worker exited while starting: {self.log_path}")
            try:
                self.rest("GET", "/connectors")
                return
            except OSError as exc:  # not listening yet, or still starting (HTTPError is one)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the Connect worker is not ready after {timeout_s:.0f} s: {exc}"
                    ) from exc
            time.sleep(0.2)

    def create_connector(self) -> None:
        """The sink on this worker, as a user adds one to a running worker (POST /connectors)."""
        settings = self.config.sink_settings()
        self.rest("POST", "/connectors", {"name": settings["name"], "config": settings})

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL of the worker's process group, and wait for it to end."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM (the worker's clean shutdown), then SIGKILL after `timeout_s`."""
        if not self.alive():
            return
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.2)
        self.kill()

    def log_errors(self, limit: int = 5) -> list[str]:
        """The first ERROR lines of every worker log, for the result."""
        lines: list[str] = []
        for path in sorted(self.config.home.glob("connect-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if " ERROR " in line and len(lines) < limit:
                    lines.append(f"{path.name}: {line[:400]}")
        return lines
