"""The `maintenance:` and `alerts:` sections: the DAGs a pipeline has beside its ingest and backfill
DAGs only when its file asks for them (eos_maintain__<name>, eos_alerts__<name>)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from eos_ingest.config.checks import Schedule, Section, as_number, problem

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _retention(value: Any) -> float:
    value = as_number(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise problem("use a number of hours >= 0, e.g. 168 (Delta's default, 7 days)")
    return float(value)


class MaintenanceConfig(Section):
    """`maintenance:` -- OPTIMIZE + VACUUM of the tables (storage/delta/maintenance.py, docs/maintenance.md):
    the DAG's schedule (None: manual runs only) and the VACUUM retention in hours (None: Delta's 7
    days, or more while a batch is planned)."""

    schedule: Schedule = "@daily"
    retention_hours: Annotated[float | None, BeforeValidator(_retention)] = None


def _lag_limit(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # what a ${VAR} gives is always a string
    if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise problem("use a whole number >= 1 (records, or seconds), e.g. 100000 or 3600; or leave it out")
    return value


def _callback_path(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and _DOTTED.fullmatch(value)):
        raise problem(
            "give the dotted path of a callable or an Airflow BaseNotifier (class or instance) in a "
            "module the Airflow workers import, e.g. my_alerts.notify_slack (docs/alerts.md)"
        )
    return value


LagLimit = Annotated[int | None, BeforeValidator(_lag_limit)]


class AlertsConfig(Section):
    """`alerts:` -- lag limits (service/lag_alerts.py, docs/alerts.md): a limit is passed when the lag
    in offsets, or the age in seconds of the oldest unread record, is above it (None: not checked).
    The eos_alerts__<name> DAG checks them on `schedule`, fails and calls `on_failure_callback` (a
    dotted path) when one is passed. A file's `alerts:` names at least one limit (`named_limit`);
    `eos-ingest check-lag` may give them as options instead."""

    max_lag_records: LagLimit = None
    max_lag_seconds: LagLimit = None
    schedule: Schedule = "*/15 * * * *"
    on_failure_callback: Annotated[str | None, BeforeValidator(_callback_path)] = None

    def named_limit(self) -> AlertsConfig:
        """The section, when it names a limit; else the problem, at max_lag_seconds."""
        if self.max_lag_records is None and self.max_lag_seconds is None:
            raise problem(
                "give max_lag_records, max_lag_seconds or both, e.g. {max_lag_seconds: 3600}",
                at=".max_lag_seconds",
                value=None,
            )
        return self
