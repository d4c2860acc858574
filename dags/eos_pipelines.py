"""The Airflow DAGs of every pipeline file: an ingest and a backfill DAG each.

The factory is the installed package's (eos_ingest.airflow.dags); the pipelines folder is
$EOS_PIPELINES_DIR, else pipelines/ beside this DAGs folder. Copy this file (and
eos_pipeline_files.py) into any DAGs folder whose Airflow has eos-ingest installed.
"""

from eos_ingest.airflow.dags import pipeline_dags

globals().update(pipeline_dags(__file__))
