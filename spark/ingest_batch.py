"""spark-submit entrypoint: run one planned batch of a pipeline to its commit.

    spark-submit ... spark/ingest_batch.py --config pipelines/demo.yaml --batch-id 7 [--until-caught-up]

Exit codes (eos_ingest.errors.exit_code, the CLI's too): 0 committed; 3 fenced (a newer attempt
owns the batch; nothing committed); 75 retriable (Kafka or the control DB did not answer, a Delta
write conflict outlasted the retries, or a partial write; the batch stays planned); 1 the batch
failed on its data (quality gate, read, write); 2 needs a person (bad config, lost offsets, a
recreated topic, another pipeline's batch).
"""

from __future__ import annotations

import sys
from pathlib import Path

# From a checkout the library sits beside this folder; an installed package needs nothing.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eos_ingest.job import main

if __name__ == "__main__":
    sys.exit(main())
