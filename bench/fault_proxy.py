"""A fault-injecting HTTP proxy on 127.0.0.1 in front of an Iceberg REST catalog; stdlib only.
The tests start one per session in front of the session's REST catalog
(tests/fixtures/fault_proxy.py), the chaos run one in front of its own (bench/chaos/rest_catalog.py).

It forwards every request to the server. A caller arms one fault for the next request that a
predicate matches (say, the commit that fast-forwards `main`): that request is still forwarded and
applied by the server, and then the client gets

- `503`: a 503 answer (Iceberg's error body), as from a gateway whose upstream timed out;
- `drop`: no answer, the connection closed;
- `slow`: the server's answer, but `delay_s` late (after the client's socket timeout).

So the client cannot tell whether its commit landed: the unknown outcome of issue 48. And
`503-unforwarded`: the same 503 for a request the server never saw (a commit that did not land,
which the client cannot tell from the first); `409-unforwarded`: a conflict for a request the
server never saw (Iceberg's CommitFailedException, as when another writer keeps winning);
`403-unforwarded`: a refusal of a request the server never saw (Iceberg's ForbiddenException, as
from a catalog whose grants no longer let this principal write the table: armed with `times`, a
refusal for good). Bounded: a fault fires `times` times, upstream calls time out, a slow answer waits at most `delay_s`, and the
server threads are daemons that stop() shuts down.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# (method, path, body) of a request -> whether the armed fault takes it.
Match = Callable[[str, str, bytes], bool]
UPSTREAM_TIMEOUT_S = 120
_UNAVAILABLE = json.dumps(
    {"error": {"message": "Service failed: 503", "type": "ServiceUnavailableException", "code": 503}}
).encode()
_CONFLICT = json.dumps(
    {"error": {"message": "Requirement failed: branch changed", "type": "CommitFailedException", "code": 409}}
).encode()
_FORBIDDEN = json.dumps(
    {"error": {"message": "Not allowed to write the table", "type": "ForbiddenException", "code": 403}}
).encode()
_UNFORWARDED = {"503": (503, _UNAVAILABLE), "409": (409, _CONFLICT), "403": (403, _FORBIDDEN)}
_JSON = {"Content-Type": "application/json"}
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass
class _Fault:
    kind: str  # 503 | drop | slow | 503-unforwarded | 409-unforwarded | 403-unforwarded
    match: Match
    delay_s: float
    times: int


@dataclass
class FaultProxy:
    """The proxy's URL (`uri`, to use as output.catalog.uri) and its fault switch."""

    uri: str
    upstream: str
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _fault: _Fault | None = None
    fired: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, method, path) since arm()

    def arm(self, kind: str, match: Match, delay_s: float = 0.0, times: int = 1) -> None:
        """The next `times` requests `match` takes get `kind` (see the module); `fired` starts
        empty, so that it tells what this fault did, not what an earlier one (a test before, in
        the session's one proxy) did."""
        assert kind in ("503", "drop", "slow", "503-unforwarded", "409-unforwarded", "403-unforwarded"), kind
        with self._lock:
            self._fault = _Fault(kind, match, delay_s, times)
            self.fired.clear()

    def disarm(self) -> None:
        with self._lock:
            self._fault = None

    def _take(self, method: str, path: str, body: bytes) -> _Fault | None:
        with self._lock:
            fault = self._fault
            if fault is None or not fault.match(method, path, body):
                return None
            fault.times -= 1
            if fault.times <= 0:
                self._fault = None
            self.fired.append((fault.kind, method, path))
            return fault


def publishes_main(table: str) -> Match:
    """A commit to `table` (its name in the namespace) that moves `main` and removes a branch: the
    batch's publish (its fast-forward), not the stage's DELETE or append on the branch."""

    def match(method: str, path: str, body: bytes) -> bool:
        if method != "POST" or not path.rstrip("/").endswith(f"/tables/{table}"):
            return False
        text = body.decode("utf-8", "replace").replace(" ", "")
        return '"remove-snapshot-ref"' in text and '"ref-name":"main"' in text

    return match


_BATCH_REF = re.compile(r'"ref-name":"eos_batch(\d+)_f\d+"')


def published_batch(body: bytes) -> int | None:
    """The batch whose branch (`eos_batch<id>_f<fence>`) a publish's body removes, if it names one."""
    found = _BATCH_REF.search(body.decode("utf-8", "replace").replace(" ", ""))
    return int(found.group(1)) if found else None


def commits_to_a_batch_branch(table: str) -> Match:
    """A snapshot commit to `table` on a batch's branch (the stage's DELETE or append)."""

    def match(method: str, path: str, body: bytes) -> bool:
        if method != "POST" or not path.rstrip("/").endswith(f"/tables/{table}"):
            return False
        text = body.decode("utf-8", "replace").replace(" ", "")
        return '"add-snapshot"' in text and '"ref-name":"eos_batch' in text

    return match


def cuts_a_batch_branch(table: str) -> Match:
    """A commit to `table` that creates a batch's branch (`eos_batch<id>_f<fence>`) and adds no
    snapshot: the stage's branch cut, before anything is written on it."""

    def match(method: str, path: str, body: bytes) -> bool:
        if method != "POST" or not path.rstrip("/").endswith(f"/tables/{table}"):
            return False
        text = body.decode("utf-8", "replace").replace(" ", "")
        return (
            '"set-snapshot-ref"' in text and '"ref-name":"eos_batch' in text and '"add-snapshot"' not in text
        )

    return match


def creates_table(table: str) -> Match:
    """The commit that creates `table`: a POST of it to its namespace's tables without staging,
    or the commit of a staged create (its `assert-create` requirement)."""

    def match(method: str, path: str, body: bytes) -> bool:
        if method != "POST":
            return False
        text = body.decode("utf-8", "replace").replace(" ", "")
        if path.rstrip("/").endswith("/tables"):
            return f'"name":"{table}"' in text and '"stage-create":true' not in text
        return path.rstrip("/").endswith(f"/tables/{table}") and '"assert-create"' in text

    return match


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: the test's output is the client's
            return

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            fault = proxy._take(self.command, self.path, body)
            if fault is not None and fault.kind.endswith("-unforwarded"):
                status, payload = _UNFORWARDED[fault.kind.removesuffix("-unforwarded")]
                self._answer(status, _JSON, payload)
                return
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=UPSTREAM_TIMEOUT_S)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                payload = answer.read()
            finally:
                upstream.close()
            if fault is not None and fault.kind == "drop":
                self.close_connection = True
                self.connection.close()  # forwarded and applied; the client hears nothing
                return
            if fault is not None and fault.kind == "503":
                self._answer(503, _JSON, _UNAVAILABLE)
                return
            if fault is not None and fault.kind == "slow":
                time.sleep(fault.delay_s)
            kept = {k: v for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP | {"content-length"}}
            self._answer(answer.status, kept, payload)

        def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (a slow answer): nothing to tell it
                self.close_connection = True

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _forward

    return Handler


def start(upstream: str) -> tuple[FaultProxy, ThreadingHTTPServer]:
    """A proxy in front of `upstream` (http://host:port), serving on daemon threads until stop()."""
    proxy = FaultProxy("", upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.uri = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, name="fault-proxy", daemon=True).start()
    return proxy, server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()
