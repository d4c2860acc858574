"""Where a pipeline's table lives: a local (or mounted) folder, or an s3a:// URI, and the check of
a table URI as the pipeline file spells it.

The config's own, not storage's: the pipeline model parses and checks the locations, and every
layer above (storage, airflow) reads them. How a table on s3a is reached (access, Spark's and
delta-rs's settings) stays in storage/object_stores.py.
"""

from __future__ import annotations

import re
from pathlib import Path

S3A = "s3a://"
# Where a table lives: a local (or mounted) folder, or an s3a:// URI as the file spells it.
TableLocation = Path | str
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_S3A_FIX = "use s3a://<bucket>/<prefix>, e.g. s3a://lake/tables/orders, or a local path"


class TableUriError(ValueError):
    """Why a table URI is refused, with the fix; `shown` stands for the value in the message when
    the value must not be echoed (it holds credentials)."""

    def __init__(self, fix: str, shown: str | None = None) -> None:
        super().__init__(fix)
        self.fix = fix
        self.shown = shown


def is_object_store(location: TableLocation) -> bool:
    return isinstance(location, str) and location.startswith(S3A)


def object_store_uri(value: str) -> str:
    """`value` (a URI: it has "://") as s3a://bucket/prefix, no trailing slash; TableUriError
    otherwise."""
    scheme, rest = value.split("://", 1)
    if scheme != "s3a":
        # abfss:// and gs:// have no coordinator here, and s3:// / s3n:// are other Hadoop clients.
        fix = "write s3a://" if scheme in ("s3", "s3n") else "only s3a:// object storage is supported"
        raise TableUriError(f"{fix} (docs/object-storage.md); {_S3A_FIX}")
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket:  # never echo it: it holds credentials
        raise TableUriError(
            "no credentials in the URI: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or name an Airflow aws connection); " + _S3A_FIX,
            shown="s3a://***@…",
        )
    if not _BUCKET.fullmatch(bucket) or not prefix.strip("/"):
        raise TableUriError(f"a bucket (3-63 of [a-z0-9.-]) and a prefix are needed; {_S3A_FIX}")
    return f"s3a://{bucket}/{prefix.strip('/')}"
