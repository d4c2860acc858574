"""What a test of an installed eos-ingest runs inside the venv it installed into (python -c), and
prints as JSON: test_wheel.py's venv and test_airflow_image.py's venv of an official Airflow image."""

# Where the installed package finds its files, its plugin entry point and the DAG factory.
PROBE = """
import importlib.metadata, json, sys
import eos_ingest
from eos_ingest import paths
from eos_ingest.spark import submit
(plugin,) = [e for e in importlib.metadata.entry_points(group="airflow.plugins") if e.name == "eos_ingest"]
print(json.dumps({
    "package": eos_ingest.__file__,
    "sys_path": sys.path,
    "checkout": str(paths.CHECKOUT) if paths.CHECKOUT else None,
    "state_dir": str(paths.state_dir()),
    "files": {str(f): f.is_file() for f in (submit.JOB_SCRIPT, paths.TRAINING_SCRIPT, paths.GX_TEMPLATE, paths.DEFAULT_SUITE)},
    "templates": sorted(p.name for p in (paths.PACKAGE_DIR / "templates").glob("*.html")),
    "plugin": plugin.load().name,
    "plugin_file": __import__(plugin.module).__file__,
    "factory": __import__("eos_ingest.airflow.dags", fromlist=["pipeline_dags"]).__file__,
}))
"""
# Airflow itself, in the installed venv: every plugin source (an empty plugins folder, entry points),
# and the repo's thin DAG files parsed by DagBag with pipelines/ beside them.
AIRFLOW_PROBE = """
import json, sys
from airflow import plugins_manager
from airflow.dag_processing.dagbag import DagBag
plugins, errors = plugins_manager._get_plugins()
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"plugins": [p.name for p in plugins], "plugin_errors": errors,
                  "dag_ids": sorted(bag.dag_ids), "import_errors": bag.import_errors}))
"""
