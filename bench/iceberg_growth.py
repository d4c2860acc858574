"""How an Iceberg batch's cost grows with the table's history, `maintain` never run: the whole batch
and its write phase with 1, 10, 100 and 1,000 batches in the table, medians of --runs, beside
bench/table_growth.py's Delta figures. Target (issue 48, item 5): <= 1.2x from 1 to 1,000.

    python -m bench.iceberg_growth                                   # after `make stack-up`
    python -m bench.iceberg_growth --checkpoints 1,10 --runs 2 --trial    # a small trial

One pipeline (SQLite control DB, the Iceberg table in its JDBC catalog, a temporary folder) over a
topic of --batch-records-sized transactions, one partition. Batches run in this process, in one
Spark session (local[2]), through batch.sequence.run_fenced with the gate on, as `eos-ingest run
--until-caught-up` runs them; they are the measured ones. The history between checkpoints is made
affordable by filling: each filled batch is a replace of tiny ranges of another
topic name, committed through Iceberg's Java API (Filler): main gains what a batch's publish adds
to it (a DELETE snapshot, an append snapshot with a marker, a data file, manifest entries) in tens
of milliseconds, without a Spark job, a Kafka read or a gate (a batch here takes seconds), and at
the same cost before and after the marker search was bounded.

After each fill the bench waits the marker search's clock margin (EOS_ICEBERG_CLOCK_MARGIN_S, 60 s)
and two seconds more: a batch planned right after a burst of commits reads the burst's snapshots
(those within the margin of its plan), and the fill is such a burst, at a rate no pipeline writes;
the wait makes each checkpoint measure the history, not the fill's rate. The measured batches of a
checkpoint run back to back, each reading the previous ones' snapshots, as a busy pipeline's do.
Before the first checkpoint, --warm-up-batches batches go into another table (the JIT, Spark's and
Iceberg's first writes are paid there). Results are appended to bench/results/iceberg_growth.jsonl.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench.table_growth import (
    PhaseLog,
    check_checkpoints,
    git_commit,
    link_state,
    parse_sizes,
    phase_seconds,
    produce_equal_batches,
    run_batch,
    summarize,
    write_pipeline,
)
from eos_ingest import paths
from eos_ingest.storage.table_format import Replace

RESULTS = paths.REPO_ROOT / "bench" / "results" / "iceberg_growth.jsonl"
TABLE = "lake.events"
FILL_TOPIC = "iceberg_growth_fill"

log = logging.getLogger("bench.iceberg_growth")


def iceberg_pipeline(folder: Path, name: str, topic: str, bootstrap: str, per_partition: int) -> Any:
    """bench/table_growth's pipeline, its output an Iceberg table in the control DB's JDBC catalog."""
    from eos_ingest.config.pipeline import load_pipeline

    folder.mkdir(parents=True, exist_ok=True)
    path = write_pipeline(folder, name, topic, bootstrap, f"sqlite:///{folder / 'control.db'}", per_partition)
    doc = yaml.safe_load(path.read_text())
    doc["output"] = {"format": "iceberg", "table": TABLE, "path": str(folder / "warehouse")}
    path.write_text(yaml.safe_dump(doc))
    return load_pipeline(path)


class Filler:
    """Batches of history (see the module): per filled batch, what a batch's publish adds to main,
    committed through Iceberg's Java API: a DELETE snapshot of the batch's ranges (of another topic
    name: it matches nothing, as a new batch's does) and an append snapshot of one data file
    carrying the batch's marker. The data file is a copy of one written once by the format's replace
    (the fill topic's rows), so every filled batch has a file of its own in the manifests."""

    def __init__(self, spark: Any, config: Any, batch_id: int) -> None:
        from eos_ingest.plan.ranges import PlannedRange
        from eos_ingest.storage.iceberg.catalog import IcebergCatalog
        from eos_ingest.storage.iceberg.format import IcebergFormat

        fmt = IcebergFormat(IcebergCatalog.of(config))
        template = spark.table(fmt.catalog.identifier(TABLE)).where(f"batch_id = {batch_id}")
        rows = [{**row.asDict(), "kafka_topic": FILL_TOPIC, "batch_id": 0} for row in template.collect()]
        offsets = [row["kafka_offset"] for row in rows]
        ranges = [PlannedRange(FILL_TOPIC, 0, min(offsets), max(offsets) + 1)]
        fmt.replace_ranges(spark, Replace(spark.createDataFrame(rows, template.schema), TABLE, ranges, 0))
        self.spark, self.width = spark, max(offsets) + 1
        self.table = fmt.catalog.java_table(spark, TABLE)
        self.table.refresh()
        added = self.table.currentSnapshot().addedDataFiles(self.table.io()).iterator()
        self.template = added.next()
        self.filled = 0

    def fill(self) -> None:
        jvm = self.spark._jvm
        e = jvm.org.apache.iceberg.expressions.Expressions
        self.filled += 1
        start = self.filled * self.width
        ranges = getattr(e, "and")(
            e.equal("kafka_topic", FILL_TOPIC),
            getattr(e, "and")(
                e.greaterThanOrEqual("kafka_offset", start), e.lessThan("kafka_offset", start + self.width)
            ),
        )
        self.table.newDelete().deleteFromRowFilter(ranges).commit()
        source = str(self.template.location())
        copy = f"{source.rsplit('/', 1)[0]}/fill-{uuid.uuid4().hex}.parquet"
        shutil.copyfile(source.removeprefix("file:"), copy.removeprefix("file:"))
        data_file = (
            jvm.org.apache.iceberg.DataFiles.builder(self.table.spec())
            .copy(self.template)
            .withPath(copy)
            .build()
        )
        self.table.newAppend().appendFile(data_file).set(
            "eos.batch-id", str(1_000_000 + self.filled)
        ).commit()


def snapshots_on_main(spark: Any, config: Any) -> int:
    from eos_ingest.storage.iceberg.catalog import IcebergCatalog

    table = IcebergCatalog.of(config).java_table(spark, TABLE)
    return int(spark._jvm.com.google.common.collect.Iterables.size(
        spark._jvm.org.apache.iceberg.util.SnapshotUtil.currentAncestors(table)
    ))  # fmt: skip


def growth(spark: Any, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    per_partition = args.batch_records
    measured = args.runs * len(args.checkpoints)
    topic = f"iceberg_growth_{uuid.uuid4().hex[:8]}"
    produce_equal_batches(args.bootstrap, topic, measured + args.warm_up_batches + 1, per_partition, 1)
    warm = iceberg_pipeline(root / "warm-up", "growth", topic, args.bootstrap, per_partition + 1)
    config = iceberg_pipeline(root / "measured", "growth", topic, args.bootstrap, per_partition + 1)
    from eos_ingest.service.operations import open_store

    started = time.monotonic()
    warm_store = open_store(warm)
    for _ in range(args.warm_up_batches):
        run_batch(spark, warm, warm_store)
    warm_store.close()
    warm_up_s = round(time.monotonic() - started, 1)
    store = open_store(config)
    phases = PhaseLog()
    logging.getLogger("eos_ingest.batch").addHandler(phases)  # the attempt's lines
    in_table, points, filler = 0, [], None
    fill_s = 0.0
    try:
        for checkpoint in args.checkpoints:
            t0 = time.monotonic()
            while in_table < checkpoint:
                if filler is None:  # the first batch in the table is a real one, the fill's rows
                    first = run_batch(spark, config, store)
                    filler = Filler(spark, config, first.batch_id)
                else:
                    filler.fill()
                in_table += 1
            fill_s += time.monotonic() - t0
            snapshots = snapshots_on_main(spark, config)
            time.sleep(args.settle)  # see the module: the history, not the fill's rate
            runs = []
            for _ in range(args.runs):
                result = run_batch(spark, config, store)
                in_table += 1
                marks = phase_seconds(phases.marks.get(result.batch_id, []))
                runs.append({"batch_id": result.batch_id, "batch_s": round(result.seconds, 3),
                             "write_s": marks.get("write", 0.0), "phases_s": marks})  # fmt: skip
            point = {"batches_in_table": checkpoint, "snapshots_on_main": snapshots, "batches": runs}
            points.append(point)
            log.info("checkpoint %s: %s", checkpoint, json.dumps(point))
    finally:
        logging.getLogger("eos_ingest.batch").removeHandler(phases)
        store.close()

    def per_checkpoint(key: str) -> dict[int, list[float]]:
        return {p["batches_in_table"]: [b[key] for b in p["batches"]] for p in points}

    return {
        "topic": topic,
        "warm_up_seconds": warm_up_s,
        "fill_seconds": round(fill_s, 1),
        "fill_median_s": round(fill_s / max(1, in_table - measured - 1), 3),
        "checkpoints": points,
        "summary": {"batch": summarize(per_checkpoint("batch_s")), "write_phase": summarize(per_checkpoint("write_s"))},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.iceberg_growth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    bootstrap = os.environ.get("EOS_KAFKA_BOOTSTRAP") or f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    parser.add_argument("--bootstrap", default=bootstrap, help=f"default {bootstrap}")
    parser.add_argument("--checkpoints", type=parse_sizes, default=[1, 10, 100, 1000],
                        help="batches in the table before each measurement (default 1,10,100,1000)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="batches timed per checkpoint")
    parser.add_argument("--batch-records", type=int, default=10, help="records per batch (one partition)")
    parser.add_argument("--warm-up-batches", type=int, default=3, help="batches into another table first")
    margin = float(os.environ.get("EOS_ICEBERG_CLOCK_MARGIN_S") or 60)
    parser.add_argument("--settle", type=float, default=margin + 2,
                        help=f"seconds to wait after each fill (default the clock margin + 2: {margin + 2:g})")  # fmt: skip
    parser.add_argument("--label", default="", help="what code this is (e.g. 'before the bound')")
    parser.add_argument("--trial", action="store_true", help="mark the result line as a trial")
    args = parser.parse_args(argv)
    check_checkpoints(args.checkpoints, args.runs)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    logging.getLogger("eos_ingest").setLevel(logging.INFO)  # the job's phase lines

    from eos_ingest.spark.session import build_session

    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "commit": git_commit(),
        "label": args.label,
        "load_before": os.getloadavg(),
        "parameters": {k: v for k, v in vars(args).items() if k not in ("bootstrap", "trial", "label")},
        "target": "a whole Iceberg batch with 1 to 1,000 batches in the table, no maintain: <= 1.2x",
    }
    if args.trial:
        result["trial"] = True
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eos-iceberg-growth-") as tmp:
        root = Path(tmp)
        iceberg_jars = paths.iceberg_jars_dir()
        state = link_state(root)
        (state / "jars" / "iceberg").symlink_to(iceberg_jars, target_is_directory=True)
        os.environ["EOS_STATE_DIR"] = str(state)
        spark = build_session(
            "bench iceberg_growth", master="local[2]", extra={"spark.driver.memory": "2g"}, iceberg=True
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            result["growth"] = growth(spark, args, root)
        finally:
            spark.stop()
    result["seconds"] = round(time.monotonic() - started, 1)
    result["load_after"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result["growth"]["summary"], indent=2))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
