"""The ``eos_alerts__<name>`` DAG of a pipeline with an ``alerts:`` block (docs/alerts.md).

One task, ``check_lag``, on ``alerts.schedule``: operations.check_lag, then the task fails, with a
message naming the pipeline, each figure and its limit, when a limit is passed. Its
``on_failure_callback`` is ``alerts.on_failure_callback``: the dotted path of a plain callable
(called with the task's context) or of an Airflow notifier (a BaseNotifier instance, or a
BaseNotifier class that takes no arguments), so Slack, SMTP or any provider's notifier plugs in.

Wiring only, as airflow/dags.py: the rules are service/lag_alerts.py's, tested without Airflow.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, BaseNotifier, task
from airflow.sdk.exceptions import AirflowFailException

from eos_ingest.airflow.dag_ids import alerts_dag_id
from eos_ingest.airflow.tasks import library_errors, scheduled_dag
from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.errors import ConfigError

log = logging.getLogger(__name__)


def failure_callback(config: PipelineConfig) -> Callable[..., Any] | None:
    """The callable `alerts.on_failure_callback` names, imported now (the DAG file's parse), or
    None without one. ConfigError naming the file, the key and the fix when it cannot be used."""
    path = config.alerts.on_failure_callback if config.alerts else None
    if path is None:
        return None
    shown = (
        f"{config.source.name}: alerts.on_failure_callback = {path!r} is not valid (no "
        f"{alerts_dag_id(config.name)} DAG until fixed; the pipeline's other DAGs run)"
    )
    module_name, _, attr = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"{shown}; {type(exc).__name__}: {exc}; put the module where the Airflow workers "
            "import it (the DAGs or plugins folder, or an installed package) or fix the path"
        ) from exc
    if isinstance(found, type) and issubclass(found, BaseNotifier):
        try:
            found = found()
        except TypeError as exc:
            raise ConfigError(
                f"{shown}; the notifier class needs arguments ({exc}); name an instance instead, "
                "e.g. `notify = SlackNotifier(...)` in your module"
            ) from exc
    if not callable(found):
        raise ConfigError(f"{shown}; it is a {type(found).__name__}, not a callable or a BaseNotifier")
    return found


def _check_lag(pipeline_file: str) -> dict[str, Any]:
    """Fail (AirflowFailException: no retry, the callback runs) when a limit is passed."""
    # When the task runs, not at DAG parsing: the Airflow connection's reader, the service layer.
    from eos_ingest.connections.kafka import config_from_airflow  # noqa: PLC0415 out of DAG parsing
    from eos_ingest.service.operations import check_lag, open_store  # noqa: PLC0415 out of DAG parsing

    # A broker that does not answer, or an oldest unread record not read, is retriable: the task
    # is retried, then fails (and notifies) if the figures stay unknown.
    with library_errors():
        config, _ = config_from_airflow(load_pipeline(pipeline_file))
        result = check_lag(config, open_store(config))
    shown = result.to_dict()
    log.info("lag check: %s", json.dumps(shown, default=str))
    if result.failed:
        raise AirflowFailException(result.message())
    return shown


def alerts_dag(config: PipelineConfig) -> DAG:
    """``eos_alerts__<name>``: check_lag on `alerts.schedule`, failing when a limit is passed."""
    assert config.alerts is not None
    doc = f"Lag alerts of pipeline **{config.name}**: {limits_text(config)}."
    with scheduled_dag(config, alerts_dag_id(config.name), config.alerts.schedule, "alerts", doc) as dag:
        task(
            task_id="check_lag",
            retries=1,
            retry_delay=timedelta(seconds=30),
            execution_timeout=timedelta(minutes=5),
            on_failure_callback=failure_callback(config),
        )(_check_lag)(str(config.source))
    return dag


def limits_text(config: PipelineConfig) -> str:
    """The limits in words, e.g. "max_lag_records 100000, max_lag_seconds 3600"."""
    alerts = config.alerts
    if alerts is None:
        return "no limits"
    given = {"max_lag_records": alerts.max_lag_records, "max_lag_seconds": alerts.max_lag_seconds}
    return ", ".join(f"{k} {v}" for k, v in given.items() if v is not None)
