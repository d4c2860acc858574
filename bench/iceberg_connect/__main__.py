"""python -m bench.iceberg_connect: see bench/iceberg_connect/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.chaos.procs import Processes, free_ports
from bench.iceberg_connect import eos_side, measure
from bench.iceberg_connect.worker import REPO, SinkConfig, jars_dir, versions
from bench.workload import produce
from eos_ingest import paths

RESULTS = Path(__file__).resolve().parents[1] / "results" / "iceberg_connect.jsonl"


def log(message: str) -> None:
    print(f"iceberg-connect [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of the chaos run (0: no chaos run)")
    # tasks.max=2 on a fresh JDBC catalog: both tasks auto-create the namespace at once, one INSERT
    # fails and that task dies for good (seen twice of two runs): see bench/README.md.
    parser.add_argument("--tasks", type=int, default=1, help="the sink's tasks.max")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run may take")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--bootstrap", help="a running broker (default: one of its own on free ports)")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument(
        "--sides", default="connect,eos", help="connect (the sink), eos (eos-ingest run on Iceberg), or both"
    )
    parser.add_argument("--note", default="")
    parser.add_argument("--no-save", action="store_true", help="print the result, append nothing")
    args = parser.parse_args()

    state = paths.state_dir()
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    jars = jars_dir(state) if "connect" in sides else None  # the sink's classpath, fetched on first use
    home = Path(tempfile.mkdtemp(prefix="iceberg-connect-", dir=state))
    procs = Processes(home, {**os.environ, "EOS_STATE_DIR": str(state)})
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            procs.broker_up()
            bootstrap = procs.bootstrap
        topic = f"iceberg_connect_{uuid.uuid4().hex[:8]}"
        per_tx = max(1, min(5000, args.records // 20))
        workload = produce(bootstrap, topic, args.records, args.partitions, per_tx)
        log(f"{workload.records_committed:,} committed of {workload.records_produced:,} in {topic}")
        expected = measure.committed_view(bootstrap, topic, workload.records_committed)
        runs = []
        plan = [
            (side, kind, kills) for side in sides for kind, kills in (("clean", 0), ("chaos", args.kills))
        ]
        clean_by_side: dict[str, float | None] = {}
        for side, kind, kills in plan:
            if kind == "chaos" and kills == 0:
                continue
            name = f"{side}_{kind}_{uuid.uuid4().hex[:8]}"
            # Kills land between 30% and 90% of the side's clean run time after each (re)start.
            base = clean_by_side.get(side) or 20.0
            window = (0.3 * base, 0.9 * base)
            log(f"{side} {kind} run: {kills} kill(s), window {window[0]:.1f}-{window[1]:.1f} s")
            if side == "eos":
                result = eos_side.run(
                    home / name, bootstrap, topic, expected, kills, window,
                    timeout_s=args.timeout, seed=args.seed,
                )  # fmt: skip
            else:
                config = SinkConfig(bootstrap, topic, name, home / name, args.tasks, args.commit_interval_ms)
                measure.create_control_topic(config)
                assert jars is not None
                result = measure.run(
                    config, jars, free_ports(1)[0], expected, kills, window,
                    timeout_s=args.timeout, seed=args.seed,
                )  # fmt: skip
            row = {"side": side, **result.as_dict(workload.records_committed, workload.value_bytes)}
            row["kill_window_s"] = [round(w, 2) for w in window] if kills else None
            log(json.dumps(row))
            runs.append(row)
            if kind == "clean":
                clean_by_side[side] = result.seconds
    finally:
        problems = procs.cleanup()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True, capture_output=True
    ).stdout.strip()
    doc = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_1m_after": round(os.getloadavg()[0], 2),
        "records_produced": workload.records_produced,
        "records_committed": workload.records_committed,
        "aborted_transactions": workload.aborted_transactions,
        "transactions": workload.transactions,
        "partitions": workload.partitions,
        "value_bytes": workload.value_bytes,
        "tasks": args.tasks,
        "commit_interval_ms": args.commit_interval_ms,
        "versions": versions(jars) if jars is not None else {},
        "runs": runs,
        "cleanup_problems": problems,
        "note": args.note,
    }
    print(json.dumps(doc, indent=2))
    if not args.no_save:
        with RESULTS.open("a") as out:
            out.write(json.dumps(doc) + "\n")
        log(f"appended to {RESULTS}")
    failed = [r for r in runs if r["errors"] or r["final"].get("missing") or r["final"].get("duplicates")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
