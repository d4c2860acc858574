"""A Delta run's tables on s3a (--storage s3a): an S3 API server of its own (stack/s3.sh: s3proxy,
whose filesystem provider keeps each bucket as a folder the end check reads), Delta's commits
through the control DB's commit coordinator (eos.ingest.delta.JdbcLogStore), and a TCP proxy in
front of the run's PostgreSQL that every job's control DB connection goes through.

The proxy's fault (bench/tcp_fault_proxy.py, `drop` armed with commit_entry_of) is what makes a
Delta commit's outcome unknown for real: it forwards the coordinator's INSERT of the table's next
commit entry (the commit itself), closes that connection once the server applied it, and refuses
new connections for REFUSE_S, as a network partition right after the database wrote the row would.
The log store's one retry on a new connection (which would find its own row and succeed) is
refused too, so the commit fails with an I/O error while the row says it landed: the job cannot
know, and must exit 75 with its batch planned; the next attempt's reader completes the entry
(copies its N.json) and finds the batch's marker.
"""

from __future__ import annotations

import struct
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos.procs import REPO, free_ports
from bench.tcp_fault_proxy import Match, bound_text, carrying

SCRIPT = REPO / "stack" / "s3.sh"
BUCKET = "chaos"
# How long the proxy refuses new connections after the dropped commit: longer than the log store's
# immediate retry, short enough that the job's own control DB calls (a pool) barely notice.
REFUSE_S = 5.0
# The coordinator's statement that inserts a commit entry (JdbcLogStore.putExternalEntry,
# overwrite=false); its completion mark (overwrite=true) has no NOT EXISTS.
COMMIT_INSERT = b"INSERT INTO eos_delta_commits"
COMMIT_ONLY = b"NOT EXISTS"
# The entry of version 0 (the table's creation) is left alone: the fault is a commit into the table.
FIRST_COMMIT = struct.pack("!i", 25) + b"00000000000000000000.json"


@dataclass
class S3Store:
    home: Path
    env: dict[str, str]
    port: int = field(default_factory=lambda: free_ports(1)[0])
    access_key: str = "eos-chaos"
    secret_key: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)
    started: bool = False

    @property
    def aws_env(self) -> dict[str, str]:
        """What points eos-ingest's jobs at the server (as tests/fixtures/s3.py does)."""
        return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}", "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": "us-east-1",
                "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}  # fmt: skip

    def _script(self, command: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "S3_PORT": str(self.port), "S3_DIR": str(self.home),
               "S3_ACCESS_KEY": self.access_key, "S3_SECRET_KEY": self.secret_key}  # fmt: skip
        return subprocess.run([str(SCRIPT), command], env=env, text=True, capture_output=True, timeout=90)

    def up(self) -> str:
        """Start the server and make the bucket; returns the tables' s3a:// folder."""
        self.started = True
        done = self._script("up")
        if done.returncode != 0:
            raise RuntimeError(f"chaos: the S3 server did not start:\n{done.stdout}\n{done.stderr}")
        from pyarrow.fs import S3FileSystem

        endpoint = self.aws_env["AWS_ENDPOINT_URL"]
        fs = S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, endpoint_override=endpoint,
                          scheme="http", region="us-east-1", allow_bucket_creation=True)  # fmt: skip
        fs.create_dir(BUCKET)
        return f"s3a://{BUCKET}/tables"

    def local(self, uri: str) -> Path:
        """The folder where the server keeps the objects under `uri` (s3a://bucket/key)."""
        return self.home / "data" / uri.removeprefix("s3a://")

    def down(self) -> None:
        if self.started:
            done = self._script("down")
            if done.returncode != 0:
                raise RuntimeError(f"chaos: the S3 server did not stop:\n{done.stderr}")


def commit_entry_of(table: str) -> Match:
    """The proxy's predicate for the coordinator's insert of the next commit entry of the Delta
    table `table` (its s3a:// path, as the coordinator stores it), never its version 0."""
    return carrying(COMMIT_INSERT, COMMIT_ONLY, bound_text(table), without=(FIRST_COMMIT,))
