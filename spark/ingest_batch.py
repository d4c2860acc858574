"""spark-submit entrypoint: run one planned batch of a pipeline to its commit.

    spark-submit ... spark/ingest_batch.py --config pipelines/demo.yaml --batch-id 7 [--until-caught-up]

eos_ingest.paths.JOB_SCRIPT: this file in a checkout; the wheel ships it as
<site-packages>/eos_ingest/spark_job/ingest_batch.py (pyproject.toml's package-dir). Its folder holds
the spark-submit entry points only, on purpose: Python puts a script's folder first on sys.path,
where a library module (config, errors, status, ...) would shadow a top-level package.
The library comes from the interpreter's site-packages (or, from a checkout, the PYTHONPATH that
eos_ingest.spark.submit sets).

Exit codes (eos_ingest.errors.exit_code, the CLI's too): 0 committed; 3 fenced (a newer attempt
owns the batch; nothing committed); 75 retriable (Kafka or the control DB did not answer, a Delta
write conflict outlasted the retries, or a partial write; the batch stays planned); 1 the batch
failed on its data (quality gate, read, write); 2 needs a person (bad config, lost offsets, a
recreated topic, another pipeline's batch).
"""

from __future__ import annotations

import gc
import sys

from eos_ingest.batch.job import main

if __name__ == "__main__":
    code = main()
    # Like the eos-ingest command (eos_ingest.cli.console_main): the heap GX leaves is frozen, so
    # the interpreter's shutdown does not spend ~1 s collecting it after the batch committed.
    gc.freeze()
    sys.exit(code)
