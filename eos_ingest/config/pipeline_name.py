"""A pipeline's name: its rule, and its length limit, which Airflow's limit on DAG ids sets.

The config owns the backfill DAG's id prefix (the longest of a pipeline's DAG ids) because the limit
is computed from it; airflow/dag_ids.py takes the prefix from here, so the two cannot drift apart.
Imports nothing, so that the Airflow plugin can load dag_ids without loading the pipeline model.
"""

from __future__ import annotations

import re

NAME = re.compile(r"[a-z0-9_]+")
BACKFILL_PREFIX = "eos_backfill__"  # the longest DAG id prefix (airflow/dag_ids.py)
MAX_NAME = 250 - len(BACKFILL_PREFIX)  # Airflow refuses a DAG id longer than 250 characters
