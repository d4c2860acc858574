"""spark-submit entrypoint of bench/ungated.py: the package's job (eos_ingest.batch.job.main) with
the Ungated gate step. Alone in its folder, as the package's own job script, so that no module
beside it shadows a top-level one on sys.path; `bench` comes from the PYTHONPATH that
eos_ingest.spark.session.spark_submit_env sets (the checkout's root)."""

from __future__ import annotations

import sys

from bench.ungated import Ungated
from eos_ingest.batch.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], gate=Ungated()))
