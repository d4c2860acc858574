"""The control DB: its tables (schema), the engine, the queries, and ControlStore, the one door to batches, offsets, fences and the VACUUM lock.

Imports plan/ and the package root."""
