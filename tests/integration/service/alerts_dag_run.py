"""Run one DAG once with Airflow's own `dag.test()` (the task runner, its callbacks), in a process
of its own: test_lag_alerts starts it with a throw-away AIRFLOW_HOME and a migrated SQLite DB.

python -m tests.integration.service.alerts_dag_run <dag id>  -> prints the run's and each task's state.
"""

from __future__ import annotations

import json
import os
import sys

from airflow.dag_processing.dagbag import DagBag


def main(dag_id: str) -> None:
    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    run = bag.dags[dag_id].test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    print(json.dumps({"run": str(run.state), "tasks": states}))


if __name__ == "__main__":
    main(sys.argv[1])
