"""spark-submit entrypoint: run one planned batch of a pipeline to its commit.

    spark-submit ... spark/ingest_batch.py --config pipelines/demo.yaml --batch-id 7 [--until-caught-up]

Exit codes (eos_ingest.errors.exit_code, the CLI's too): 0 committed; 3 fenced (a newer attempt
owns the batch; nothing committed); 75 retriable (Kafka or the control DB did not answer, a Delta
write conflict outlasted the retries, or a partial write; the batch stays planned); 1 the batch
failed on its data (quality gate, read, write); 2 needs a person (bad config, lost offsets, a
recreated topic, another pipeline's batch).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eos_ingest.errors import EosIngestError, FencedError, exit_code
from eos_ingest.job import run_job


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, type=Path, help="pipeline YAML file")
    parser.add_argument("--batch-id", required=True, type=int, help="planned batch to execute")
    parser.add_argument(
        "--until-caught-up",
        nargs="?",
        const="true",
        default="false",
        choices=("true", "false", "True", "False"),
        help="then plan and run the next batches in this Spark session until caught up "
        "(a value, true or false, lets a template pass the choice)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_job(args.config, args.batch_id, until_caught_up=args.until_caught_up.lower() == "true")
    except FencedError as exc:
        print(f"eos-ingest: fenced: {exc}", file=sys.stderr)
        return exit_code(exc)
    except EosIngestError as exc:
        print(f"eos-ingest: {type(exc).__name__}: {exc}", file=sys.stderr)
        return exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
