"""The Spark provider's SparkSubmitOperator, imported without OpenLineage's listener when OpenLineage
is off: a door into the provider's imports, with its figure, its version gate and its exit.

Why: the provider's operator module imports, at its top, the functions that copy OpenLineage's parent
job and transport into spark-submit's properties (``airflow.providers.common.compat.openlineage.
utils.spark``), and that module imports ``airflow.providers.openlineage.utils.spark``, which imports
the whole OpenLineage listener and client (about 100 modules). The operator calls those functions
only when ``[openlineage] spark_inject_parent_job_info`` or ``spark_inject_transport_info`` is on;
and with OpenLineage off (no transport configured, the default, or ``disabled``) Airflow's own
OpenLineage plugin does not import the listener either. Every parse of the DAG file paid for it: the
dag-processor's (every 15 s under ``scripts/airflow.sh``) and each task's process of a DAG run, which
parses the DAG file again (four tasks per ingest run). Measured here (2 cores, medians of 6,
alternated with the checkout before this door): parsing ``dags/eos_pipelines.py`` in a fresh
process 2.93 -> 2.18 s of CPU (101 -> 7 of OpenLineage's modules imported; at load averages of 27
to 60, five other suites running, so no wall figure).

How: when OpenLineage is off and neither option is on, the calling thread's import of
``airflow.providers.openlineage.utils.spark`` fails while the operator's module imports, as it would
without the OpenLineage provider; the compat module then binds its fallbacks, which the operator
never calls with both options off. Otherwise (OpenLineage on, an option on, the provider absent or
already imported) the import is the provider's own, unchanged.

Gate: the versions measured (``MEASURED``); on any other version of the Spark provider the operator
is imported as it is. Exit: tests/unit/airflow/test_spark_provider_import.py fails when a plain
import of the operator no longer pulls in the listener (the provider made it lazy): then import
SparkSubmitOperator directly and remove this module. Upstream: the provider's operator imports the
compat module at its top (apache-airflow-providers-apache-spark 6.3.4); no issue filed on it yet.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The module whose import pulls in OpenLineage's listener and client.
OPENLINEAGE_SPARK_UTILS = "airflow.providers.openlineage.utils.spark"
SPARK_OPERATOR_MODULE = "airflow.providers.apache.spark.operators.spark_submit"
# apache-airflow-providers-apache-spark versions on which the door was measured to pay.
MEASURED = ("6.3.4",)


class _HiddenModule(importlib.abc.MetaPathFinder):
    """Fails one thread's import of one module as if it were not installed."""

    def __init__(self, name: str, thread: int) -> None:
        self.name, self.thread = name, thread

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == self.name and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r} (OpenLineage is off)", name=name)
        return None


@contextmanager
def _hidden(name: str) -> Iterator[None]:
    finder = _HiddenModule(name, threading.get_ident())
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _provider_version() -> str | None:
    try:
        from airflow.providers.apache import spark  # noqa: PLC0415 the provider's package only, light
    except ImportError:
        return None
    return str(spark.__version__)


def openlineage_unused() -> bool:
    """True when nothing in this process can use OpenLineage's Spark functions: OpenLineage is off
    (the provider's own test, as its plugin makes it) and neither Spark injection option is on.
    False when the OpenLineage provider is not installed: there is nothing to leave out then."""
    try:
        from airflow.providers.openlineage import conf  # noqa: PLC0415 only where the provider is
    except ImportError:
        return False
    return bool(
        conf.is_disabled()
        and not conf.spark_inject_parent_job_info()
        and not conf.spark_inject_transport_info()
    )


def leaves_out_openlineage() -> bool:
    """Whether import_spark_submit() imports the operator's module without OpenLineage's listener."""
    return (
        SPARK_OPERATOR_MODULE not in sys.modules
        and OPENLINEAGE_SPARK_UTILS not in sys.modules
        and _provider_version() in MEASURED
        and openlineage_unused()
    )


def import_spark_submit() -> None:
    """Import the provider's SparkSubmitOperator module, without OpenLineage's listener when
    leaves_out_openlineage() (see the module's docstring); the caller then imports the class from
    it as usual. Raises ModuleNotFoundError as that import would without the provider."""
    if leaves_out_openlineage():
        with _hidden(OPENLINEAGE_SPARK_UTILS):
            importlib.import_module(SPARK_OPERATOR_MODULE)
    else:
        importlib.import_module(SPARK_OPERATOR_MODULE)
