#!/usr/bin/env bash
# `make demo`: the project end to end on local defaults, and left running for a look around.
#   1. setup (venv, jars: only what is missing)   2. Kafka (stack/stack.sh up)
#   3. Airflow (scripts/airflow.sh up)             4. a demo stream into demo_events
#   5. the DAG eos_ingest__demo, triggered through the REST API, until it finishes
#   6. eos-ingest verify --pipeline demo           7. $EOS_STATE_DIR/demo/summary.json
# A second run appends new events and ingests only those. `make down` stops everything.
# Environment: EOS_STATE_DIR, EOS_KAFKA_BOOTSTRAP, EOS_AIRFLOW_PORT (see scripts/airflow.sh),
# EOS_DEMO_TIMEOUT (seconds for the DAG run, default 1200).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export EOS_STATE_DIR="${EOS_STATE_DIR:-$ROOT/.state}"
AF_HOME="${EOS_AIRFLOW_HOME:-$EOS_STATE_DIR/airflow}"
DEMO_DIR="$EOS_STATE_DIR/demo"
PY="$ROOT/.venv/bin/python"
STARTED=$SECONDS
STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
TIMINGS=()

step() {
  TIMINGS+=("\"$1\": $((SECONDS - STARTED))")
  printf '\n==> [%3ss] %s\n' "$((SECONDS - STARTED))" "$2"
}

step setup "setup: Python packages and jars (only what is missing)"
"$ROOT/scripts/setup.sh"
mkdir -p "$DEMO_DIR"

step kafka "Kafka on ${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}"
"$ROOT/stack/stack.sh" up

step airflow "airflow standalone"
"$ROOT/scripts/airflow.sh" up
URL="$("$ROOT/scripts/airflow.sh" url)"

step stream "demo stream: committed and aborted transactions, malformed records"
"$PY" -m eos_ingest.demo_stream --bootstrap "${EOS_KAFKA_BOOTSTRAP:-127.0.0.1:9092}" | tee "$DEMO_DIR/stream.json"

step dag "eos_ingest__demo through the REST API ($URL/api/v2)"
"$PY" - "$URL" "$AF_HOME/simple_auth_manager_passwords.json" "$DEMO_DIR/run.json" \
  "${EOS_DEMO_TIMEOUT:-1200}" <<'EOF'
import json, sys, time, urllib.error, urllib.parse, urllib.request

url, passwords, out, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
dag = "eos_ingest__demo"


def call(method, path, body=None, token=None):
    request = urllib.request.Request(
        url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


password = json.load(open(passwords))["admin"]
token = call("POST", "/auth/token", {"username": "admin", "password": password})["access_token"]
deadline = time.monotonic() + 180
while True:  # the dag-processor parses dags/ right after the start
    try:
        if not call("GET", f"/api/v2/dags/{dag}", token=token)["is_paused"]:
            break
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    if time.monotonic() > deadline:
        errors = call("GET", "/api/v2/importErrors", token=token)
        sys.exit(f"demo: {dag} did not appear within 180 s; import errors: {json.dumps(errors)}")
    time.sleep(2)
run = call("POST", f"/api/v2/dags/{dag}/dagRuns", {"logical_date": None, "conf": {}}, token)
run_id = run["dag_run_id"]
quoted = urllib.parse.quote(run_id, safe="")
print(f"demo: triggered {dag} run {run_id}; waiting (at most {timeout:.0f} s)", flush=True)
deadline, last = time.monotonic() + timeout, None
while True:
    state = call("GET", f"/api/v2/dags/{dag}/dagRuns/{quoted}", token=token)["state"]
    tasks = call("GET", f"/api/v2/dags/{dag}/dagRuns/{quoted}/taskInstances", token=token)["task_instances"]
    states = {t["task_id"]: t["state"] for t in tasks}
    if states != last:
        print("demo:   " + ", ".join(f"{k}={v}" for k, v in states.items()), flush=True)
        last = states
    if state in ("success", "failed") or time.monotonic() > deadline:
        break
    time.sleep(3)
json.dump({"dag_id": dag, "run_id": run_id, "state": state, "tasks": states}, open(out, "w"), indent=2)
if state != "success":
    failed = [t for t, s in states.items() if s == "failed"]
    for task in failed:
        log = call("GET", f"/api/v2/dags/{dag}/dagRuns/{quoted}/taskInstances/{task}/logs/1", token=token)
        lines = [c.get("event", "") if isinstance(c, dict) else str(c) for c in log.get("content", [])]
        print(f"--- last lines of {task}:\n" + "\n".join(str(x) for x in lines[-30:]), file=sys.stderr)
    sys.exit(f"demo: {dag} run {run_id} is {state} ({states}); the UI at {url} has the logs")
EOF

step verify "eos-ingest verify --pipeline demo (a read_committed consumer vs. the Delta tables)"
verify_code=0
"$ROOT/.venv/bin/eos-ingest" verify --pipeline demo >"$DEMO_DIR/verify.json" || verify_code=$?
cat "$DEMO_DIR/verify.json"

step summary "summary"
timings="{$(IFS=,; echo "${TIMINGS[*]}"), \"total\": $((SECONDS - STARTED))}"
"$PY" - "$DEMO_DIR" "$URL" "$AF_HOME/simple_auth_manager_passwords.json" "$STARTED_AT" "$timings" <<'EOF'
import json, sys
from datetime import datetime
from pathlib import Path

from eos_ingest.cli import batch_summary
from eos_ingest.config.pipeline import load_pipeline_by_name
from eos_ingest.control.store import ControlStore
from eos_ingest.quality.context import data_docs_index

demo, url, passwords, started_at, timings = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]


def durations(starts: dict) -> dict:
    """Seconds each step took, from the second at which each started."""
    names = list(starts)
    return {n: starts[names[i + 1]] - starts[n] for i, n in enumerate(names[:-1]) if n != "total"} | {
        "total": starts["total"]
    }


config = load_pipeline_by_name("demo")
store = ControlStore(config.control_db_url)
since = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
every = store.list_batches("demo", limit=1000)
mine = [b for b in every if b.created_at >= since]  # this demo's batches (a scheduled run may add one)
committed = [b for b in every if b.status.value == "committed"]
run = json.loads((demo / "run.json").read_text())
verify = json.loads((demo / "verify.json").read_text())
summary = {
    "pipeline": "demo",
    "airflow": {"url": url, "username": "admin", "password_file": passwords},
    "dag_run_ids": [run["run_id"]],
    "dag_run_state": run["state"],
    "produced": json.loads((demo / "stream.json").read_text()),
    "batches": [
        {**batch_summary(b), "dq_success": b.dq_success, "dq_report_path": b.dq_report_path,
         "airflow_run_id": b.airflow_run_id}
        for b in mine
    ],
    "records": sum(b.records_read or 0 for b in mine),
    "written": sum(b.records_written or 0 for b in mine),
    "quarantined": sum(b.records_quarantined or 0 for b in mine),
    "duplicates": verify.get("duplicates"),
    "missing": verify.get("missing"),
    "verify": verify,
    "totals": {
        "committed_batches": len(committed),
        "records_written": sum(b.records_written or 0 for b in committed),
        "records_quarantined": sum(b.records_quarantined or 0 for b in committed),
    },
    "committed_offsets": {f"{tp.topic}[{tp.partition}]": o for tp, o in sorted(store.committed_offsets("demo").items())},
    "table": str(config.output_path),
    "quarantine_table": str(config.quarantine_path),
    "data_docs": str(data_docs_index()),
    "seconds": durations(json.loads(timings)),
}
(demo / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
print(json.dumps({k: summary[k] for k in ("dag_run_ids", "records", "written", "quarantined", "duplicates",
                                           "missing", "data_docs", "seconds")}, indent=2))
EOF

password="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' "$AF_HOME/simple_auth_manager_passwords.json")"
cat <<EOF

Airflow UI : $URL   (user admin, password $password;
             kept in $AF_HOME/simple_auth_manager_passwords.json)
Summary    : $DEMO_DIR/summary.json
Data Docs  : $EOS_STATE_DIR/gx/data_docs/index.html
Table      : Delta at $EOS_STATE_DIR/tables/demo_events (quarantine: ..._quarantine)
Still running: Kafka and Airflow. 'make demo' again ingests only new events; 'make down' stops all.
EOF
if [[ "$verify_code" -ne 0 ]]; then
  echo "demo: verify found a difference (see $DEMO_DIR/verify.json)" >&2
  exit "$verify_code"
fi
