"""Chaos harness of eos-ingest: `make chaos` (python -m bench.chaos), and a short run in the tests.

run.py drives a run, procs.py starts and cleans up its processes (broker, PostgreSQL, jobs),
produce.py writes the transactions, check.py is the end check that shares no code with eos_ingest.
"""
