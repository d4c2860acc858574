"""Batches without the quality gate, to measure what the gate costs: (e) of `make bench` and the
memory fill of bench/table_growth.py. Never for real data: such a batch commits without its checks.

The package has no switch for it. Ungated is a GateStep (eos_ingest/batch/gate_step.py) that checks
nothing and starts no count, with a warning per batch; in-process batches pass it to run_fenced,
and `python -m bench.ungated --config <yaml> --master <master>` does what `eos-ingest run` does
(plan, spark-submit the job, print the batch's summary) with bench/ungated_job/ungated_job.py as the
job: the package's job with Ungated passed to it.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from eos_ingest.spark.submit import JOB_SCRIPT

log = logging.getLogger(__name__)

UNGATED_JOB = Path(__file__).resolve().parent / "ungated_job" / "ungated_job.py"


class Ungated:
    """A GateStep that checks nothing: no GX import, no independent count, nothing read back."""

    def preload(self) -> None:
        pass

    def start_count(self, config: Any, batch: Any) -> Future[int] | None:
        return None

    def check(
        self,
        spark: Any,
        store: Any,
        config: Any,
        batch: Any,
        staged: Any,
        rows: Any,
        quarantined: int,
        count: Future[int] | None,
    ) -> None:
        log.warning(
            "batch %s: the quality gate is OFF (bench/ungated.py, for benchmarks only)", batch.batch_id
        )


def ungated_argv(argv: list[str]) -> list[str]:
    """The package job's spark-submit command with this bench's job script in its place."""
    return [str(UNGATED_JOB) if a == str(JOB_SCRIPT) else a for a in argv]


def main(argv: list[str] | None = None) -> int:
    """Plan the pipeline's next batch, run it ungated with spark-submit, print its summary (as
    `eos-ingest run` prints it); 0 only when it committed."""
    from eos_ingest.cli import load_config
    from eos_ingest.service.operations import batch_summary, job_argv, open_store, plan_batch
    from eos_ingest.spark.session import spark_submit_env

    parser = argparse.ArgumentParser(prog="python -m bench.ungated", description=main.__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = load_config(argparse.Namespace(config=args.config, pipeline=None))
    # The phase lines of eos-ingest run (bench/report.py reads them).
    log.info("pipeline %s: phase %s", config.name, "plan")
    store = open_store(config)
    batch, _ = plan_batch(config, store)
    if batch is None:
        print(json.dumps({"pipeline": config.name, "batch": None, "message": "nothing new to ingest"}))
        return 0
    log.info("batch %s: phase %s", batch.batch_id, "submit")
    argv_job = ungated_argv(job_argv(config, batch, args.master))
    if str(UNGATED_JOB) not in argv_job:
        raise RuntimeError(f"the job script {JOB_SCRIPT} is not in the spark-submit command: {argv_job}")
    code = subprocess.run(argv_job, env=spark_submit_env(), stdout=sys.stderr, check=False).returncode
    done = store.get_batch(batch.batch_id)
    print(json.dumps(batch_summary(done), indent=2, default=str))
    return 0 if code == 0 and done.status.value == "committed" else (code or 1)


if __name__ == "__main__":
    sys.exit(main())
