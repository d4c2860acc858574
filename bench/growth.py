"""How the control plane grows: plan with many partitions, status and the Ingestion page with many
batches, the DAG folder with many pipeline files. Medians of --runs; no Spark.

    python -m bench.growth --bootstrap 127.0.0.1:9092          # after `make stack-up`
    python -m bench.growth --bootstrap ... --partitions 600 --batches 10000 --pipelines 50
    python -m bench.growth --bootstrap ... --only status --bulk-fill   # the history's pages only

Targets (issue "Throughput"): plan with 600 partitions < 2 s; status and the Ingestion page with
10,000 batches < 1 s; parsing the DAG folder with 50 pipeline files < 2 s. Results are appended to
bench/results/growth.jsonl.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from sqlalchemy import update

from eos_ingest import paths
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.control import queries as control_queries
from eos_ingest.control.schema import batches as batches_table
from eos_ingest.control.store import BatchKind, BatchStatus, ControlStore
from eos_ingest.plan.ranges import Plan, PlannedRange, TopicPartition
from eos_ingest.service.operations import open_store, plan_batch
from eos_ingest.service.status import pipeline_status

RESULTS = paths.REPO_ROOT / "bench" / "results" / "growth.jsonl"


def median_seconds(action: Callable[[], Any], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), [round(t, 4) for t in times]


def make_topic(bootstrap: str, partitions: int) -> str:
    """A topic with one committed record in every partition."""
    topic = f"growth_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(120)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"growth-{topic}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for p in range(partitions):
        producer.produce(topic, b'{"id": 1}', partition=p)
    producer.commit_transaction(60)
    return topic


def pipeline(folder: Path, name: str, topics: list[str], bootstrap: str, db_url: str) -> PipelineConfig:
    doc = {
        "name": name,
        "topics": topics,
        "kafka": {"bootstrap.servers": bootstrap},
        "kafka_conn_id": None,
        "start_from": "earliest",
        "value": {"format": "raw"},
        "output": {"path": str(folder / "tables" / name)},
        "control_db_url": db_url,
        "schedule": "@hourly",
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_pipeline(path)


def plan_many_partitions(bootstrap: str, partitions: int, runs: int, root: Path) -> dict[str, Any]:
    """The first plan of a pipeline over a topic of `partitions` partitions (Kafka reads included),
    each run on a fresh control DB so every run records every partition."""
    topic = make_topic(bootstrap, partitions)
    configs = [
        pipeline(root, f"plan{i}", [topic], bootstrap, f"sqlite:///{root / f'plan{i}.db'}")
        for i in range(runs)
    ]
    stores = [open_store(c) for c in configs]
    times = []
    for config, store in zip(configs, stores, strict=True):
        started = time.perf_counter()
        batch, created = plan_batch(config, store)
        times.append(time.perf_counter() - started)
        assert batch is not None and created and len(batch.ranges) == partitions
    return {"partitions": partitions, "median_s": round(statistics.median(times), 4), "runs_s": times}


def fill_batches(store: ControlStore, name: str, batches: int, partitions: int) -> None:
    """`batches` committed batches of `partitions` ranges each, written the way jobs write them."""
    tps = [TopicPartition("orders", p) for p in range(partitions)]
    for i in range(batches):
        ranges = tuple(PlannedRange(tp.topic, tp.partition, i * 10, i * 10 + 10) for tp in tps)
        new = tuple(tps) if i == 0 else ()
        batch, _ = store.plan_scheduled(
            name, lambda committed, r=ranges, n=new: Plan(ranges=r, new_partitions=n)
        )
        assert batch is not None
        store.commit_batch(
            batch.batch_id, store.take_fence(batch.batch_id), records_read=10 * partitions,
            records_written=10 * partitions, records_quarantined=0, delta_version=i, quarantine_delta_version=i,
        )  # fmt: skip


def bulk_fill_batches(store: ControlStore, name: str, batches: int, partitions: int) -> None:
    """The same batches as fill_batches, committed, written in one transaction with the control
    store's own insert (plan + commit per batch costs 25-80 ms here: minutes for 10,000)."""
    ranges = [
        [PlannedRange("orders", p, i * 10, i * 10 + 10) for p in range(partitions)] for i in range(batches)
    ]

    def run(conn: Any) -> None:
        for i, batch_ranges in enumerate(ranges):
            batch_id = control_queries.insert_batch(conn, name, BatchKind.SCHEDULED, batch_ranges, None, None)
            conn.execute(
                update(batches_table).where(batches_table.c.batch_id == batch_id).values(
                    status=BatchStatus.COMMITTED.value, records_read=10 * partitions,
                    records_written=10 * partitions, records_quarantined=0, delta_version=i,
                    committed_at=batches_table.c.created_at,
                )
            )  # fmt: skip

    store._db.run(run, write=True)  # a bulk fill for a benchmark


def status_with_many_batches(
    bootstrap: str, batches: int, runs: int, root: Path, *, bulk_fill: bool = False
) -> dict[str, Any]:
    """`eos-ingest status` (its library call, Kafka offsets included) and the Ingestion page's
    pipeline view and JSON, over a control DB holding `batches` committed batches: the first page,
    a deep page (keyset `before`, near the oldest batch) and a page upwards (`after`)."""
    db = f"sqlite:///{root / 'status.db'}"
    topic = make_topic(bootstrap, 6)
    config = pipeline(root, "orders", [topic], bootstrap, db)
    store = open_store(config)
    started = time.perf_counter()
    (bulk_fill_batches if bulk_fill else fill_batches)(store, "orders", batches, 6)
    fill_s = time.perf_counter() - started
    ids = [b.batch_id for b in store.list_batches("orders", limit=batches)]
    deep, middle = ids[-100], ids[len(ids) // 2]
    status_s, status_runs = median_seconds(lambda: pipeline_status(config, store), runs)

    os.environ["EOS_PIPELINES_DIR"] = str(root)
    plugin = importlib.import_module("eos_ingest.airflow.ingestion_page")
    from fastapi.testclient import TestClient

    app = plugin.build_app()
    app.dependency_overrides[app.state.require_user] = lambda: None  # no Airflow login in a benchmark
    client = TestClient(app)

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, response.text[:500]

    page_s, page_runs = median_seconds(lambda: get("/pipelines/orders"), runs)
    json_s, json_runs = median_seconds(lambda: get("/api/pipelines/orders"), runs)
    home_s, home_runs = median_seconds(lambda: get("/"), runs)
    deep_s, deep_runs = median_seconds(lambda: get(f"/pipelines/orders?before={deep}"), runs)
    deep_json_s, deep_json_runs = median_seconds(lambda: get(f"/api/pipelines/orders?before={deep}"), runs)
    after_s, after_runs = median_seconds(lambda: get(f"/pipelines/orders?after={middle}"), runs)
    return {
        "batches": batches,
        "fill": "bulk" if bulk_fill else "plan+commit",
        "fill_seconds": round(fill_s, 1),
        "page_deep_median_s": round(deep_s, 4),
        "page_deep_runs_s": deep_runs,
        "page_deep_json_median_s": round(deep_json_s, 4),
        "page_deep_json_runs_s": deep_json_runs,
        "page_after_median_s": round(after_s, 4),
        "page_after_runs_s": after_runs,
        "status_median_s": round(status_s, 4),
        "status_runs_s": status_runs,
        "page_median_s": round(page_s, 4),
        "page_runs_s": page_runs,
        "page_json_median_s": round(json_s, 4),
        "page_json_runs_s": json_runs,
        "home_median_s": round(home_s, 4),
        "home_runs_s": home_runs,
    }


DAG_PARSE = """
import json, sys, time
from airflow.dag_processing.dagbag import DagBag
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
total = time.perf_counter() - started
stats = {s.file: s.duration.total_seconds() for s in bag.dagbag_stats}
print(json.dumps({"seconds": total, "dags": len(bag.dags), "errors": bag.import_errors, "files": stats}, default=str))
"""


def dag_folder_with_many_pipelines(pipelines: int, runs: int, root: Path) -> dict[str, Any]:
    """DagBag over dags/ with `pipelines` pipeline files: the time Airflow's parser spends, in a
    fresh interpreter each run (Airflow's own import excluded: it is paid once per parser process)."""
    folder = root / "many"
    folder.mkdir()
    for i in range(pipelines):
        pipeline(folder, f"p{i:03d}", [f"topic_{i}"], "127.0.0.1:9", f"sqlite:///{root / 'dags.db'}")
    env = {**os.environ, "EOS_PIPELINES_DIR": str(folder), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.setdefault("AIRFLOW_HOME", str(root / "airflow"))
    times, dags = [], 0
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", DAG_PARSE, str(paths.REPO_ROOT / "dags")],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"parsing the DAG folder failed:\n{done.stderr[-3000:]}")
        parsed = json.loads(done.stdout.strip().splitlines()[-1])
        assert not parsed["errors"], parsed["errors"]
        times.append(round(parsed["seconds"], 4))
        dags = parsed["dags"]
    return {
        "pipelines": pipelines,
        "dags": dags,
        "median_s": round(statistics.median(times), 4),
        "runs_s": times,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.growth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--partitions", type=int, default=600)
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--pipelines", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["plan", "status", "dag_folder"], help="run one part only")
    parser.add_argument("--bulk-fill", action="store_true", help="write the batches in one transaction")
    args = parser.parse_args(argv)
    parts: dict[str, Callable[[Path], dict[str, Any]]] = {
        "plan": lambda root: plan_many_partitions(args.bootstrap, args.partitions, args.runs, root),
        "status": lambda root: status_with_many_batches(
            args.bootstrap, args.batches, args.runs, root, bulk_fill=args.bulk_fill
        ),
        "dag_folder": lambda root: dag_folder_with_many_pipelines(args.pipelines, args.runs, root),
    }
    with tempfile.TemporaryDirectory(prefix="eos-growth-") as tmp:
        root = Path(tmp)
        result = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": f"{platform.machine()} {os.cpu_count()} cores",
            "load_before": os.getloadavg(),
            **{name: run(root) for name, run in parts.items() if args.only in (None, name)},
            "load_after": os.getloadavg(),
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
