"""A PostgreSQL role of a test's own in the session's test server: the pipeline's user of a
deployment, which owns what it creates (the control tables, a catalog's or a commit coordinator's
table), and the admin beside it, who plays the DBA (a REVOKE, a GRANT back)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url


@dataclass(frozen=True)
class PipelineRole:
    name: str
    url: str  # the control DB's URL as this role: the pipeline's control_db_url
    admin: Engine

    def as_admin(self, *statements: str) -> None:
        with self.admin.connect() as conn:
            for statement in statements:
                conn.execute(text(statement))


@contextlib.contextmanager
def pipeline_role(control_db_url: str) -> Iterator[PipelineRole]:
    """A new LOGIN role with every right on the test's database and its public schema; dropped at
    the end with what it owns (the database goes with the fixture, the role would not)."""
    db = make_url(control_db_url)
    name, password = f"eos_refused_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    role = PipelineRole(
        name,
        db.set(username=name, password=password).render_as_string(hide_password=False),
        create_engine(control_db_url, isolation_level="AUTOCOMMIT"),
    )
    role.as_admin(
        f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'",
        f'GRANT ALL ON DATABASE "{db.database}" TO "{name}"',
        f'GRANT ALL ON SCHEMA public TO "{name}"',
    )
    try:
        yield role
    finally:
        with contextlib.suppress(Exception):
            role.as_admin(f'REASSIGN OWNED BY "{name}" TO CURRENT_USER', f'DROP OWNED BY "{name}"')
            role.as_admin(f'DROP ROLE "{name}"')
        role.admin.dispose()
