"""Writer schemas by id: from a Schema Registry (Confluent REST API) or from files named in the pipeline.

The job asks once per schema id seen in a batch, on the driver, with a bounded timeout and a few
retries. An id the registry does not know (HTTP 404) is an answer: its records go to quarantine.
A registry that cannot be reached is not: the batch fails retriably and stays planned, so
nothing is quarantined for want of a network.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from eos_ingest.errors import SchemaRegistryRefusedError, SchemaRegistryUnavailableError


@dataclass(frozen=True)
class RegistrySettings:
    """Where writer schemas come from: a registry url (with basic auth), and/or files by id."""

    url: str | None = None
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    timeout_seconds: float = 10.0
    conn_id: str | None = (
        None  # an Airflow connection that gives url/username/password (connections/registry.py)
    )
    # Writer schemas given as files (JSON text by schema id): used before the registry.
    files: Mapping[int, str] = field(default_factory=dict, hash=False)


def resolve(settings: RegistrySettings, schema_ids: Iterable[int]) -> dict[int, str | None]:
    """The writer schema (JSON text) of each id, None for an id nobody knows."""
    found: dict[int, str | None] = {}
    for schema_id in sorted(set(schema_ids)):
        if schema_id in settings.files:
            found[schema_id] = settings.files[schema_id]
        elif settings.url:
            found[schema_id] = fetch(settings, schema_id)
        else:
            found[schema_id] = None
    return found


@retry(
    retry=retry_if_exception_type(SchemaRegistryUnavailableError),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.5, max=4),
    reraise=True,
)
def fetch(settings: RegistrySettings, schema_id: int) -> str | None:
    """GET /schemas/ids/<id>: the schema text, or None when the registry says it has no such id."""
    assert settings.url
    request = urllib.request.Request(
        f"{settings.url.rstrip('/')}/schemas/ids/{schema_id}",
        headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"},
    )
    if settings.username:
        token = base64.b64encode(f"{settings.username}:{settings.password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    where = f"schema registry {settings.url}: schema id {schema_id}"
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout_seconds) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        if e.code >= 500:
            raise SchemaRegistryUnavailableError(f"{where}: HTTP {e.code}; the batch is retried") from None
        raise SchemaRegistryRefusedError(
            f"{where}: HTTP {e.code} {e.reason}; check value.schema_registry.url and its credentials"
        ) from None
    except (OSError, ValueError) as e:  # refused, timed out, DNS, a body that is not JSON
        raise SchemaRegistryUnavailableError(f"{where}: {e}; the batch is retried") from None
    schema_type = body.get("schemaType", "AVRO")
    if schema_type != "AVRO" or not isinstance(body.get("schema"), str):
        return None  # a Protobuf or JSON schema id: not an Avro writer, its records go to quarantine
    return str(body["schema"])
