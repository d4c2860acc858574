"""Pipeline files and a small validated frame for tests of GX's files and of the pipeline's suite
(real GX on pandas; no Spark, no broker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from eos_ingest.config.pipeline import PipelineConfig, load_pipeline
from eos_ingest.plan.ranges import PlannedRange


def pipeline(folder: Path, name: str) -> PipelineConfig:
    """A minimal JSON pipeline `name` over topic "orders", written to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "topics": ["orders"], "value": {"format": "json", "schema": "id BIGINT"}}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return load_pipeline(folder / f"{name}.yaml")


def expecting(folder: Path, expectations: list[dict[str, Any]]) -> PipelineConfig:
    """Pipeline "orders" (id BIGINT, amount DOUBLE) with its own `expectations:`, written to `folder`."""
    doc = {
        "name": "orders",
        "topics": ["orders"],
        "value": {"format": "json", "schema": "id BIGINT, amount DOUBLE"},
        "expectations": expectations,
    }
    path = folder / "orders.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_pipeline(path)


def unchecked(folder: Path, expectations: list[dict[str, Any]]) -> PipelineConfig:
    """A config whose expectations skipped the file's load-time check (made in code): the suite's
    own check must still name the problem."""
    return expecting(folder, []).model_copy(update={"expectations": tuple(expectations)})


def frame(rows: int = 3) -> Any:
    """`rows` rows of orders/0 at offsets 0.. as the gate validates them (its range column too)."""
    import pyarrow as pa

    from eos_ingest.quality.rows import arrow_frame

    table = pa.table(
        {
            "kafka_topic": ["orders"] * rows,
            "kafka_partition": [0] * rows,
            "kafka_offset": list(range(rows)),
            "id": list(range(rows)),
        }
    )
    return arrow_frame(table, [PlannedRange("orders", 0, 0, rows)])
