"""Reports pipeline files that do not load as this file's Airflow import error (it has no DAG).

eos_pipelines.py makes the DAGs of every pipeline file that loads and skips the others, so one
broken file never hides the other pipelines. The broken ones are listed here, each with its file
name and the loader's message (key, value, fix), and the UI shows them under "DAG Import Errors".
"""

from eos_ingest.airflow.dags import report_broken_pipeline_files

report_broken_pipeline_files(__file__)
