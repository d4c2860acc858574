"""An Iceberg run's REST catalog (--catalog rest): the project's REST catalog server
(stack/iceberg-rest.sh) in the run's folder, and the fault proxy (bench/fault_proxy.py) in front of
it, which is the catalog URL the pipeline uses. The server's own URL is what the end check reads
through: nothing the proxy does reaches the check.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import fault_proxy as proxies
from bench.chaos.procs import REPO, free_ports

SCRIPT = REPO / "stack" / "iceberg-rest.sh"
# The pipeline's output.catalog.conn_id; jobs read it from AIRFLOW_CONN_ICEBERG_REST.
CONN_ID = "iceberg_rest"
CONN_ENV = "AIRFLOW_CONN_ICEBERG_REST"


@dataclass
class RestCatalog:
    home: Path
    env: dict[str, str]
    port: int = field(default_factory=lambda: free_ports(1)[0])
    client_id: str = "eos-chaos"
    client_secret: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)
    proxy: proxies.FaultProxy | None = None
    _server: Any = None
    started: bool = False

    @property
    def server_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _script(self, command: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "REST_PORT": str(self.port), "REST_DIR": str(self.home),
               "REST_CLIENT_ID": self.client_id, "REST_CLIENT_SECRET": self.client_secret,
               "REST_TOKEN": uuid.uuid4().hex}  # fmt: skip
        return subprocess.run([str(SCRIPT), command], env=env, text=True, capture_output=True, timeout=90)

    def up(self) -> str:
        """Start the server and the proxy; returns the URL the pipeline uses (the proxy's)."""
        self.started = True
        done = self._script("up")
        if done.returncode != 0:
            raise RuntimeError(f"chaos: the REST catalog did not start:\n{done.stdout}\n{done.stderr}")
        self.proxy, self._server = proxies.start(self.server_uri)
        return self.proxy.uri

    def connection(self) -> str:
        """The Airflow connection (JSON) the jobs sign in with: OAuth2 client credentials."""
        return json.dumps({"conn_type": "http", "login": self.client_id, "password": self.client_secret})

    def pyiceberg_properties(self) -> dict[str, str]:
        """pyiceberg's RestCatalog properties for the server itself (not through the proxy)."""
        return {
            "type": "rest",
            "uri": self.server_uri,
            "credential": f"{self.client_id}:{self.client_secret}",
            "oauth2-server-uri": f"{self.server_uri}/v1/oauth/tokens",
        }

    def down(self) -> None:
        if self._server is not None:
            proxies.stop(self._server)
            self._server = None
        if self.started:
            done = self._script("down")
            if done.returncode != 0:
                raise RuntimeError(f"chaos: the REST catalog did not stop:\n{done.stderr}")
