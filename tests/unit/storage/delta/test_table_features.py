"""table_features.refusals: which Delta table features the staged replace refuses, from a table's
protocol and properties (the integration tests refuse them on real tables)."""

from __future__ import annotations

import pytest

from eos_ingest.errors import ConfigError
from eos_ingest.storage.delta.table_features import TableShape, check, refusals


def shape(reader=(), writer=(), **conf: str) -> TableShape:
    return TableShape(frozenset(reader), frozenset(writer), {k.replace("_", "."): v for k, v in conf.items()})


@pytest.mark.parametrize(
    ("table", "named"),
    [
        (shape(reader=["deletionVectors"], writer=["deletionVectors"]), "deletion vectors"),
        (shape(delta_enableDeletionVectors="true"), "deletion vectors"),
        (shape(delta_enableDeletionVectors="TRUE "), "deletion vectors"),
        (shape(delta_columnMapping_mode="name"), "column mapping"),
        (shape(delta_columnMapping_mode="id"), "column mapping"),
        (shape(reader=["columnMapping"]), "column mapping"),
        (shape(writer=["clustering", "domainMetadata"]), "liquid clustering"),
        (shape(delta_appendOnly="true"), "delta.appendOnly"),
    ],
)
def test_a_feature_the_replace_cannot_keep_its_guarantees_on_is_refused(
    table: TableShape, named: str
) -> None:
    (found,) = refusals(table)
    assert named in found


@pytest.mark.parametrize(
    "table",
    [
        shape(),
        shape(writer=["appendOnly", "invariants"]),  # supported by the protocol, not switched on
        shape(delta_appendOnly="false", delta_enableDeletionVectors="false", delta_columnMapping_mode="none"),
        shape(writer=["rowTracking", "domainMetadata"], delta_enableRowTracking="true"),
        shape(writer=["checkConstraints"], **{"delta_constraints_positive": "amount >= 0"}),
        shape(reader=["timestampNtz"], writer=["timestampNtz"]),
    ],
)
def test_what_the_replace_keeps_its_guarantees_on_is_not_refused(table: TableShape) -> None:
    assert refusals(table) == []


def test_the_refusal_is_one_line_naming_the_table_every_feature_and_its_fix() -> None:
    both = shape(reader=["deletionVectors"], delta_appendOnly="true")
    with pytest.raises(ConfigError) as refused:
        check("/data/orders", both)
    text = str(refused.value)
    assert "\n" not in text and "/data/orders" in text and "nothing was written" in text
    assert "ALTER TABLE delta.`/data/orders` DROP FEATURE deletionVectors" in text
    assert "SET TBLPROPERTIES ('delta.appendOnly' = 'false')" in text
