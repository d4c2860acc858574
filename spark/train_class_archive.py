"""spark-submit entrypoint of eos_ingest.spark.class_archive.build: a batch's steps on generated rows.

    spark-submit ... --driver-java-options -XX:ArchiveClassesAtExit=F train_class_archive.py WORK_DIR

Thin: the job is eos_ingest.spark.class_archive_training (what it runs, and why).
"""

from __future__ import annotations

import sys
from pathlib import Path

from eos_ingest.spark.class_archive_training import main

if __name__ == "__main__":
    main(Path(sys.argv[1]))
