"""How a batch's cost grows with the table and with the records: the Delta replace and the audit
with 1, 10 and 100 batches already in the table; the peak memory of the gate's recount and of
`eos-ingest verify` at two sizes. Medians of --runs.

    python -m bench.table_growth --bootstrap 127.0.0.1:9092          # after `make stack-up`
    python -m bench.table_growth --checkpoints 1,3 --runs 2 --batch-records 2000 \\
        --memory-records 20000,100000                                 # a small trial

Targets (issue "Throughput"): the replace time and the audit time of batch N with 1, 10 and 100
batches already in the table are flat, <= 1.2x from 1 to 100; the peak memory of the gate's
independent recount and of `eos-ingest verify` is O(partitions), not O(records), shown on 5M
records. Results are appended to bench/results/table_growth.jsonl.

Growth: one pipeline (SQLite control DB and Delta table in a temporary folder) over a topic of
--batch-records-sized transactions (JSON values of bench/workload.py, no aborts), so every batch
reads exactly one transaction. Batches run one after another in this process, in one Spark
session (local[2], driver memory 2g), each through batch.sequence.run_fenced with the gate on, as
`eos-ingest run --until-caught-up` runs them. When the table holds C committed batches (each of
--checkpoints), the next --runs batches are timed: writer.replace_ranges of the table and of the
quarantine table (wrapped), and the job's "write" phase (log lines "batch N: phase write" to
"phase written": both replaces and the version lookups). The first of them (batch C+1, with C
batches before it) is then audited --runs times (audit.audit_batch: delta-rs and GX on pandas, in
this process). Before any of it, --warm-up-batches batches of the same topic go into another
table, and one of them is audited, untimed: the JIT and the first Delta writes and audit are paid
there, not by the first checkpoint. Ratios are medians at a checkpoint over medians at the first one.

Memory: per --memory-records size, a topic of bench/workload.py's workload (transactions of 5,000,
every 20th aborted). A pipeline ingests it in batches of --memory-batch-records (the gate off:
bench/ungated.py, only this fill, which nothing here measures); a second pipeline plans one
batch over all of it and never runs it. After the Spark session stopped: (a) a child process runs
quality.committed_record_count on that planned batch and reports its own peak RSS (VmHWM)
before and after the count; (b) `python -m eos_ingest.cli verify --config <yaml>` of the ingested
pipeline runs with its process tree sampled every 0.2 s (bench/measure.py's poller, plus each
process's VmHWM): the Python process and the JVM apart. Ratios are the larger size over the smaller.

The state folder (GX results and Data Docs) is the temporary folder too, with the Spark jars of
the usual state folder linked into it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench import workload
from bench.measure import RssPoller
from eos_ingest import paths

RESULTS = paths.REPO_ROOT / "bench" / "results" / "table_growth.jsonl"
TARGET_RATIO = 1.2

log = logging.getLogger("bench.table_growth")


# ---------------------------------------------------------------------------------------------
# Pure helpers (tests/unit/bench/test_table_growth.py)


def parse_sizes(text: str) -> list[int]:
    """'1,10,100' or '500k,5M' -> sorted distinct positive ints."""
    sizes = set()
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
        number = part[:-1] if scale != 1 else part
        value = int(float(number) * scale)
        if value < 1:
            raise ValueError(f"sizes must be >= 1, got {part!r}")
        sizes.add(value)
    if not sizes:
        raise ValueError("no sizes given")
    return sorted(sizes)


def check_checkpoints(checkpoints: Sequence[int], runs: int) -> None:
    """The --runs measured batches after a checkpoint are committed too, so the next checkpoint
    must be at least --runs batches further."""
    for before, after in itertools.pairwise(checkpoints):
        if after < before + runs:
            raise ValueError(
                f"checkpoint {after} comes too soon after {before}: the {runs} batches measured after "
                f"{before} already put {before + runs} in the table (space checkpoints >= --runs apart)"
            )


def phase_seconds(marks: Sequence[tuple[float, str]]) -> dict[str, float]:
    """One batch's marks (time, name) in order -> seconds from each mark to the next, by the
    earlier mark's name (the last mark, e.g. 'committed', ends the previous one)."""
    out: dict[str, float] = {}
    for (t0, name), (t1, _) in itertools.pairwise(marks):
        out[name] = round(out.get(name, 0.0) + (t1 - t0), 4)
    return out


def summarize(per_checkpoint: Mapping[int, Sequence[float]]) -> dict[str, Any]:
    """{checkpoint: [seconds, ...]} -> medians per checkpoint, each checkpoint's median over the
    first checkpoint's, and whether the last ratio is within TARGET_RATIO."""
    medians = {c: statistics.median(v) for c, v in sorted(per_checkpoint.items()) if v}
    if not medians:
        return {"median_s": {}, "ratio": {}, "last_ratio": None, "within_target": None}
    first = next(iter(medians.values()))
    ratios = {c: (m / first if first > 0 else None) for c, m in medians.items()}
    last = ratios[max(ratios)]
    return {
        "median_s": {str(c): round(m, 4) for c, m in medians.items()},
        "ratio": {str(c): (round(r, 3) if r is not None else None) for c, r in ratios.items()},
        "last_ratio": round(last, 3) if last is not None else None,
        "within_target": last is not None and last <= TARGET_RATIO,
    }


def size_ratio(small: float | None, large: float | None) -> float | None:
    """large / small, rounded; None when either is missing or small is 0."""
    if not small or large is None:
        return None
    return round(large / small, 3)


def vm_hwm_kb(status_text: str) -> int | None:
    """VmHWM (peak resident set, kB) from the text of /proc/<pid>/status."""
    match = re.search(r"^VmHWM:\s+(\d+)\s+kB", status_text, re.MULTILINE)
    return int(match.group(1)) if match else None


def last_json_object(text: str) -> dict[str, Any]:
    """The last top-level JSON object in `text` (the CLI prints its report indented, last)."""
    start = text.rfind("\n{")
    start = start + 1 if start >= 0 else text.find("{")
    if start < 0:
        raise ValueError(f"no JSON object in output: {text[-500:]!r}")
    return dict(json.loads(text[start:]))


# ---------------------------------------------------------------------------------------------
# Workload, pipelines


def produce_equal_batches(
    bootstrap: str, topic: str, batches: int, per_partition: int, partitions: int
) -> float:
    """`batches` committed transactions of per_partition records on every partition (values of
    bench/workload.py, none aborted). Each transaction ends with one marker per partition, so a
    batch of max_records_per_partition = per_partition + 1 offsets reads exactly one of them."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tg-{uuid.uuid4().hex}", "linger.ms": 20}
    )
    producer.init_transactions(60)
    started = time.monotonic()
    per_tx = per_partition * partitions
    for b in range(batches):
        producer.begin_transaction()
        for i in range(b * per_tx, (b + 1) * per_tx):
            while True:
                try:
                    producer.produce(topic, workload.value(i), key=str(i).encode(), partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.1)
            if i % 1000 == 0:
                producer.poll(0)
        producer.commit_transaction(60)
    return time.monotonic() - started


def write_pipeline(
    folder: Path, name: str, topic: str, bootstrap: str, db_url: str, per_partition: int
) -> Path:
    doc = {
        "name": name,
        "topics": [topic],
        "kafka": {"bootstrap.servers": bootstrap},
        "kafka_conn_id": None,
        "start_from": "earliest",
        "max_records_per_partition": per_partition,
        "value": {"format": "json", "schema": workload.SCHEMA},
        "output": {"path": str(folder / "tables" / name)},
        "control_db_url": db_url,
        "schedule": None,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class PhaseLog(logging.Handler):
    """Stamps the job's 'batch N: fence', 'batch N: phase X' and 'batch N committed' lines."""

    PATTERN = re.compile(r"batch (\d+)(?:: phase (\w+)|: (fence) | (committed):)")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.marks: dict[int, list[tuple[float, str]]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = self.PATTERN.match(record.getMessage())
        if match:
            name = match.group(2) or ("start" if match.group(3) else "committed")
            self.marks.setdefault(int(match.group(1)), []).append((time.monotonic(), name))


@contextlib.contextmanager
def timed(module: Any, attribute: str, into: list[tuple[float, tuple[Any, ...]]]) -> Iterator[None]:
    """Replace module.attribute by a wrapper appending (seconds, args) of every call to `into`."""
    original: Callable[..., Any] = getattr(module, attribute)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - started, args))

    setattr(module, attribute, wrapper)
    try:
        yield
    finally:
        setattr(module, attribute, original)


def run_batch(spark: Any, config: Any, store: Any, gate: Any = None) -> Any:
    """Plan the next batch and run it as the job does (run_fenced; `gate`, a GateStep, unless the
    job's); None when caught up."""
    from eos_ingest.batch.sequence import run_fenced
    from eos_ingest.service.operations import plan_batch

    batch, _ = plan_batch(config, store)
    if batch is None:
        return None
    with contextlib.redirect_stdout(sys.stderr):  # run_fenced prints a JSON line per batch
        return run_fenced(spark, config, store, batch, gate)


def table_stats(path: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    return {"delta_version": table.version(), "files": len(table.file_uris())}


# ---------------------------------------------------------------------------------------------
# 1. Replace and audit with C batches in the table


def warm_up(
    spark: Any, args: argparse.Namespace, root: Path, topic: str, per_partition: int
) -> tuple[float, float | None]:
    """--warm-up-batches batches of the topic into another table (own control DB, same pipeline
    name), then one audit of the last: the JVM's JIT, Spark's and Delta's first writes, GX's and delta-rs's first audit are
    paid before any measurement, so the first checkpoint is not the slowest for that alone.
    Returns (seconds, seconds of the audit or None when there is no warm-up batch)."""
    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.quality import audit
    from eos_ingest.service.operations import open_store

    if args.warm_up_batches < 1:
        return 0.0, None
    started = time.monotonic()
    # The measured pipeline's name, in a folder of its own: GX's suite, validation definitions
    # and checkpoints of that name exist before the first measured gate and audit.
    folder = root / "warm-up"
    folder.mkdir()
    db = f"sqlite:///{folder / 'control.db'}"
    config = load_pipeline(write_pipeline(folder, "growth", topic, args.bootstrap, db, per_partition))
    store = open_store(config)
    try:
        last = None
        for _ in range(args.warm_up_batches):
            last = run_batch(spark, config, store) or last
    finally:
        store.close()
    if last is None:
        return round(time.monotonic() - started, 1), None
    t0 = time.perf_counter()
    audit.audit_batch(config, last.batch_id)
    return round(time.monotonic() - started, 1), round(time.perf_counter() - t0, 3)


def growth(spark: Any, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.quality import audit
    from eos_ingest.service.operations import open_store
    from eos_ingest.storage.delta import writer

    partitions = args.partitions
    per_partition = -(-args.batch_records // partitions)
    batch_records = per_partition * partitions
    total_batches = args.checkpoints[-1] + args.runs
    topic = f"table_growth_{uuid.uuid4().hex[:8]}"
    log.info("producing %s batches of %s records to %s", total_batches, batch_records, topic)
    produce_s = produce_equal_batches(args.bootstrap, topic, total_batches, per_partition, partitions)
    config = load_pipeline(
        write_pipeline(root, "growth", topic, args.bootstrap, f"sqlite:///{root / 'control.db'}", per_partition + 1)
    )  # fmt: skip
    warm_up_s, warm_up_audit_s = warm_up(spark, args, root, topic, per_partition + 1)
    store = open_store(config)
    phases = PhaseLog()
    logging.getLogger("eos_ingest.batch").addHandler(phases)  # the attempt's lines
    replaces: list[tuple[float, tuple[Any, ...]]] = []
    reads: list[tuple[float, tuple[Any, ...]]] = []
    validations: list[tuple[float, tuple[Any, ...]]] = []
    committed = 0
    fill_s = 0.0
    points: list[dict[str, Any]] = []
    sizes: list[int] = []

    def one_batch() -> Any:
        nonlocal committed
        result = run_batch(spark, config, store)
        if result is None:
            raise RuntimeError(f"topic {topic} ran out of batches after {committed}")
        committed += 1
        sizes.append(result.records_read)
        log.info("batch %s: %s records in %.1f s", result.batch_id, result.records_read, result.seconds)
        return result

    try:
        with timed(writer, "replace_ranges", replaces):
            for checkpoint in args.checkpoints:
                started = time.monotonic()
                while committed < checkpoint:
                    filled = one_batch()
                    if warm_up_audit_s is None:  # the imports and GX's first audit, paid once
                        t0 = time.perf_counter()
                        audit.audit_batch(config, filled.batch_id)
                        warm_up_audit_s = round(time.perf_counter() - t0, 3)
                fill_s += time.monotonic() - started
                replaces.clear()
                point: dict[str, Any] = {"batches_in_table": committed, **table_stats(config.output_path)}
                measured = []
                for i in range(args.runs):
                    replaces.clear()
                    result = one_batch()
                    table_s = [s for s, a in replaces if a[1].path == str(config.output_path)]
                    quarantine_s = [s for s, a in replaces if a[1].path == str(config.quarantine_path)]
                    measured.append(
                        {
                            "batch_id": result.batch_id,
                            "records": result.records_read,
                            "replace_table_s": round(sum(table_s), 4),
                            "replace_quarantine_s": round(sum(quarantine_s), 4),
                            "phases_s": phase_seconds(phases.marks.get(result.batch_id, [])),
                            "batch_s": round(result.seconds, 3),
                        }
                    )
                    if i == 0:  # audit batch C+1, C batches before it
                        audits, read_s, validate_s = [], [], []
                        # The read: the tables' opens (log replay) and the batch's rows, as
                        # audit_batch calls them (delta-rs); the validation: GX and Data Docs.
                        with (
                            timed(audit, "delta_rs_table", reads),
                            timed(audit, "_batch_rows", reads),
                            timed(audit, "validate", validations),
                        ):
                            for _ in range(args.runs):
                                reads.clear()
                                validations.clear()
                                t0 = time.perf_counter()
                                report = audit.audit_batch(config, result.batch_id)
                                audits.append(round(time.perf_counter() - t0, 4))
                                if not report["success"]:
                                    raise RuntimeError(f"audit of batch {result.batch_id} failed: {report}")
                                if not reads or not validations:
                                    raise RuntimeError(
                                        "audit_batch no longer calls what read_s/validate_s time"
                                    )
                                read_s.append(round(sum(s for s, _ in reads), 4))
                                validate_s.append(round(sum(s for s, _ in validations), 4))
                        point["audit"] = {
                            "batch_id": result.batch_id,
                            "runs_s": audits,
                            "read_s": read_s,
                            "validate_s": validate_s,
                        }
                point["batches"] = measured
                points.append(point)
                log.info("checkpoint %s: %s", checkpoint, json.dumps(point))
    finally:
        logging.getLogger("eos_ingest.batch").removeHandler(phases)
        store.close()

    def per_checkpoint(pick: Callable[[dict[str, Any]], list[float]]) -> dict[int, list[float]]:
        return {p["batches_in_table"]: pick(p) for p in points}

    summary = {
        "replace_table": summarize(per_checkpoint(lambda p: [b["replace_table_s"] for b in p["batches"]])),
        "replace_both": summarize(
            per_checkpoint(lambda p: [b["replace_table_s"] + b["replace_quarantine_s"] for b in p["batches"]])
        ),
        "write_phase": summarize(per_checkpoint(lambda p: [b["phases_s"].get("write", 0.0) for b in p["batches"]])),
        "audit": summarize(per_checkpoint(lambda p: p["audit"]["runs_s"])),
        "audit_read": summarize(per_checkpoint(lambda p: p["audit"]["read_s"])),
        "audit_validate": summarize(per_checkpoint(lambda p: p["audit"]["validate_s"])),
        "batch": summarize(per_checkpoint(lambda p: [b["batch_s"] for b in p["batches"]])),
    }  # fmt: skip
    return {
        "topic": topic,
        "partitions": partitions,
        "batch_records": batch_records,
        "batch_records_seen": sorted(set(sizes)),
        "batches": committed,
        "produce_seconds": round(produce_s, 1),
        "fill_seconds": round(fill_s, 1),
        "warm_up_batches": args.warm_up_batches,
        "warm_up_seconds": warm_up_s,
        "warm_up_audit_s": warm_up_audit_s,
        "checkpoints": points,
        "summary": summary,
    }


# ---------------------------------------------------------------------------------------------
# 2. Peak memory of the recount and of verify


class PeakPoller(RssPoller):
    """bench/measure.py's poller (peak of the summed RSS of java and of python processes), plus
    the largest VmHWM (the kernel's own peak RSS) seen for each process of the tree."""

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.hwm_kb: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> PeakPoller:
        super().__enter__()
        return self

    def sample(self) -> None:
        super().sample()
        try:
            root = psutil.Process(self.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for proc in tree:
            try:
                name = proc.name()
                kb = vm_hwm_kb(Path(f"/proc/{proc.pid}/status").read_text())
            except (psutil.Error, OSError):
                continue
            if kb is not None and kb > self.hwm_kb.get(proc.pid, (name, 0))[1]:
                self.hwm_kb[proc.pid] = (name, kb)

    def largest_mb(self, java: bool) -> float | None:
        """The largest VmHWM among the java (or the python) processes, in MB."""
        kbs = [
            kb for name, kb in self.hwm_kb.values() if (name == "java" if java else name.startswith("python"))
        ]
        return round(max(kbs) * 1024 / 1e6) if kbs else None


def run_peak(argv: Sequence[str], timeout_s: float) -> tuple[str, float, PeakPoller]:
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakPoller(proc.pid) as poller:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {proc.returncode}:\n{(out + err)[-4000:]}")
    return out, seconds, poller


# The child's own peak RSS before and after the count: VmHWM of its memory map. Not ru_maxrss:
# Linux carries the parent's peak (this benchmark's, with its JVM gateway) across fork and exec.
RECOUNT = """
import json, re, sys, time
from eos_ingest.config.pipeline import load_pipeline
from eos_ingest.control.store import ControlStore
from eos_ingest.quality.gate import committed_record_count
def hwm_kb():
    with open("/proc/self/status") as status:
        return int(re.search(r"^VmHWM:\\s+(\\d+)", status.read(), re.MULTILINE).group(1))
config = load_pipeline(sys.argv[1])
store = ControlStore(config.control_db_url)
batch = store.get_batch(int(sys.argv[2]))
store.close()
before = hwm_kb()
started = time.perf_counter()
records = committed_record_count(config, batch)
seconds = time.perf_counter() - started
print(json.dumps({"records": records, "seconds": seconds, "hwm_before_kb": before, "hwm_kb": hwm_kb()}))
"""


def prepare_memory_size(spark: Any, args: argparse.Namespace, root: Path, records: int) -> dict[str, Any]:
    """Produce `records`, ingest them (gate off) and plan the recount's batch over all of them."""
    from bench.ungated import Ungated
    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.service.operations import catch_up_target, caught_up, open_store, plan_batch

    topic = f"table_growth_mem_{records}_{uuid.uuid4().hex[:6]}"
    log.info("producing %s records to %s", records, topic)
    w = workload.produce(args.bootstrap, topic, records, args.partitions)
    db = f"sqlite:///{root / 'memory.db'}"
    per_partition = max(1, -(-args.memory_batch_records // args.partitions))
    ingest_yaml = write_pipeline(root, f"mem{records}", topic, args.bootstrap, db, per_partition)
    config = load_pipeline(ingest_yaml)
    store = open_store(config)
    started = time.monotonic()
    batches = written = 0
    try:
        target = catch_up_target(config)
        while not caught_up(store.committed_offsets(config.name), target):
            result = run_batch(spark, config, store, Ungated())
            if result is None:
                break
            batches += 1
            written += result.records_read
            log.info("mem%s batch %s: %s records", records, result.batch_id, result.records_read)
    finally:
        store.close()
    if written != w.records_committed:
        raise RuntimeError(
            f"{topic}: ingested {written} records, the workload committed {w.records_committed}"
        )
    # A plan of everything in one batch (never run): the gate's recount is over such a batch.
    recount_yaml = write_pipeline(root, f"recount{records}", topic, args.bootstrap, db, records + 1)
    recount_config = load_pipeline(recount_yaml)
    recount_store = open_store(recount_config)
    batch, _ = plan_batch(recount_config, recount_store)
    recount_store.close()
    assert batch is not None
    return {
        "records_produced": records,
        "records_committed": w.records_committed,
        "produce_seconds": round(w.seconds, 1),
        "ingest_batches": batches,
        "ingest_seconds": round(time.monotonic() - started, 1),
        "_ingest_yaml": str(ingest_yaml),
        "_recount_yaml": str(recount_yaml),
        "_recount_batch": batch.batch_id,
    }


def measure_memory_size(prepared: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    out, seconds, poller = run_peak(
        [sys.executable, "-c", RECOUNT, prepared["_recount_yaml"], str(prepared["_recount_batch"])], timeout_s
    )
    counted = json.loads(out.strip().splitlines()[-1])
    if counted["records"] != prepared["records_committed"]:
        raise RuntimeError(f"recount counted {counted['records']}, expected {prepared['records_committed']}")
    recount = {
        "records_counted": counted["records"],
        "count_seconds": round(counted["seconds"], 2),
        "process_seconds": round(seconds, 2),
        "peak_rss_mb": round(counted["hwm_kb"] * 1024 / 1e6),
        "peak_rss_before_count_mb": round(counted["hwm_before_kb"] * 1024 / 1e6),
        "count_growth_mb": round((counted["hwm_kb"] - counted["hwm_before_kb"]) * 1024 / 1e6, 1),
        "sampled_peak_rss_mb": round(poller.peak_python_mb),
    }
    log.info("recount %s: %s", prepared["records_produced"], recount)
    argv = [sys.executable, "-m", "eos_ingest.cli", "verify", "--config", prepared["_ingest_yaml"]]
    out, seconds, poller = run_peak(argv, timeout_s)
    report = last_json_object(out)
    if not report.get("ok") or report.get("expected") != prepared["records_committed"]:
        raise RuntimeError(f"verify did not find the {prepared['records_committed']} records: {report}")
    verify = {
        "ok": report["ok"],
        "expected": report["expected"],
        "found": report["found"],
        "seconds": round(seconds, 1),
        "peak_rss_python_mb": poller.largest_mb(java=False),  # VmHWM of the CLI's process
        "peak_rss_jvm_mb": poller.largest_mb(java=True),  # VmHWM of the driver JVM
        "sampled_peak_rss_python_mb": round(poller.peak_python_mb),
        "sampled_peak_rss_jvm_mb": round(poller.peak_jvm_mb),
    }
    log.info("verify %s: %s", prepared["records_produced"], verify)
    public = {k: v for k, v in prepared.items() if not k.startswith("_")}
    return {**public, "recount": recount, "verify": verify}


def memory_ratios(sizes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Largest size over smallest: of the records and of each peak."""
    small, large = sizes[0], sizes[-1]

    def ratio(part: str, key: str) -> float | None:
        return size_ratio(small[part].get(key), large[part].get(key))

    return {
        "records": size_ratio(small["records_committed"], large["records_committed"]),
        "recount_peak_rss": ratio("recount", "peak_rss_mb"),
        "recount_count_growth": ratio("recount", "count_growth_mb"),
        "verify_peak_rss_python": ratio("verify", "peak_rss_python_mb"),
        "verify_peak_rss_jvm": ratio("verify", "peak_rss_jvm_mb"),
    }


# ---------------------------------------------------------------------------------------------


def link_state(root: Path) -> Path:
    """A state folder in `root` (GX results, Data Docs) holding the usual state folder's Spark jars."""
    jars = paths.spark_jars_dir()
    state = root / "state"
    (state / "jars").mkdir(parents=True)
    (state / "jars" / "spark").symlink_to(jars, target_is_directory=True)
    return state


def git_commit() -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=paths.REPO_ROOT, capture_output=True, text=True, check=False
    )  # fmt: skip
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.table_growth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    default_bootstrap = (
        os.environ.get("EOS_KAFKA_BOOTSTRAP") or f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}"
    )
    parser.add_argument("--bootstrap", default=default_bootstrap, help=f"default {default_bootstrap}")
    parser.add_argument("--checkpoints", type=parse_sizes, default=[1, 10, 100],
                        help="batches in the table before each measurement (default 1,10,100)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="batches timed and audits per checkpoint")
    parser.add_argument("--batch-records", type=int, default=10_000, help="records per batch")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--warm-up-batches", type=int, default=3,
                        help="batches into another table (and one audit) before any measurement")  # fmt: skip
    parser.add_argument("--memory-records", type=parse_sizes, default=[500_000, 5_000_000],
                        help="sizes for the memory part, e.g. 500k,5M (default)")  # fmt: skip
    parser.add_argument("--memory-batch-records", type=int, default=500_000,
                        help="records per batch when filling the memory part's tables")  # fmt: skip
    parser.add_argument("--skip", choices=("growth", "memory"), action="append", default=[],
                        help="leave a part out (repeatable)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per measured child process")
    parser.add_argument("--trial", action="store_true", help="mark the result line as a trial")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    try:
        check_checkpoints(args.checkpoints, args.runs)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    logging.getLogger("eos_ingest").setLevel(logging.INFO)  # the job's phase lines
    logging.getLogger("eos_ingest.quality.audit").setLevel(logging.WARNING)  # its report is long

    from eos_ingest.spark.session import build_session

    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "commit": git_commit(),
        "load_before": os.getloadavg(),
        "parameters": {
            k: v for k, v in vars(args).items() if k not in ("bootstrap", "trial")
        },
        "targets": {
            "growth": "replace and audit of batch N with 1, 10, 100 batches in the table: flat, <= 1.2x from 1 to 100",
            "memory": "peak memory of the recount and of verify: O(partitions), not O(records), on 5M records",
        },
    }  # fmt: skip
    if args.trial:
        result["trial"] = True
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eos-table-growth-") as tmp:
        root = Path(tmp)
        os.environ["EOS_STATE_DIR"] = str(link_state(root))
        spark = build_session("bench table_growth", master="local[2]", extra={"spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("ERROR")
        prepared = []
        try:
            if "growth" not in args.skip:
                result["growth"] = growth(spark, args, root)
            if "memory" not in args.skip:
                prepared = [prepare_memory_size(spark, args, root, n) for n in args.memory_records]
        finally:
            spark.stop()
        if prepared:  # the bench's JVM is gone: each measured process has the machine to itself
            sizes = [measure_memory_size(p, args.timeout) for p in prepared]
            result["memory"] = {"sizes": sizes, "ratio_largest_over_smallest": memory_ratios(sizes)}
    result["seconds"] = round(time.monotonic() - started, 1)
    result["load_after"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
