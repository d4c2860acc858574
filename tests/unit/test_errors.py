"""Exit codes by error class (README, "Running a pipeline by hand"): one table, every error."""

from __future__ import annotations

import pytest

from eos_ingest import errors
from eos_ingest.errors import EXIT_FAILED, EXIT_FENCED, EXIT_NEEDS_A_PERSON, EXIT_RETRIABLE, exit_code

EXIT_CODES = [
    (errors.KafkaUnavailableError, EXIT_RETRIABLE),
    (errors.ControlStoreUnavailableError, EXIT_RETRIABLE),
    (errors.WriteConflictError, EXIT_RETRIABLE),
    (errors.PartialWriteError, EXIT_RETRIABLE),
    (errors.FencedError, EXIT_FENCED),
    (errors.QualityGateError, EXIT_FAILED),
    (errors.WriteError, EXIT_FAILED),
    (errors.ConfigError, EXIT_NEEDS_A_PERSON),
    (errors.PlanError, EXIT_NEEDS_A_PERSON),
    (errors.OffsetsLostError, EXIT_NEEDS_A_PERSON),
    (errors.TopicRecreatedError, EXIT_NEEDS_A_PERSON),
    (errors.ClusterMismatchError, EXIT_NEEDS_A_PERSON),
    (errors.TopicNotFoundError, EXIT_NEEDS_A_PERSON),
    (errors.BatchStateError, EXIT_NEEDS_A_PERSON),
    (errors.BackfillRangeError, EXIT_NEEDS_A_PERSON),
    (errors.ControlSchemaError, EXIT_NEEDS_A_PERSON),
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
