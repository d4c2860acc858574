"""A Spark application for test_s3a.py: the ingest job of a planned batch, then a backfill
of it, in one spark-submit application (one JVM start instead of two).

    spark-submit <the batch's job command, this file for ingest_batch.py> <its job arguments> <pipeline file> <params>

Both batches run as the job runs them (eos_ingest.batch.job.main: its session, configured for
the pipeline's s3a warehouse from the AWS_* variables, stopped at the end); between them the
backfill (params: a JSON object of service.backfill.PARAM_KEYS) is recorded as `eos-ingest
backfill` records it. Prints `backfill batch <id>`; exits with the first job exit code that is not 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from eos_ingest.batch.job import main as job
    from eos_ingest.config.pipeline import load_pipeline
    from eos_ingest.service.operations import open_store, record_backfill

    job_argv, config_path, params = sys.argv[1:-2], Path(sys.argv[-2]), json.loads(sys.argv[-1])
    code = job(job_argv)  # the file shipped with --files, by its name, as the job reads it
    if code != 0:
        return code
    config = load_pipeline(config_path)
    batch, _ = record_backfill(config, open_store(config), params)
    print(f"backfill batch {batch.batch_id}", flush=True)
    return job(["--config-file", config_path.name, "--batch-id", str(batch.batch_id)])


if __name__ == "__main__":
    sys.exit(main())
