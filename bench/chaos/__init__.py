"""Chaos harness of eos-ingest: `make chaos` (python -m bench.chaos), and a short run in the tests.

run.py drives a run, procs.py starts and cleans up its processes (broker, PostgreSQL, jobs),
produce.py writes the transactions, check.py is the end check that shares no code with eos_ingest.
unknown_outcomes.py injects publishes whose outcome the job cannot know: rest_catalog.py puts an
Iceberg run's table in a REST catalog behind the fault proxy (bench/fault_proxy.py),
delta_coordinator.py a Delta run's tables on s3a with the commit coordinator behind a TCP proxy.
"""
