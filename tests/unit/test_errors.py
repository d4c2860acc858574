"""Exit codes by error class (docs/operations.md): one table, every error."""

from __future__ import annotations

import pytest

from eos_ingest import errors
from eos_ingest.errors import EXIT_FAILED, EXIT_FENCED, EXIT_NEEDS_A_PERSON, EXIT_RETRIABLE, exit_code

EXIT_CODES = [
    (errors.KafkaUnavailableError, EXIT_RETRIABLE),
    (errors.ControlStoreUnavailableError, EXIT_RETRIABLE),
    (errors.WriteConflictError, EXIT_RETRIABLE),
    (errors.PartialWriteError, EXIT_RETRIABLE),
    (errors.DiskFullError, EXIT_RETRIABLE),
    (errors.GxLockTimeoutError, EXIT_RETRIABLE),
    (errors.SchemaRegistryUnavailableError, EXIT_RETRIABLE),
    (errors.MaintenanceBusyError, EXIT_RETRIABLE),
    (errors.FencedError, EXIT_FENCED),
    (errors.QualityGateError, EXIT_FAILED),
    (errors.WriteError, EXIT_FAILED),
    (errors.ConfigError, EXIT_NEEDS_A_PERSON),
    (errors.PlanError, EXIT_NEEDS_A_PERSON),
    (errors.OffsetsLostError, EXIT_NEEDS_A_PERSON),
    (errors.TopicRecreatedError, EXIT_NEEDS_A_PERSON),
    (errors.ClusterMismatchError, EXIT_NEEDS_A_PERSON),
    (errors.TopicNotFoundError, EXIT_NEEDS_A_PERSON),
    (errors.KafkaAccessError, EXIT_NEEDS_A_PERSON),
    (errors.SchemaRegistryRefusedError, EXIT_NEEDS_A_PERSON),
    (errors.BatchStateError, EXIT_NEEDS_A_PERSON),
    (errors.BackfillRangeError, EXIT_NEEDS_A_PERSON),
    (errors.SchemaEvolutionError, EXIT_NEEDS_A_PERSON),
    (errors.CatalogAccessError, EXIT_NEEDS_A_PERSON),
    (errors.ControlSchemaError, EXIT_NEEDS_A_PERSON),
    (errors.MissingExtraError, EXIT_NEEDS_A_PERSON),
    (errors.EosIngestError, EXIT_NEEDS_A_PERSON),
]


@pytest.mark.parametrize(("error", "code"), EXIT_CODES, ids=[e.__name__ for e, _ in EXIT_CODES])
def test_exit_code_of_each_error(error: type[errors.EosIngestError], code: int) -> None:
    assert exit_code(error("x")) == code


def test_the_table_names_every_error_class() -> None:
    defined = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, errors.EosIngestError)
    }
    assert defined == {error for error, _ in EXIT_CODES}


@pytest.mark.parametrize("job_code", [EXIT_NEEDS_A_PERSON, EXIT_FENCED, EXIT_RETRIABLE, EXIT_FAILED])
def test_run_passes_the_jobs_exit_code_through(monkeypatch: pytest.MonkeyPatch, job_code: int) -> None:
    """A config error the job finds on the driver exits 2 from `eos-ingest run` too, not 1."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from eos_ingest import cli

    planned = SimpleNamespace(
        batch_id=7, kind=SimpleNamespace(value="scheduled"), status=SimpleNamespace(value="planned"),
        fence=1, records_read=None, records_written=None, records_quarantined=None, delta_version=None,
        error=None, override_note=None, created_at=datetime(2026, 1, 1, tzinfo=UTC), ranges=[],
    )  # fmt: skip
    monkeypatch.setattr(cli, "submit_batch", lambda *args, **kwargs: (job_code, [planned]))
    config = SimpleNamespace(name="p")
    assert cli.submit_and_report(config, None, 7, "local[1]") == job_code  # type: ignore[arg-type]
    assert cli.submit_and_report(config, None, 7, "local[1]", until_caught_up=True) == job_code  # type: ignore[arg-type]
