"""Exceptions named by the stage that raises them.

Only errors marked retriable (a broker or database that did not answer) should become Airflow
retries; everything else needs a person: data loss, a recreated topic, a fenced attempt, bad config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos_ingest.redact import redact_text


class EosIngestError(Exception):
    """Base of every error this package raises on purpose."""

    retriable: bool = False

    def __str__(self) -> str:
        # Messages reach the CLI's stderr, Airflow's task logs and import errors, the UI and the
        # control DB: none may carry a URL's password or a secret key's value.
        return redact_text(super().__str__())


class ConfigError(EosIngestError):
    """A pipeline config is invalid; the message names the key, the value and the fix."""


class PlanError(EosIngestError):
    """Planning found offsets it cannot ingest exactly once."""


class OffsetsLostError(PlanError):
    """Records between the committed offset and the log start were deleted by retention."""


class TopicRecreatedError(PlanError):
    """The topic was deleted and recreated: its topic id changed, or its LSO is below the committed offset."""


class ClusterMismatchError(PlanError):
    """bootstrap.servers reaches another Kafka cluster than the one the offsets were recorded on."""


class TopicNotFoundError(PlanError):
    """A configured topic does not exist on the cluster."""


class KafkaUnavailableError(EosIngestError):
    """The broker did not answer within the bounded retries."""

    retriable = True


class KafkaAccessError(EosIngestError):
    """The broker answered but refused this client: a wrong SASL password, a broker certificate the
    configured CA does not vouch for, or a plaintext client on a TLS listener. Not retriable: the
    settings need a person."""


class SchemaRegistryUnavailableError(EosIngestError):
    """The Schema Registry did not answer (or answered 5xx): the batch stays planned for a retry."""

    retriable = True


class SchemaRegistryRefusedError(EosIngestError):
    """The Schema Registry refused the request (401/403, another 4xx): fix its url or credentials."""


class ControlStoreUnavailableError(EosIngestError):
    """The control database did not answer within the bounded retries."""

    retriable = True


class BatchStateError(EosIngestError):
    """A batch is not in the state the operation needs (unknown id, already committed, ...)."""


class FencedError(BatchStateError):
    """This attempt lost its fence: a newer attempt owns the batch, so this one commits nothing."""


class WriteError(EosIngestError):
    """The Delta replace of the batch's ranges failed."""


class WriteConflictError(WriteError):
    """A concurrent Delta writer kept winning over the bounded retries; nothing of this write landed.

    Retriable: the batch stays planned and the next attempt replaces the same ranges.
    """

    retriable = True


class PartialWriteError(WriteError):
    """Part of the batch's output is in Delta (e.g. the table, not the quarantine table), or may be:
    a table commit whose outcome is unknown (a catalog's 5xx or lost answer, a dropped database
    connection; storage/commit_outcomes.py).

    Retriable: the batch stays planned, so the next attempt replaces both tables' ranges again; a
    failed batch would never be rerun and a backfill's tables would disagree for good.
    """

    retriable = True


class CatalogAccessError(EosIngestError):
    """The table's catalog refused this pipeline's change for good, before anything of it landed:
    a REST catalog's 401 or 403, or a JDBC catalog's database refusing the pipeline's user
    (SQLState 42501 after a REVOKE, class 28: its login; storage/commit_outcomes.py). Also the
    Delta commit coordinator's database (s3a tables) refusing that user: there a refused UPDATE
    may follow a commit's entry, and the rerun's replace makes one copy of it. A rerun is
    refused the same way until a person fixes the grants or the credentials; the message names
    the table and the fix. Not retriable (exit 2), and the batch stays planned, not failed: once
    the access is fixed, a rerun writes the same ranges."""


class DiskFullError(EosIngestError):
    """A file system the batch writes to has no space left (storage/full_disks.py for the table's
    folder, control/sqlite_full.py for the control DB's file); the message names the folder or file,
    its free space and what to do. Retriable (exit 75), as a commit whose write
    failed may or may not have landed (PartialWriteError): the batch stays planned, and the run
    after space is freed replaces its ranges again."""

    retriable = True


class MaintenanceBusyError(EosIngestError):
    """Maintenance and a batch met on a table: an attempt found the VACUUM lock held (it takes no
    fence and stages nothing), maintain found a batch in flight when its VACUUM was due (it skips
    VACUUM rather than delete files that batch may still commit), or an OPTIMIZE kept losing to
    concurrent writers. Retriable: nothing of it changed the table; run it again later."""

    retriable = True


class QualityGateError(EosIngestError):
    """Critical expectations failed on the batch before commit; the message names them.

    `report` is the gate's report (quality/report.py): the batch records it on its row with its
    own control store, so the gate opens none."""

    def __init__(self, message: str, report: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = None if report is None else dict(report)


class GxLockTimeoutError(EosIngestError):
    """The Great Expectations files of the state folder stayed locked by another process too long.

    Retriable: nothing was validated or stored; the holder is stuck or slow, and a later attempt
    runs the same validation."""

    retriable = True


class SchemaEvolutionError(EosIngestError):
    """value.schema_evolution is `fail` and the batch's data carries a field the schema lacks, or a
    value whose type changed; raised before anything is written. The batch stays planned (not
    failed): once the schema or the policy is fixed, a rerun writes the same ranges."""


class BackfillRangeError(EosIngestError):
    """A requested backfill range is invalid; refused before any work."""


class ControlSchemaError(EosIngestError):
    """The control database holds a schema this eos-ingest cannot use (written by a newer version)."""


class MissingExtraError(EosIngestError, ImportError):
    """A feature needs a package of one of eos-ingest's extras, and it is not installed; the message
    names the extra and the pip command (eos_ingest/extras.py). Not retriable: it needs an install.
    An ImportError too, so code that falls back when an optional module is missing still does."""


# Exit codes of the CLI and of the Spark job alike (docs/operations.md).
EXIT_FAILED, EXIT_NEEDS_A_PERSON, EXIT_FENCED, EXIT_RETRIABLE = 1, 2, 3, 75
# `eos-ingest check-lag`: the pipeline's lag passed a limit of its `alerts:` block (service/lag_alerts.py).
EXIT_LAG_LIMIT = 4


def exit_code(exc: EosIngestError) -> int:
    """75: run again; 3: fenced; 1: the batch failed on its data (gate, write); 2: anything
    else needs a person first (bad config, lost offsets, a recreated topic, a refused request)."""
    if exc.retriable:
        return EXIT_RETRIABLE
    if isinstance(exc, FencedError):
        return EXIT_FENCED
    if isinstance(exc, QualityGateError | WriteError):
        return EXIT_FAILED
    return EXIT_NEEDS_A_PERSON
